"""The ``anthropic`` provider: the official SDK against a local server speaking the Messages
API's streaming wire (tests/fake_provider.py), driven through the public runtime."""

from __future__ import annotations

from typing import Any

import pytest

from bread_sync import Agent
from bread_sync.errors import (
    MODEL_AUTH_FAILED,
    MODEL_CONTEXT_TOO_LONG,
    MODEL_OVERLOADED,
    MODEL_RATE_LIMITED,
)
from bread_sync.models import anthropic as anthropic_provider

from .fake_provider import (
    STALL,
    Add,
    Fail,
    Stream,
    add,
    assert_a_cancel_interrupts_a_blocked_read,
    is_reading_the_socket,
    types,
)
from .files_input import PDF, PNG, b64, picture_input

pytest.importorskip("anthropic")


# -- the Messages API's stream -----------------------------------------------------------------


def text(*parts: str) -> tuple[str, list[str]]:
    return ("text", list(parts))


def tool_use(call_id: str, name: str, *fragments: str) -> tuple[str, str, str, list[str]]:
    return ("tool_use", call_id, name, list(fragments))


def thinking(*parts: str, signature: str = "sig-1") -> tuple[str, list[str], str]:
    return ("thinking", list(parts), signature)


def message(*blocks: tuple, input_tokens: int = 10, output_tokens: int = 5) -> Stream:
    """One streamed message: its blocks (``text``, ``tool_use``, ``thinking``), then its usage."""
    usage = {"input_tokens": input_tokens, "output_tokens": 1}
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    start |= {"stop_reason": None, "stop_sequence": None, "usage": usage}
    events: list[Any] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        events += _block(index, block)
    stop = "tool_use" if any(block[0] == "tool_use" for block in blocks) else "end_turn"
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    events.append(("message_delta", delta | {"usage": {"output_tokens": output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return Stream(events, end=None)


def _block(index: int, block: tuple) -> list[Any]:
    kind = block[0]
    if kind == "text":
        opening, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in block[1]]
    elif kind == "tool_use":
        opening = {"type": "tool_use", "id": block[1], "name": block[2], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in block[3]]
    else:
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in block[1]]
        deltas.append({"type": "signature_delta", "signature": block[2]})
    events = [("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    return events + [("content_block_stop", {"type": "content_block_stop", "index": index})]


def error_body(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}}


# -- fixtures ----------------------------------------------------------------------------------


def llm(server: Any, **opts: Any) -> anthropic_provider.AnthropicProvider:
    opts.setdefault("max_retries", 0)
    return anthropic_provider.provider(model="m", base_url=server.origin, api_key="sk-test", **opts)


def key_sent(request: dict[str, Any]) -> str:
    """The API key a request carried (``x-api-key``, or a bearer token as newer SDKs send it)."""
    headers = request["headers"]
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


# -- tests -------------------------------------------------------------------------------------


def test_text_streams_as_deltas_with_the_calls_usage(provider_server, bread_for):
    provider_server.play(message(text("Hel", "lo"), input_tokens=12, output_tokens=3))
    agent = Agent(id="a", model=llm(provider_server, params={"temperature": 0.2}), prompt="Be brief.")

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert [c["delta"] for c in crumbs if c["type"] == "text:delta"] == ["Hel", "lo"]
    assert crumbs[-1]["output"] == "Hello"
    assert crumbs[-1]["usage"]["byModel"] == {"anthropic:m": {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}}
    (sent,) = provider_server.requests
    assert sent["path"] == "/v1/messages"
    assert key_sent(sent) == "sk-test"
    assert sent["body"] == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": anthropic_provider.DEFAULT_MAX_TOKENS,
        "system": "Be brief.",
        "temperature": 0.2,
    }


def test_tool_input_streams_and_the_result_goes_back_in_a_tool_loop(provider_server, bread_for):
    provider_server.play(
        message(text("Adding."), tool_use("toolu_1", "add", '{"a": 2', ', "b": 3}')),
        message(text("It is 5.")),
    )

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server), tools=[add])).run("a", "2+3?"))

    assert types(crumbs) == [
        "agent:run:start",
        "text:delta",
        "tool:input:start",
        "tool:input:delta",
        "tool:input:delta",
        "tool:input:end",
        "tool:call",
        "tool:result",
        "text:delta",
        "agent:run:end",
    ]
    assert crumbs[6]["input"] == {"a": 2, "b": 3}
    assert crumbs[-1]["output"] == "It is 5."
    offered, answered = (request["body"] for request in provider_server.requests)
    assert offered["tools"] == [
        {"name": "add", "input_schema": Add.model_json_schema(), "description": "Add two numbers."}
    ]
    assert answered["messages"] == [
        {"role": "user", "content": "2+3?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"}]},
    ]


