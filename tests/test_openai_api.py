"""The OpenAI-compatible bridge in process: its translators (each chunk and event read with the
``openai`` package's own types, the emitted surface pinned), its request reading, and its routes
on the Flask test client: models, the client's history or a session's, a pause answered by the
next message, errors in OpenAI's shape before any run, auth by bearer key."""

from __future__ import annotations

import ast
import json
import typing
from pathlib import Path

import pytest
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from bread_sync import BreadError
from bread_sync.demo import config as demo_config
from bread_sync.protocols import openai_api
from bread_sync.protocols.openai_api import (
    EMITTED_CHAT_CHUNKS,
    EMITTED_RESPONSE_EVENTS,
    ChatCompletionsTranslator,
    ResponsesTranslator,
    chunk_kind,
)
from bread_sync.protocols.openai_api.requests import chat_turn, responses_turn
from bread_sync.server import auth_plugin, create_server
from bread_sync.wire import SSE_BEHIND_FOR_GOOD

from .demo_runs import DEMO_IDS, DEMO_RUNS, FRAMED_IDS, FRAMED_RUNS
from .integration import openai_config

#: The ``openai`` package's Responses stream event classes, by their ``type``.
STREAM_EVENTS = {
    typing.get_args(kind.model_fields["type"].annotation)[0]: kind
    for kind in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}
KEY = "k" * 40


def chat(crumbs, include_usage=True):
    translator = ChatCompletionsTranslator("chatcmpl_1", "echo", 1, include_usage)
    chunks = [chunk for crumb in crumbs for chunk in translator(crumb)]
    return translator, chunks


def responses(crumbs):
    translator = ResponsesTranslator("resp_1", "echo", 1)
    return translator, [event for crumb in crumbs for event in translator(crumb)]


def check_chat(chunks):
    """Every chunk is one the ``openai`` package reads: a ``ChatCompletionChunk``, or an error."""
    for chunk in chunks:
        if chunk_kind(chunk) != "error":
            ChatCompletionChunk.model_validate(chunk)


def check_responses(events):
    """Every event is a Responses stream event of the ``openai`` package, in sequence."""
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    for event in events:
        STREAM_EVENTS[event["type"]].model_validate(event)


# -- the translators -------------------------------------------------------------------------


@pytest.mark.parametrize(("agent", "given"), DEMO_RUNS, ids=DEMO_IDS)
def test_every_demo_run_translates_to_chunks_and_events_the_openai_types_read(bread, agent, given):
    crumbs = list(bread.run(agent, given))
    translator, chunks = chat(crumbs)
    check_chat(chunks)
    assert {chunk_kind(chunk) for chunk in chunks} <= EMITTED_CHAT_CHUNKS
    ChatCompletion.model_validate(translator.completion())
    translator, events = responses(crumbs)
    check_responses(events)
    assert {event["type"] for event in events} <= EMITTED_RESPONSE_EVENTS
    Response.model_validate(translator.response())


@pytest.mark.parametrize(("agent", "given"), FRAMED_RUNS, ids=FRAMED_IDS)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_frames_are_the_chunks_as_the_api_frames_them(bread, agent, given, api):
    # frames() writes a text delta into a template made once per answer: the same bytes, the same answer.
    crumbs = list(bread.run(agent, given))
    make = {"chat": lambda: ChatCompletionsTranslator("chatcmpl_1", "echo", 1, True),
            "responses": lambda: ResponsesTranslator("resp_1", "echo", 1)}[api]  # fmt: skip
    by_chunks, by_frames = make(), make()
    framed = b"".join(frame for crumb in crumbs for frame in by_frames.frames(crumb))
    assert framed == b"".join(by_chunks.frame(chunk) for crumb in crumbs for chunk in by_chunks(crumb))
    assert (by_frames.text, by_frames.extension()) == (by_chunks.text, by_chunks.extension())


