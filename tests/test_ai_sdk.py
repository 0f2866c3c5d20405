"""The AI SDK bridge: the demo agents' crumb streams as UI message streams (the chunk surface
pinned), its request reading, and its routes in a Flask test client (the ``ai`` package's own
transport reads them against a real server in tests/integration/test_ai_sdk_client.py)."""

from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest

from bread_sync import Agent, BreadError, Config, tool
from bread_sync.demo import config as demo_config
from bread_sync.demo import publish
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.protocols import ai_sdk
from bread_sync.protocols.ai_sdk import EMITTED_CHUNK_TYPES, UiMessageStreamTranslator, sse
from bread_sync.protocols.ai_sdk import ai_sdk as ai_sdk_plugin
from bread_sync.protocols.ai_sdk.requests import answer, chat_request, turn_text
from bread_sync.protocols.ai_sdk.translator import PART_CHUNKS
from bread_sync.server import create_server

from .demo_runs import DEMO_IDS, DEMO_RUNS, FRAMED_IDS, FRAMED_RUNS


def translate(crumbs, translator=None) -> list[dict]:
    translator = translator or UiMessageStreamTranslator()
    return [chunk for crumb in crumbs for chunk in translator(crumb)]


def check_stream(chunks: list[dict], calls: tuple[str, ...] = ()) -> None:
    """What the SDK's stream processing relies on: ``start`` first, text deltas inside their
    open part, every text and step closed before ``finish``, tool outputs and approvals of
    announced calls, data parts with ids; nothing after the end but a continuation's start."""
    assert chunks[0]["type"] == "start"
    texts, step, known, ended = set(), False, set(calls), False
    for chunk in chunks:
        kind = chunk["type"]
        assert not ended or kind == "start", f"{kind} after the end"
        if kind == "start":
            ended = False
        elif kind == "start-step":
            assert not step
            step = True
        elif kind == "finish-step":
            assert step and not texts
            step = False
        elif kind == "text-start":
            assert step
            texts.add(chunk["id"])
        elif kind in ("text-delta", "text-end"):
            assert chunk["id"] in texts
            if kind == "text-end":
                texts.discard(chunk["id"])
        elif kind in ("tool-input-start", "tool-input-available", "file"):
            assert step
            known.add(chunk.get("toolCallId"))
        elif kind.startswith("tool-"):
            assert chunk["toolCallId"] in known
        elif kind.startswith("data-"):
            assert isinstance(chunk["id"], str) and "data" in chunk
        if kind in ("finish", "abort", "error"):
            assert not texts and not step
            ended = True
    assert ended


@pytest.mark.parametrize(("agent", "given"), DEMO_RUNS, ids=DEMO_IDS)
def test_every_demo_agent_translates_to_a_well_formed_stream(bread, agent, given):
    check_stream(translate(bread.run(agent, given)))


@pytest.mark.parametrize(("agent", "given"), FRAMED_RUNS, ids=FRAMED_IDS)
def test_frames_are_the_chunks_as_sse_writes_them(bread, agent, given):
    crumbs = list(bread.run(agent, given))
    by_chunks, by_frames = UiMessageStreamTranslator(), UiMessageStreamTranslator()
    framed = b"".join(frame for crumb in crumbs for frame in by_frames.frames(crumb))
    assert framed == b"".join(sse(chunk) for chunk in translate(crumbs, by_chunks))


def test_echo_is_one_message_of_one_step_of_text(bread):
    chunks = translate(bread.run("echo", "hello there"))
    run_id = chunks[0]["messageMetadata"]["runId"]
    assert chunks[0] == {"type": "start", "messageId": f"msg_{run_id}", "messageMetadata": {"runId": run_id}}
    assert [c["type"] for c in chunks if c["type"] != "text-delta"] == [
        "start", "start-step", "text-start", "text-end", "finish-step", "finish"]  # fmt: skip
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "hello there"
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