def test_thinking_streams_as_reasoning_and_goes_back_signed_only_within_its_tool_loop(provider_server, bread_for):
    provider_server.play(
        message(thinking("Two ", "and three."), tool_use("toolu_1", "add", '{"a": 2, "b": 3}')),
        message(thinking("Done."), text("5.")),
        message(text("Again 5.")),
    )
    params = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048}
    bread = bread_for(Agent(id="a", model=llm(provider_server, params=params), tools=[add]))

    crumbs = list(bread.run("a", "2+3?", session="s"))
    again = list(bread.run("a", "and again?", session="s"))

    reasoning = [c["delta"] for c in crumbs if c["type"] == "reasoning:delta"]
    assert reasoning == ["Two ", "and three.", "Done."]
    assert crumbs[-1]["output"] == "5."
    logged = [(f.type, f.crumb.get("delta")) for f in bread.store.get_crumbs(crumbs[0]["runId"], after=0)]
    assert ("reasoning:delta", "Two and three.") in logged and ("reasoning:delta", "Done.") in logged
    assert logged.index(("reasoning:delta", "Done.")) + 1 == logged.index(("text:delta", "5."))
    first, in_loop, after_loop = (request["body"] for request in provider_server.requests)
    assert first["thinking"] == params["thinking"] and first["max_tokens"] == 2048
    signed = {"type": "thinking", "thinking": "Two and three.", "signature": "sig-1"}
    assert in_loop["messages"][1]["content"][0] == signed  # the API requires it back in the loop
    assert again[-1]["output"] == "Again 5."
    assert "thinking" not in str(after_loop["messages"])  # the loop ended: never sent again


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (429, error_body("rate_limit_error", "slow down"), MODEL_RATE_LIMITED),
        (529, error_body("overloaded_error", "Overloaded"), MODEL_OVERLOADED),
        (401, error_body("authentication_error", "invalid x-api-key"), MODEL_AUTH_FAILED),
        (400, error_body("invalid_request_error", "prompt is too long: 210000 tokens"), MODEL_CONTEXT_TOO_LONG),
    ],
)
def test_the_providers_errors_become_bread_codes(provider_server, bread_for, status, body, code):
    provider_server.play(Fail(status, "", {"retry-after": "7"}, body))

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server))).run("a", "hi"))

    error = crumbs[-1]["error"]
    assert (crumbs[-1]["type"], error.code) == ("agent:error", code)
    assert body["error"]["message"] in error.message
    assert error.context["status"] == status and error.context["retryAfter"] == 7.0
    assert error.context["retryable"] is (code in (MODEL_RATE_LIMITED, MODEL_OVERLOADED))
    assert "sk-test" not in error.message


def test_an_overload_mid_stream_is_the_runs_error_after_its_text(provider_server, bread_for):
    stream = message(text("Hel", "lo"))
    stream.chunks[4:] = [("error", error_body("overloaded_error", "Overloaded"))]
    provider_server.play(stream)

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server))).run("a", "hi"))

    assert types(crumbs) == ["agent:run:start", "text:delta", "text:delta", "agent:error"]
    assert crumbs[-1]["error"].code == MODEL_OVERLOADED
    assert "mid-stream" in crumbs[-1]["error"].message


def test_a_provider_name_reads_the_providers_environment(provider_server, bread_for, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider_server.origin)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    provider_server.play(message(text("hi")))

    crumbs = list(bread_for(Agent(id="a", model="anthropic:claude-x")).run("a", "hello"))

    assert crumbs[-1]["output"] == "hi"
    (sent,) = provider_server.requests
    assert (sent["body"]["model"], key_sent(sent)) == ("claude-x", "sk-env")
    assert crumbs[-1]["usage"]["byModel"].keys() == {"anthropic:claude-x"}


def test_a_cancel_interrupts_a_blocked_read(provider_server, bread_for):
    stream = message(text("Hel", "lo"))
    stream.chunks[3:] = [STALL]  # after the first delta, the server holds the stream open
    provider_server.play(stream)
    bread = bread_for(Agent(id="a", model=llm(provider_server, timeout=30)))
    assert_a_cancel_interrupts_a_blocked_read(bread, provider_server, is_reading_the_socket)


def test_an_image_and_a_pdf_go_as_base64_blocks_before_the_text(provider_server, bread_for):
    provider_server.play(message(text("A cat.")))
    bread = bread_for(Agent(id="a", model=llm(provider_server)))

    crumbs = list(bread.run("a", picture_input(bread)))

    assert crumbs[-1]["output"] == "A cat."
    (sent,) = provider_server.requests
    assert sent["body"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}},
                {"type": "text", "text": "What is in these?"},
            ],
        }
    ]
