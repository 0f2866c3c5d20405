"""The ``openai`` provider against a local server speaking the chat-completions streaming wire.

The server is real HTTP on 127.0.0.1: it plays scripted responses (SSE streams, errors, stalls)
and records what it was sent. Runs go through the public runtime, as an app would drive them.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest

from bread_sync import Agent, to_wire_crumb
from bread_sync.errors import INPUT_INVALID, MODEL_ERROR
from bread_sync.models import openai as openai_provider
from bread_sync.models.sdk import NO_KEY

from .fake_provider import (
    STALL,
    STALL_LIMIT,
    Add,
    Fail,
    FakeProvider,
    Stream,
    add,
    assert_a_cancel_interrupts_a_blocked_read,
    is_reading_the_socket,
    types,
)
from .files_input import PDF, PNG, b64, picture_input

openai = pytest.importorskip("openai")


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def text(*parts: str) -> list[dict[str, Any]]:
    return [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in parts] + [chunk({}, "stop")]


def tool_call(call_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    opening = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    parts = [{"index": 0, "function": {"arguments": fragment}} for fragment in fragments]
    return (
        [chunk({"role": "assistant", "tool_calls": [opening]})]
        + [chunk({"tool_calls": [part]}) for part in parts]
        + [chunk({}, "tool_calls")]
    )


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def server(provider_server):
    return provider_server


def llm(server: FakeProvider, **opts: Any) -> openai_provider.OpenAIProvider:
    return openai_provider.provider(model="m", base_url=server.url, api_key=opts.pop("api_key", "test"), **opts)


# -- tests -------------------------------------------------------------------------------------


def test_text_streams_as_deltas_and_the_output_is_the_whole_text(server, bread_for):
    server.play(Stream(text("Hel", "lo ", "world")))
    agent = Agent(id="a", model=llm(server, params={"temperature": 0.2, "top_k": 5}), prompt="Be brief.")

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert [c["delta"] for c in crumbs if c["type"] == "text:delta"] == ["Hel", "lo ", "world"]
    assert crumbs[-1]["type"] == "agent:run:end"
    assert crumbs[-1]["output"] == "Hello world"
    (sent,) = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == "Bearer test"
    body = sent["body"]
    assert body["model"] == "m"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.2
    assert body["top_k"] == 5
    assert "tools" not in body
    assert "response_format" not in body


def test_a_streamed_tool_call_runs_the_tool_and_the_result_goes_back(server, bread_for):
    server.play(
        Stream(tool_call("call_1", "add", '{"a": 2', ', "b": 3}')),
        Stream(text("The sum ", "is 5.")),
    )
    crumbs = list(bread_for(Agent(id="a", model=llm(server), tools=[add])).run("a", "2+3?"))

    assert types(crumbs) == [
        "agent:run:start",
        "tool:input:start",
        "tool:input:delta",
        "tool:input:delta",
        "tool:input:end",
        "tool:call",
        "tool:result",
        "text:delta",
        "text:delta",
        "agent:run:end",
    ]
    start, first, second = crumbs[1:4]
    assert (start["toolCallId"], start["toolName"]) == ("call_1", "add")
    assert first["delta"] + second["delta"] == '{"a": 2, "b": 3}'
    assert crumbs[5]["input"] == {"a": 2, "b": 3}
    assert crumbs[6]["output"] == 5
    assert crumbs[-1]["output"] == "The sum is 5."

    offered, answered = (request["body"] for request in server.requests)
    assert offered["tools"] == [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add two numbers.", "parameters": Add.model_json_schema()},
        }
    ]
    assert answered["messages"] == [
        {"role": "user", "content": "2+3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]


def test_arguments_that_are_not_json_reach_the_tool_validation_and_go_back_as_sent(server, bread_for):
    server.play(Stream(tool_call("call_1", "add", '{"a": 2,')), Stream(text("Sorry.")))

    crumbs = list(bread_for(Agent(id="a", model=llm(server), tools=[add])).run("a", "2+3?"))

    call, failed = (c for c in crumbs if c["type"] in ("tool:call", "tool:error"))
    assert call["input"] == '{"a": 2,'
    assert failed["error"].code == INPUT_INVALID
    assert crumbs[-1]["output"] == "Sorry."
    assistant, tool_message = server.requests[1]["body"]["messages"][1:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"a": 2,'
    assert json.loads(tool_message["content"])["error"]["code"] == INPUT_INVALID


def test_a_server_error_is_retried_by_the_client(server, bread_for):
    server.play(Fail(500, "try again"), Stream(text("ok")))

    crumbs = list(bread_for(Agent(id="a", model=llm(server))).run("a", "hi"))

    assert crumbs[-1]["type"] == "agent:run:end"
    assert crumbs[-1]["output"] == "ok"
    assert len(server.requests) == 2


def test_a_persistent_server_error_is_a_model_error_without_the_api_key(server, bread_for):
    key = "sk-secret-123"
    server.play(*[Fail(500, f"upstream broke while serving Bearer {key}")] * 2)
    agent = Agent(id="a", model=llm(server, api_key=key, max_retries=1))

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert crumbs[-1]["type"] == "agent:error"
    error = crumbs[-1]["error"]
    assert error.code == MODEL_ERROR
    assert "500" in error.message
    assert "upstream broke" in error.message
    assert error.context["status"] == 500
    assert key not in json.dumps([to_wire_crumb(c) for c in crumbs])
    assert key not in repr(agent)
    assert len(server.requests) == 2
    assert server.requests[0]["authorization"] == f"Bearer {key}"


def test_a_stalled_stream_times_out_as_a_model_error(server, bread_for):
    server.play(Stream([*text("Hel")[:2], STALL]))
    agent = Agent(id="a", model=llm(server, timeout=0.5))

    started = time.monotonic()
    crumbs = list(bread_for(agent).run("a", "hi"))

    assert time.monotonic() - started < STALL_LIMIT / 2
    assert types(crumbs) == ["agent:run:start", "text:delta", "agent:error"]
    assert crumbs[-1]["error"].code == MODEL_ERROR
    assert "timed out" in crumbs[-1]["error"].message
    assert len(server.requests) == 1  # a stream that broke midway is not replayed


def test_a_cancel_interrupts_a_blocked_read(server, bread_for):
    server.play(Stream([*text("Hel")[:2], STALL]))
    bread = bread_for(Agent(id="a", model=llm(server, timeout=30)))
    assert_a_cancel_interrupts_a_blocked_read(bread, server, is_reading_the_socket)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"error": {"message": "model overloaded"}}, "reported an error (APIError): model overloaded"),
        ("{not json", "malformed stream"),
    ],
)
def test_a_broken_stream_is_a_model_error(server, bread_for, bad, says):
    server.play(Stream([*text("Hel")[:2], bad]))

    crumbs = list(bread_for(Agent(id="a", model=llm(server))).run("a", "hi"))

    assert types(crumbs) == ["agent:run:start", "text:delta", "agent:error"]
    assert crumbs[-1]["error"].code == MODEL_ERROR
    assert says in crumbs[-1]["error"].message


def test_json_output_asks_for_a_json_object(server, bread_for):
    server.play(Stream(text('{"ok": ', "true}")))

    crumbs = list(bread_for(Agent(id="a", model=llm(server), output="json")).run("a", "status as json"))

    assert crumbs[-1]["output"] == {"ok": True}
    assert server.requests[0]["body"]["response_format"] == {"type": "json_object"}


def test_a_client_passed_in_is_reused_and_left_open(server, bread_for):
    client = openai.OpenAI(base_url=server.url, api_key="own", max_retries=0)
    server.play(Stream(text("one")), Stream(text("two")))
    bread = bread_for(Agent(id="a", model=openai_provider.provider(model="m", client=client)))
    try:
        outputs = [list(bread.run("a", "hi"))[-1]["output"] for _ in range(2)]
        assert not client.is_closed()
    finally:
        client.close()

    assert outputs == ["one", "two"]
    assert [request["authorization"] for request in server.requests] == ["Bearer own"] * 2


def test_a_provider_name_reads_the_environment_and_needs_no_key(server, bread_for, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.play(Stream(text("hi")))

    crumbs = list(bread_for(Agent(id="a", model="openai:gpt-4o-mini")).run("a", "hello"))

    assert crumbs[-1]["output"] == "hi"
    (sent,) = server.requests
    assert sent["body"]["model"] == "gpt-4o-mini"
    assert sent["authorization"] == f"Bearer {NO_KEY}"


def test_a_missing_client_library_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)

    with pytest.raises(ImportError) as missing:
        openai_provider.provider(model="m")
    assert str(missing.value).endswith('pip install "bread-sync[openai]" (in a clone: pip install -e ".[openai]")')


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    """The last chunk of a stream asked for usage: no choices, the call's token counts."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**chunk({}), "choices": [], "usage": usage}


