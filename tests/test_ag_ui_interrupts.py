"""HITL over AG-UI in process: a pause is an interrupt RUN_FINISHED, a later RunAgentInput with
``resume`` continues the run (or cancels it), on the run-ownership hook and the thread check."""

from __future__ import annotations

import pytest

from bread_sync.demo import config as demo_config
from bread_sync.protocols.ag_ui import APPROVAL_SCHEMA, ag_ui
from bread_sync.server import create_server

from .ag_ui_rules import check_stream, decode_sse


def turn(text, thread, run="r1"):
    return {"threadId": thread, "runId": run, "messages": [{"id": "m", "role": "user", "content": text}]}


def resume(interrupt_id, thread, status="resolved", payload=None, run="r2"):
    entry = {"interruptId": interrupt_id, "status": status}
    if payload is not None:
        entry["payload"] = payload
    return {"threadId": thread, "runId": run, "messages": [], "resume": [entry]}


@pytest.fixture
def serve(make_bread):
    def make(**server):
        plugins = [ag_ui(agent_id="writer", path="/ag-ui/writer"), ag_ui(agent_id="interviewer", path="/ag-ui/ask")]
        config = demo_config().model_copy(update={"plugins": plugins})
        bread = make_bread(config, transport="http-sse", server=server)
        return bread, create_server(bread).test_client()

    return make


def post(client, path, payload, status=200):
    answer = client.post(path, json=payload)
    assert answer.status_code == status, answer.get_data(as_text=True)
    if status != 200:
        return answer
    events = decode_sse(answer.get_data(as_text=True))
    check_stream(events)
    return events


def interrupt_of(events):
    outcome = events[-1]["outcome"]
    assert events[-1]["type"] == "RUN_FINISHED" and outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    return interrupt


def test_an_approval_is_an_interrupt_and_a_resolved_resume_continues_the_run(serve):
    bread, client = serve()
    interrupt = interrupt_of(post(client, "/ag-ui/writer", turn("bread", "t-approve")))
    checkpoint = bread.store.get_checkpoint(interrupt["id"])
    assert bread.store.get_run(checkpoint["runId"])["checkpointId"] == interrupt["id"]
    assert interrupt == {
        "id": interrupt["id"],
        "reason": "approval",
        "toolCallId": interrupt["toolCallId"],
        "message": "Approve the call of publish?",
        "responseSchema": APPROVAL_SCHEMA,
        "metadata": {"toolName": "publish", "input": {"title": "bread"}},
    }
    events = post(client, "/ag-ui/writer", resume(interrupt["id"], "t-approve", payload={"approved": True}))
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t-approve", "runId": "r2", "protocolVersion": "1.0"}
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == "Published."
    assert '"published":true' in next(e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert bread.store.get_run(checkpoint["runId"])["status"] == "completed"


def test_a_cancelled_approval_denies_it(serve):
    _, client = serve()
    interrupt = interrupt_of(post(client, "/ag-ui/writer", turn("bread", "t-deny")))
    events = post(client, "/ag-ui/writer", resume(interrupt["id"], "t-deny", status="cancelled"))
    assert events[-1]["result"] == "Not published."


def test_an_input_interrupt_names_its_tools_schema_and_takes_an_answer(serve):
    _, client = serve()
    interrupt = interrupt_of(post(client, "/ag-ui/ask", turn("hi", "t-input")))
    assert (interrupt["reason"], interrupt["message"]) == ("input", "What is your name?")
    assert interrupt["metadata"] == {"toolName": "ask_user", "input": {"question": "What is your name?"}}
    schema = interrupt["responseSchema"]  # the tool's own: a name, or {"answer": name}
    assert schema["anyOf"] == [{"type": "string"}, {"$ref": "#/$defs/Answer"}]
    assert schema["$defs"]["Answer"]["required"] == ["answer"]
    events = post(client, "/ag-ui/ask", resume(interrupt["id"], "t-input", payload={"answer": "Ann"}))
    assert events[-1]["result"] == "Thanks, Ann."


def test_a_cancelled_input_cancels_the_paused_run(serve):
    bread, client = serve()
    interrupt = interrupt_of(post(client, "/ag-ui/ask", turn("hi", "t-cancel")))
    answer = client.post("/ag-ui/ask", json=resume(interrupt["id"], "t-cancel", status="cancelled"))
    assert "Bread-Run-Id" not in answer.headers
    events = decode_sse(answer.get_data(as_text=True))
    check_stream(events)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    run_id = bread.store.get_checkpoint(interrupt["id"])["runId"]
    assert bread.store.get_run(run_id)["status"] == "cancelled"


def test_an_unknown_a_used_or_another_threads_interrupt_is_a_run_error(serve):
    _, client = serve()
    interrupt = interrupt_of(post(client, "/ag-ui/writer", turn("bread", "t-used")))

    def code(payload):
        events = post(client, "/ag-ui/writer", payload)
        assert [e["type"] for e in events] == ["RUN_ERROR"]
        return events[0]["code"]

    assert code(resume("chk_nope", "t-used", payload={"approved": True})) == "CHECKPOINT_NOT_FOUND"
    assert code(resume(interrupt["id"], "t-other", payload={"approved": True})) == "CHECKPOINT_NOT_FOUND"
    assert code(resume(interrupt["id"], "t-used", payload={"yes": 1})) == "INVALID_REQUEST"  # not burnt
    post(client, "/ag-ui/writer", resume(interrupt["id"], "t-used", payload={"approved": True}))
    assert code(resume(interrupt["id"], "t-used", payload={"approved": True})) == "CHECKPOINT_ALREADY_RESUMED"
    assert code(resume(interrupt["id"], "t-used", status="cancelled")) == "CHECKPOINT_ALREADY_RESUMED"


def test_a_resume_passes_the_run_ownership_hook_and_the_thread_check(serve, make_bread):
    refused = set()
    bread, client = serve(authorize_run=lambda identity, run_id: run_id not in refused)
    interrupt = interrupt_of(post(client, "/ag-ui/writer", turn("bread", "t-own")))
    refused.add(bread.store.get_checkpoint(interrupt["id"])["runId"])
    # Another caller's interrupt is answered exactly as an unknown one.
    theirs = client.post("/ag-ui/writer", json=resume(interrupt["id"], "t-own", payload={"approved": True}))
    unknown = client.post("/ag-ui/writer", json=resume("chk_nope", "t-own", payload={"approved": True}))
    assert [e["code"] for e in decode_sse(unknown.get_data(as_text=True))] == ["CHECKPOINT_NOT_FOUND"]
    assert theirs.status_code == unknown.status_code == 200
    assert theirs.get_data(as_text=True).replace(interrupt["id"], "chk_nope") == unknown.get_data(as_text=True)
    assert bread.store.get_checkpoint(interrupt["id"])["status"] == "pending"
    refused.clear()
    plugin = ag_ui(agent_id="writer", path="/ag-ui/writer", authorize_thread=lambda identity, thread: thread != "t-own")
    config = demo_config().model_copy(update={"plugins": [plugin]})
    guarded = create_server(make_bread(config, store=bread.store, transport="http-sse")).test_client()
    post(guarded, "/ag-ui/writer", resume(interrupt["id"], "t-own", payload={"approved": True}), status=403)


def test_a_resume_holds_one_entry(serve):
    _, client = serve()
    two = resume("a", "t-two")
    two["resume"] *= 2
    answer = post(client, "/ag-ui/writer", two, status=400)
    assert answer.get_json()["error"]["code"] == "INVALID_REQUEST"