def test_an_approval_pause_is_a_tool_approval_request_and_its_answer_continues_the_message(bread):
    paused = translate(bread.run("writer", {"topic": "rye"}))
    call = next(c for c in paused if c["type"] == "tool-input-available")
    request = paused[-3]
    assert (call["toolName"], call["input"], call["providerExecuted"]) == ("publish", {"title": "rye"}, True)
    assert request == {"type": "tool-approval-request", "approvalId": request["approvalId"],
                       "toolCallId": call["toolCallId"]}  # fmt: skip
    assert paused[-1] == {"type": "finish", "finishReason": "tool-calls"}
    resumed = translate(bread.resume(request["approvalId"], {"approved": True}))
    check_stream(resumed, calls=(call["toolCallId"],))
    assert resumed[0]["messageId"] == paused[0]["messageId"]  # the client appends to the paused message
    assert resumed[1] == {"type": "tool-output-available", "toolCallId": call["toolCallId"], "providerExecuted": True,
                          "output": {"published": True, "title": "rye"}}  # fmt: skip


def test_a_denied_call_is_tool_output_denied(bread):
    paused = translate(bread.run("writer", {"topic": "rye"}))
    request = next(c for c in paused if c["type"] == "tool-approval-request")
    resumed = translate(bread.resume(request["approvalId"], {"approved": False}))
    assert [c for c in resumed if c["type"].startswith("tool-")] == [
        {"type": "tool-output-denied", "toolCallId": request["toolCallId"], "providerExecuted": True}
    ]


def test_an_input_pause_is_a_tool_call_left_for_the_ui_to_answer(bread):
    chunks = translate(bread.run("interviewer"), UiMessageStreamTranslator(frozenset({"ask_user"})))
    assert [c["type"] for c in chunks if c["type"] != "tool-input-delta"] == [
        "start", "start-step", "tool-input-start", "tool-input-available", "finish-step", "finish"]  # fmt: skip
    call = chunks[-3]
    assert call["toolName"] == "ask_user" and call["input"] == {"question": "What is your name?"}
    assert "providerExecuted" not in call  # the UI's to answer: the SDK's helpers send its output


def test_a_file_is_a_file_part_with_the_blob_store_url(bread):
    chunks = translate(bread.run("artist"))
    (file,) = [c for c in chunks if c["type"] == "file"]
    assert file["mediaType"] == "image/png" and file["url"].startswith("/files/")


def test_subagents_tasks_loops_and_pipeline_steps_are_data_parts_updated_by_id(bread):
    manager = translate(bread.run("manager"))
    subagent = [c for c in manager if c["type"] == "data-subagent"]
    assert [c["id"] for c in subagent] == ["subagent_1", "subagent_1"]
    assert subagent[-1]["data"]["status"] == "completed" and subagent[-1]["data"]["subagentId"] == "echo"
    tasks = [c for c in manager if c["type"] == "data-task"]
    assert tasks[-1]["data"]["taskId"] == "word-count" and tasks[-1]["data"]["status"] == "completed"
    assert len({c["id"] for c in tasks}) == 1
    loop = [c for c in translate(bread.run("counter", {"until": 2})) if c["type"] == "data-loop"]
    assert len({c["id"] for c in loop}) == 1 and loop[-1]["data"]["iteration"] == 2
    steps = [
        c
        for c in translate(bread.run_pipeline("draft-then-echo", {"topic": "rye"}))
        if c["type"] == "data-pipeline-step"
    ]
    assert steps[0]["data"] == {"pipelineId": "draft-then-echo", "stepName": "writer", "index": 0, "status": "running"}


def test_a_tool_result_starts_a_new_step(bread):
    chunks = translate(bread.run("manager"))
    kinds = [c["type"] for c in chunks]
    assert kinds.count("start-step") == 3 == kinds.count("finish-step")  # echo, word-count, the answer