def test_the_runs_usage_sums_what_the_api_reported_for_each_call(server, bread_for):
    server.play(
        Stream(tool_call("call_1", "add", '{"a": 2, "b": 3}') + [usage_chunk(10, 4)]),
        Stream(text("5.") + [usage_chunk(20, 2)]),
    )
    bread = bread_for(Agent(id="a", model=llm(server), tools=[add]))

    crumbs = list(bread.run("a", "2+3?"))

    assert all(request["body"]["stream_options"] == {"include_usage": True} for request in server.requests)
    expected = {
        "inputTokens": 30,
        "outputTokens": 6,
        "totalTokens": 36,
        "byModel": {"openai:m": {"inputTokens": 30, "outputTokens": 6, "totalTokens": 36}},
    }
    assert crumbs[-1]["type"] == "agent:run:end" and crumbs[-1]["usage"] == expected
    assert bread.store.get_run(crumbs[-1]["runId"])["usage"] == expected


def test_a_traced_runs_requests_carry_the_model_calls_span_as_their_parent(server, bread_for):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    server.play(Stream(text("Hi.") + [usage_chunk(8, 2)]))
    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread = bread_for(Agent(id="a", model=llm(server)))
    bread.tracer = otel.tracer(spans)

    list(bread.run("a", "hi"))

    (chat,) = [span for span in exporter.get_finished_spans() if span.name == "chat m"]
    (sent,) = server.requests
    assert sent["traceparent"].split("-")[1:3] == [f"{chat.context.trace_id:032x}", f"{chat.context.span_id:016x}"]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 8 and chat.attributes["gen_ai.usage.output_tokens"] == 2