def test_emitted_surface_is_pinned():
    """Adding a chunk kind or an event type is a decision: this list, the docs and the clients'
    reading of it change together. The event types are read from the translator's source."""
    assert EMITTED_CHAT_CHUNKS == {"role", "content", "finish", "usage", "error"}
    pinned = {
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed", "response.failed", "error",
        "response.reasoning_text.delta", "response.reasoning_text.done",
    }  # fmt: skip
    assert EMITTED_RESPONSE_EVENTS == pinned
    tree = ast.parse((Path(openai_api.__file__).parent / "translator.py").read_text(encoding="utf-8"))
    emitted = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "_event"
    }
    assert emitted == pinned


def test_chat_chunks_say_the_agent_s_text_then_stop_with_usage_and_done_fields():
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
        {"type": "text:delta", "runId": "r", "delta": "Hel"},
        {"type": "text:delta", "runId": "r", "delta": "lo"},
        {"type": "agent:run:end", "runId": "r", "output": "Hello",
         "usage": {"inputTokens": 7, "outputTokens": 2, "totalTokens": 9}},
    ]  # fmt: skip
    translator, chunks = chat(crumbs)
    check_chat(chunks)
    assert [chunk_kind(chunk) for chunk in chunks] == ["role", "content", "content", "finish", "usage"]
    assert chunks[3]["bread"] == {"runId": "r", "sessionId": "s", "status": "completed"}
    assert chunks[4]["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    whole = ChatCompletion.model_validate(translator.completion())
    assert whole.choices[0].message.content == "Hello" and whole.usage.total_tokens == 9
    _, events = responses(crumbs)
    check_responses(events)
    done = events[-1]["response"]
    assert done["usage"]["input_tokens"] == 7 and done["output"][0]["content"][0]["text"] == "Hello"


def test_reasoning_streams_as_chat_reasoning_content_and_stays_out_of_the_answer():
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
        {"type": "reasoning:delta", "runId": "r", "delta": "Hmm."},
        {"type": "text:delta", "runId": "r", "delta": "Yes"},
        {"type": "agent:run:end", "runId": "r", "output": "Yes"},
    ]  # fmt: skip
    translator, chunks = chat(crumbs)
    check_chat(chunks)
    assert chunks[1]["choices"][0]["delta"] == {"reasoning_content": "Hmm."}
    assert chunk_kind(chunks[1]) == "content"
    assert ChatCompletion.model_validate(translator.completion()).choices[0].message.content == "Yes"
    translator, events = responses(crumbs)
    check_responses(events)
    kinds = [event["type"] for event in events]
    thought, said = kinds.index("response.reasoning_text.delta"), kinds.index("response.output_text.delta")
    assert events[thought]["delta"] == "Hmm." and events[thought]["output_index"] == 0
    assert kinds.index("response.reasoning_text.done") < said and events[said]["output_index"] == 1
    whole = Response.model_validate(translator.response())
    assert [item.type for item in whole.output] == ["reasoning", "message"]
    assert whole.output[0].content[0].text == "Hmm." and whole.output_text == "Yes"


def test_each_stretch_of_thinking_is_a_reasoning_item_of_its_own_beside_the_one_message():
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
        {"type": "reasoning:delta", "runId": "r", "delta": "First "},
        {"type": "reasoning:delta", "runId": "r", "delta": "thought."},
        {"type": "text:delta", "runId": "r", "delta": "Look"},
        {"type": "tool:call", "runId": "r", "toolCallId": "t1", "toolName": "search", "input": {}},
        {"type": "reasoning:delta", "runId": "r", "delta": "Second."},
        {"type": "text:delta", "runId": "r", "delta": "ed."},
        {"type": "agent:run:end", "runId": "r", "output": "Looked."},
    ]  # fmt: skip
    translator, events = responses(crumbs)
    check_responses(events)
    added = [(e["output_index"], e["item"]["type"]) for e in events if e["type"] == "response.output_item.added"]
    assert added == [(0, "reasoning"), (1, "message"), (2, "reasoning")]
    done = [e["output_index"] for e in events if e["type"] == "response.output_item.done"]
    assert sorted(done) == [0, 1, 2] and done[-1] == 1  # each item closed once, the message last
    whole = Response.model_validate(translator.response())
    assert [item.content[0].text for item in whole.output] == ["First thought.", "Looked.", "Second."]
    framed = ResponsesTranslator("resp_1", "echo", 1)  # the delta templates' path writes the same
    assert b"".join(f for crumb in crumbs for f in framed.frames(crumb)) == b"".join(map(translator.frame, events))