def test_a_bread_error_is_an_error_chunk_and_a_cancel_an_abort():
    failed = translate([{"type": "agent:run:start", "runId": "r"}, {"type": "text:delta", "runId": "r", "delta": "a"},
                        {"type": "agent:error", "runId": "r", "error": BreadError("MODEL_ERROR", "down")}])  # fmt: skip
    assert [c["type"] for c in failed][-3:] == ["text-end", "finish-step", "error"]
    assert failed[-1] == {"type": "error", "errorText": "MODEL_ERROR: down"}
    cancelled = translate([{"type": "agent:error", "runId": "r", "error": BreadError("RUN_CANCELLED", "cancelled")}])
    assert [c["type"] for c in cancelled] == ["start", "abort"]


def test_a_tool_error_is_tool_output_error():
    chunks = translate([{"type": "tool:error", "runId": "r", "toolCallId": "t", "toolName": "x",
                         "error": {"code": "TOOL_FAILED", "message": "no"}}])  # fmt: skip
    assert chunks[-1] == {"type": "tool-output-error", "toolCallId": "t", "providerExecuted": True,
                          "errorText": "TOOL_FAILED: no"}  # fmt: skip


def test_a_tool_progress_is_a_data_part_updated_in_place_by_call():
    progress = {"type": "tool:progress", "runId": "r", "toolCallId": "t", "progress": 2, "total": 5}
    chunks = translate([progress, {**progress, "progress": 5, "message": "done"}])
    parts = [c for c in chunks if c["type"] == "data-tool-progress"]
    assert parts == [
        {"type": "data-tool-progress", "id": "progress_t", "data": {"toolCallId": "t", "progress": 2, "total": 5}},
        {"type": "data-tool-progress", "id": "progress_t",
         "data": {"toolCallId": "t", "progress": 5, "total": 5, "message": "done"}},
    ]  # fmt: skip


def test_every_chunk_the_demo_emits_is_on_the_pinned_surface(bread):
    seen = {c["type"] for agent, given in DEMO_RUNS for c in translate(bread.run(agent, given))}
    assert seen <= EMITTED_CHUNK_TYPES


def test_reasoning_streams_as_a_reasoning_part_closed_before_the_text_that_follows():
    crumbs = [
        {"type": "agent:run:start", "runId": "run_r", "agentId": "a", "sessionId": "s", "input": "hi"},
        {"type": "reasoning:delta", "runId": "run_r", "delta": "Let me "},
        {"type": "reasoning:delta", "runId": "run_r", "delta": "think."},
        {"type": "text:delta", "runId": "run_r", "delta": "Done."},
        {"type": "agent:run:end", "runId": "run_r", "output": "Done."},
    ]
    chunks = translate(crumbs)

    check_stream(chunks)
    assert [(c["type"], c.get("id"), c.get("delta")) for c in chunks[1:-2]] == [
        ("start-step", None, None),
        ("reasoning-start", "reasoning_1", None),
        ("reasoning-delta", "reasoning_1", "Let me "),
        ("reasoning-delta", "reasoning_1", "think."),
        ("reasoning-end", "reasoning_1", None),
        ("text-start", "text_1", None),
        ("text-delta", "text_1", "Done."),
        ("text-end", "text_1", None),
    ]


def test_emitted_chunk_surface_is_pinned():
    """Adding a chunk type to the bridge is a decision: this list, the docs and the SDK's reading
    of it change together. The types the translator writes are read from its source."""
    pinned = {
        "start", "finish", "abort", "error", "start-step", "finish-step",
        "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta", "reasoning-end",
        "tool-input-start", "tool-input-delta", "tool-input-available", "tool-approval-request",
        "tool-output-available", "tool-output-error", "tool-output-denied",
        "file", "data-subagent", "data-task", "data-loop", "data-pipeline-step", "data-tool-progress",
    }  # fmt: skip
    assert EMITTED_CHUNK_TYPES == pinned
    tree = ast.parse((Path(ai_sdk.__file__).parent / "translator.py").read_text(encoding="utf-8"))
    written = {
        value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values, strict=True)
        if isinstance(key, ast.Constant) and key.value == "type" and isinstance(value, ast.Constant)
    }
    data = {f"data-{n.args[0].value}" for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "attr", "") == "_data" and isinstance(n.args[0], ast.Constant)}  # fmt: skip
    parts = {chunk for chunks in PART_CHUNKS.values() for chunk in chunks}
    assert written | data | parts == pinned