def test_reasoning_content_streams_as_reasoning_and_never_goes_back(server, bread_for):
    server.play(
        Stream(
            [chunk({"role": "assistant", "reasoning_content": "Sum "}), chunk({"reasoning_content": "them."})]
            + tool_call("call_1", "add", '{"a": 2, "b": 3}')
        ),
        Stream([chunk({"reasoning": "Done."})] + text("5.")),
    )

    crumbs = list(bread_for(Agent(id="a", model=llm(server), tools=[add])).run("a", "2+3?"))

    assert [c["delta"] for c in crumbs if c["type"] == "reasoning:delta"] == ["Sum ", "them.", "Done."]
    assert crumbs[-1]["output"] == "5."
    assert "them." not in json.dumps(server.requests[1]["body"]["messages"])


PDF_URL = "data:application/pdf;base64," + b64(PDF)


def test_an_image_and_a_pdf_go_as_data_url_parts_before_the_text(server, bread_for):
    server.play(Stream(text("A cat.")))
    bread = bread_for(Agent(id="a", model=llm(server)))

    crumbs = list(bread.run("a", picture_input(bread)))

    assert crumbs[-1]["output"] == "A cat."
    (sent,) = server.requests
    assert sent["body"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}},
                {
                    "type": "file",
                    "file": {"filename": "paper.pdf", "file_data": "data:application/pdf;base64," + b64(PDF)},
                },
                {"type": "text", "text": "What is in these?"},
            ],
        }
    ]