def test_a_run_that_reports_no_usage_has_none():
    crumbs = [{"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
              {"type": "agent:run:end", "runId": "r", "output": ""}]  # fmt: skip
    translator, chunks = chat(crumbs)
    assert chunks[-1]["usage"] is None and "usage" not in translator.completion()
    translator, events = responses(crumbs)
    assert translator.response()["usage"] is None
    assert [event["type"] for event in events] == ["response.created", "response.in_progress", "response.completed"]


def test_a_subagent_s_and_a_task_s_text_are_not_the_answer(bread):
    translator, _ = chat(bread.run("manager"))
    assert translator.completion()["choices"][0]["message"]["content"] == "Echo said it back; it has 4 words."


def test_a_pause_ends_the_answer_with_what_it_awaits_and_the_checkpoint(bread):
    translator, chunks = chat(bread.run("writer", "cats"))
    said = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"])
    assert said == "Drafting a post about cats.\n\nApprove the call of publish? Answer yes or no."
    finish = next(chunk for chunk in chunks if chunk_kind(chunk) == "finish")
    checkpoint = finish["bread"]["checkpoint"]
    assert finish["bread"]["status"] == "paused" and checkpoint["id"].startswith("cp_")
    assert (checkpoint["kind"], checkpoint["toolName"], checkpoint["input"]) == (
        "approval",
        "publish",
        {"title": "cats"},
    )
    translator, events = responses(bread.run("interviewer"))
    check_responses(events)
    assert translator.response()["bread"]["checkpoint"]["question"] == "What is your name?"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "What is your name?"


def test_a_failure_is_an_error_in_openai_s_shape_with_bread_s_code():
    failed = BreadError("MODEL_ERROR", "the model is down")
    crumbs = [{"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
              {"type": "agent:error", "runId": "r", "error": failed}]  # fmt: skip
    _, chunks = chat(crumbs)
    assert chunks[-1] == {"error": {"message": "the model is down", "type": "server_error", "code": "MODEL_ERROR",
                                    "param": None}}  # fmt: skip
    translator, events = responses(crumbs)
    check_responses(events)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"] and events[-2]["code"] == "MODEL_ERROR"
    assert translator.response()["bread"]["error"] == {"code": "MODEL_ERROR", "message": "the model is down"}


# -- the requests ----------------------------------------------------------------------------


def test_a_chat_body_is_the_last_user_message_on_the_history_before_it():
    turn = chat_turn({"model": "echo", "stream": True, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
        {"role": "user", "content": [{"type": "text", "text": "thr"}, {"type": "text", "text": "ee"}]},
    ]})  # fmt: skip
    assert (turn.agent_id, turn.text, turn.stream) == ("echo", "three", True)
    assert turn.history == [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    assert turn.instructions == ["Be brief."]
    turn = responses_turn({"model": "echo", "input": "hi", "instructions": "Be brief."})
    assert (turn.text, turn.history, turn.instructions) == ("hi", [], ["Be brief."])


@pytest.mark.parametrize(
    ("read", "body", "param"),
    [
        (chat_turn, {"messages": [{"role": "user", "content": "x"}]}, "model"),
        (chat_turn, {"model": "echo", "messages": []}, "messages"),
        (chat_turn, {"model": "echo", "messages": [{"role": "assistant", "content": "x"}]}, "messages"),
        (chat_turn, {"model": "echo", "messages": [{"role": "tool", "content": "x", "tool_call_id": "t"},
                                                   {"role": "user", "content": "x"}]}, "messages.0"),
        (chat_turn, {"model": "echo", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
        (chat_turn, {"model": "echo", "n": 2, "messages": [{"role": "user", "content": "x"}]}, "n"),
        (responses_turn, {"model": "echo", "input": 3}, "input"),
        (responses_turn, {"model": "echo", "input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ],
)  # fmt: skip
def test_a_body_bread_cannot_take_is_invalid_request_naming_the_param(read, body, param):
    with pytest.raises(BreadError) as caught:
        read(body)
    assert caught.value.code == "INVALID_REQUEST" and caught.value.context["param"] == param


# -- the routes ------------------------------------------------------------------------------


def serve(make_bread, *plugins, **server):
    config = demo_config()
    if plugins:
        config = config.model_copy(update={"plugins": list(plugins)})
    return create_server(make_bread(config, transport="http-sse", server=server)).test_client()


def data_frames(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.split("\n") if line.startswith("data: ")]


def test_the_demo_serves_every_agent_as_a_model(make_bread):
    client = serve(make_bread)
    listed = client.get("/v1/models").get_json()
    assert listed["object"] == "list" and [Model.model_validate(m).id for m in listed["data"]] == [
        agent.id for agent in demo_config().agents
    ]
    assert client.get("/v1/models/writer").get_json()["id"] == "writer"
    missing = client.get("/v1/models/nope")
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_a_mount_serves_the_agents_it_names(make_bread):
    client = serve(make_bread, openai_api.openai_api("/openai/v1", agents=["slow", "echo"]))
    assert [m["id"] for m in client.get("/openai/v1/models").get_json()["data"]] == ["slow", "echo"]
    refused = client.post("/openai/v1/chat/completions", json={"model": "writer", "messages": [
        {"role": "user", "content": "x"}]})  # fmt: skip
    assert refused.status_code == 404 and refused.get_json()["error"]["param"] == "model"


def test_a_streamed_chat_completion_is_chunks_then_done_naming_its_run_and_session(make_bread):
    client = serve(make_bread)
    answer = client.post("/v1/chat/completions", json={"model": "echo", "stream": True, "messages": [
        {"role": "user", "content": "one two"}]})  # fmt: skip
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    frames = data_frames(answer.get_data(as_text=True))
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(frame) for frame in frames[:-1]]
    check_chat(chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "one two"
    assert chunks[-1]["bread"]["runId"] == answer.headers["Bread-Run-Id"]
    assert chunks[-1]["bread"]["sessionId"] == answer.headers["Bread-Session-Id"]


def test_a_streamed_response_is_typed_events(make_bread):
    client = serve(make_bread)
    answer = client.post("/v1/responses", json={"model": "echo", "input": "one two", "stream": True})
    text = answer.get_data(as_text=True)
    events = [json.loads(frame) for frame in data_frames(text)]
    check_responses(events)
    assert [line.removeprefix("event: ") for line in text.split("\n") if line.startswith("event: ")] == [
        event["type"] for event in events
    ]
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "one two"


@pytest.mark.parametrize(
    ("path", "body", "end"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 300}]}, b"[DONE]"),
        ("/v1/responses", {"input": "word " * 300}, b"response.completed"),
    ],
)
def test_a_stream_whose_client_fell_behind_ends_with_no_advice_to_reconnect(make_bread, path, body, end):
    """These streams have no resume: a client that stopped reading loses the answer's end, and
    the stream's last words say so, and that its run goes on (no Last-Event-ID)."""
    client = serve(make_bread, max_stream_backlog=20)
    answer = client.post(path, json={"model": "echo", "stream": True, **body})  # its client reads nothing yet
    bread = client.application.extensions["bread_sync"].bread
    assert bread.wait(answer.headers["Bread-Run-Id"], 30)["status"] == "completed"
    text = answer.get_data()
    assert text.endswith(SSE_BEHIND_FOR_GOOD) and end not in text


def test_the_client_s_history_is_the_run_s_and_a_named_session_s_replaces_it(make_bread):
    client = serve(make_bread)
    body = {"model": "echo", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                          {"role": "user", "content": "c"}]}  # fmt: skip
    answer = client.post("/v1/chat/completions", json=body)
    session_id = answer.headers["Bread-Session-Id"]
    said = [(m["role"], m["content"]) for m in client.get(f"/sessions/{session_id}").get_json()["messages"]]
    assert said == [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "c")]
    again = client.post("/v1/chat/completions", json=body, headers={"Bread-Session-Id": session_id})
    assert again.headers["Bread-Session-Id"] == session_id
    said = [m["content"] for m in client.get(f"/sessions/{session_id}").get_json()["messages"]]
    assert said == ["a", "b", "c", "c", "c", "c"]  # only the last message was new


def test_a_pause_is_answered_by_the_next_message_on_the_session(make_bread):
    client = serve(make_bread)
    paused = client.post("/v1/chat/completions", json={"model": "writer", "messages": [
        {"role": "user", "content": "cats"}]}).get_json()  # fmt: skip
    assert paused["bread"]["status"] == "paused"
    session = {"Bread-Session-Id": paused["bread"]["sessionId"]}
    answered = client.post("/v1/responses", json={"model": "writer", "input": " Yes "}, headers=session).get_json()
    assert answered["output"][0]["content"][0]["text"] == "Published."
    assert answered["bread"] == {"runId": paused["bread"]["runId"], "sessionId": session["Bread-Session-Id"],
                                 "status": "completed"}  # fmt: skip


def test_a_malformed_body_is_400_in_openai_s_shape_before_any_run(make_bread):
    client = serve(make_bread)
    for route in ("/v1/chat/completions", "/v1/responses"):
        for body in ("{", "[]", json.dumps({"model": "echo"})):
            answer = client.post(route, data=body, content_type="application/json")
            error = answer.get_json()["error"]
            assert answer.status_code == 400 and set(error) == {"message", "type", "code", "param"}
            assert (error["type"], error["code"]) == ("invalid_request_error", "INVALID_REQUEST")
    assert client.get("/runs").get_json() == []


def test_an_input_the_agent_refuses_is_400_before_any_run(make_bread):
    client = serve(make_bread)
    answer = client.post("/v1/chat/completions", json={"model": "slow", "messages": [
        {"role": "user", "content": "no number"}]})  # fmt: skip
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "INPUT_INVALID"
    assert "Bread-Run-Id" not in answer.headers


def test_a_failed_run_not_streamed_is_its_error_and_the_clients_do_not_retry_it(make_bread):
    client = create_server(make_bread(openai_config.config(), transport="http-sse")).test_client()
    answer = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {openai_config.KEY}"},
                         json={"model": "broken", "messages": [{"role": "user", "content": "x"}]})  # fmt: skip
    assert answer.status_code == 500 and answer.headers["x-should-retry"] == "false"
    assert answer.get_json() == {"error": {"message": "the model is down", "type": "server_error",
                                           "code": "MODEL_ERROR", "param": None}}  # fmt: skip
    assert client.get(f"/runs/{answer.headers['Bread-Run-Id']}", headers={
        "Authorization": f"Bearer {openai_config.KEY}"}).get_json()["status"] == "failed"  # fmt: skip


def test_the_api_key_as_a_bearer_is_the_caller_and_a_session_hook_decides(make_bread):
    plugin = openai_api.openai_api(authorize_session=lambda identity, session_id: session_id.startswith("mine"))
    client = serve(make_bread, auth_plugin(api_keys=[KEY], env_var=None), plugin, authorize=lambda *_: True)
    body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    assert client.post("/v1/chat/completions", json=body).status_code == 401
    bearer = {"Authorization": f"Bearer {KEY}"}
    assert client.post("/v1/chat/completions", json=body, headers=bearer).status_code == 200
    theirs = client.post("/v1/chat/completions", json=body, headers={**bearer, "Bread-Session-Id": "theirs"})
    assert theirs.status_code == 403
    mine = client.post("/v1/chat/completions", json=body, headers={**bearer, "Bread-Session-Id": "mine-1"})
    assert mine.get_json()["choices"][0]["message"]["content"] == "hi"


def test_another_site_s_page_may_not_drive_the_routes(make_bread):
    client = serve(make_bread)
    body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    refused = client.post("/v1/chat/completions", json=body, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and refused.get_json() == {"error": "Forbidden"}
    assert client.get("/runs").get_json() == []