# -- the requests ----------------------------------------------------------------------------


def user(text: str) -> dict:
    return {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [user("x")]},
        {"id": " ", "messages": [user("x")]},
        {"id": "c", "messages": []},
        {"id": "c", "messages": [user("x")], "trigger": "regenerate-message"},
        {"id": "c", "messages": [{"role": "system", "parts": []}]},
        {"id": "c", "messages": [{"role": "user", "parts": "x"}]},
        {"id": "c", "messages": [user("x")], "messageId": 3},
    ],
)
def test_a_malformed_body_is_invalid_request(body):
    with pytest.raises(BreadError) as caught:
        chat_request(body)
    assert caught.value.code == "INVALID_REQUEST"


def test_the_new_turn_is_the_last_user_message_s_text():
    given = chat_request({"id": "c", "messages": [user("old"), user("new")], "trigger": "submit-message"})
    assert (given.chat_id, given.answers, turn_text(given.last)) == ("c", False, "new")
    with pytest.raises(BreadError):
        turn_text({"role": "user", "parts": [{"type": "file", "url": "x", "mediaType": "image/png"}]})


def test_an_answer_is_read_from_the_paused_call_s_part():
    approval = {"id": "cp_1", "kind": "approval", "toolCallId": "t1"}
    part = {"type": "tool-publish", "toolCallId": "t1", "state": "approval-responded",
            "approval": {"id": "cp_1", "approved": True}}  # fmt: skip
    assert answer({"parts": [part]}, approval) == {"approved": True}
    with pytest.raises(BreadError):
        answer({"parts": [{**part, "approval": {"id": "cp_other", "approved": True}}]}, approval)
    question = {"id": "cp_2", "kind": "input", "toolCallId": "t2"}
    given = {"type": "tool-ask_user", "toolCallId": "t2", "state": "output-available", "output": "Ada"}
    assert answer({"parts": [given]}, question) == {"answer": "Ada"}
    with pytest.raises(BreadError):
        answer({"parts": [{**given, "state": "input-available"}]}, question)


# -- the routes ------------------------------------------------------------------------------


def serve(make_bread, *plugins):
    config = demo_config()
    if plugins:
        config = config.model_copy(update={"plugins": list(plugins)})
    return create_server(make_bread(config, transport="http-sse")).test_client()


def chunks_of(response) -> list:
    frames = [line.removeprefix("data: ") for line in response.text.split("\n") if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    return [json.loads(frame) for frame in frames[:-1]]


def test_the_demo_serves_a_chat_as_a_ui_message_stream(make_bread):
    client = serve(make_bread)
    response = client.post(
        "/ai-sdk/echo", json={"id": "chat-1", "messages": [user("hi there")], "trigger": "submit-message"}
    )
    assert response.status_code == 200 and response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.mimetype == "text/event-stream"
    chunks = chunks_of(response)
    check_stream(chunks)
    assert chunks[0]["messageMetadata"]["runId"] == response.headers["Bread-Run-Id"]


def test_the_answer_to_an_approval_resumes_the_chat_s_paused_run(make_bread):
    client = serve(make_bread)
    paused = chunks_of(client.post("/ai-sdk/writer", json={"id": "chat-w", "messages": [user("rye")]}))
    request = next(c for c in paused if c["type"] == "tool-approval-request")
    part = {"type": "tool-publish", "toolCallId": request["toolCallId"], "state": "approval-responded",
            "input": {"title": "rye"}, "approval": {"id": request["approvalId"], "approved": True}}  # fmt: skip
    assistant = {"id": paused[0]["messageId"], "role": "assistant", "parts": [part]}
    resumed = client.post("/ai-sdk/writer", json={"id": "chat-w", "messages": [user("rye"), assistant]})
    assert resumed.status_code == 200 and resumed.headers["Bread-Run-Id"] == paused[0]["messageMetadata"]["runId"]
    text = "".join(c["delta"] for c in chunks_of(resumed) if c["type"] == "text-delta")
    assert text == "Published."
    again = client.post("/ai-sdk/writer", json={"id": "chat-w", "messages": [user("rye"), assistant]})
    assert again.status_code == 404 and again.get_json()["error"]["code"] == "CHECKPOINT_NOT_FOUND"


def test_malformed_bodies_are_400_before_any_run(make_bread):
    made = make_bread(demo_config(), transport="http-sse")
    client = create_server(made).test_client()
    for body in ({"id": "c", "messages": []}, [1], {"id": "c", "messages": [{"role": "user", "parts": []}]}):
        refused = client.post("/ai-sdk/echo", json=body)
        assert refused.status_code == 400 and refused.get_json()["error"]["code"] == "INVALID_REQUEST"
    assert made.store.list_runs() == []


def test_the_stream_and_stop_routes_answer_204_when_the_chat_runs_nothing(make_bread):
    client = serve(make_bread)
    assert client.get("/ai-sdk/echo/nothing/stream").status_code == 204
    assert client.post("/ai-sdk/echo/nothing/stop").status_code == 204


def test_the_thread_hook_guards_every_route(make_bread):
    client = serve(make_bread, ai_sdk_plugin("echo", authorize_thread=lambda identity, chat: chat == "mine"))
    assert client.post("/ai-sdk/echo", json={"id": "theirs", "messages": [user("x")]}).status_code == 403
    assert client.get("/ai-sdk/echo/theirs/stream").status_code == 403
    assert client.post("/ai-sdk/echo/theirs/stop").status_code == 403
    assert client.post("/ai-sdk/echo", json={"id": "mine", "messages": [user("x")]}).status_code == 200


def gated_writer():
    """An agent that waits at a gate before its pause and after it: the test opens each."""
    gate = threading.Semaphore(0)

    @tool
    def wait(input, ctx) -> str:
        """Waits until the test opens the gate."""
        assert gate.acquire(timeout=30), "the test never opened the gate"
        return "open"

    steps = [call("wait", {}), call("publish", {"title": "rye"}), call("wait", {}), say("Done.")]
    agent = Agent(id="gated", model=script.provider(steps), tools=[wait, publish])
    return Config(agents=[agent], plugins=[ai_sdk_plugin("gated")]), gate


def test_a_resumed_stream_replays_past_an_answered_pause_and_ends_at_a_waiting_one(make_bread):
    config, gate = gated_writer()
    client = create_server(make_bread(config, transport="http-sse")).test_client()
    first = client.post("/ai-sdk/gated", json={"id": "chat-g", "messages": [user("go")]})
    resumed = client.get("/ai-sdk/gated/chat-g/stream")  # the run waits at its first gate
    gate.release()
    paused = chunks_of(resumed)
    assert paused == chunks_of(first)  # the whole stream so far, to the pause that waits
    assert [c["type"] for c in paused[-3:]] == ["tool-approval-request", "finish-step", "finish"]
    request = paused[-3]
    part = {"type": "tool-publish", "toolCallId": request["toolCallId"], "state": "approval-responded",
            "approval": {"id": request["approvalId"], "approved": True}}  # fmt: skip
    assistant = {"id": paused[0]["messageId"], "role": "assistant", "parts": [part]}
    answered = client.post("/ai-sdk/gated", json={"id": "chat-g", "messages": [user("go"), assistant]})
    replay = client.get("/ai-sdk/gated/chat-g/stream")  # the continuation waits at its second gate
    gate.release()
    chunks = chunks_of(replay)
    check_stream(chunks)
    assert chunks == paused + chunks_of(answered)  # every part once: both requests' streams, in order
    assert [c["type"] for c in chunks].count("start") == 2 and chunks[-1]["finishReason"] == "stop"
    assert client.get("/ai-sdk/gated/chat-g/stream").status_code == 204
