"""The invariant of the one canonical crumb stream, for every kind of run the core has."""

import threading

import pytest
from pydantic import BaseModel

from bread_sync import Agent, CancelToken, Config, tool
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say

from .canonical import Recorder, assert_canonical


class Numbers(BaseModel):
    a: int
    b: int


@tool
def add(numbers: Numbers, ctx) -> dict:
    """Add two numbers."""
    return {"sum": numbers.a + numbers.b}


@tool
def explode(numbers: Numbers, ctx) -> dict:
    """Always fails."""
    raise RuntimeError("/secret/path/to/server.py exploded")


calculator = Agent(
    id="calculator",
    model=script.provider([
        say("Let me add. "),
        call("add", {"a": 2, "b": 3}),
        call("explode", {"a": 1, "b": 1}),
        lambda convo: say(f"The sum is {convo.messages[-2]['content']}."),
    ]),
    tools=[add, explode],
)  # fmt: skip


def tools_config() -> Config:
    config = demo_config()
    return config.model_copy(update={"agents": [*config.agents, calculator]})


def run_recorded(bread, agent_id, input=None, **kwargs):
    run_id = f"run_{agent_id}_{threading.get_ident()}_{id(kwargs)}"
    recorder = Recorder(bread, run_id)
    yielded = list(bread.run(agent_id, input, run_id=run_id, **kwargs))
    return run_id, recorder, yielded


def test_text_run_agrees_everywhere(bread):
    run_id, recorder, yielded = run_recorded(bread, "echo", "one two three four")
    log = assert_canonical(bread, run_id, recorder, yielded)
    assert [f.type for f in log] == ["agent:run:start", "text:delta", "agent:run:end"]
    assert log[1].crumb["delta"] == "one two three four"
    assert [f.seq for f in recorder.listened] == [1, 1, 1, 1, 1, 3]


def test_tool_run_agrees_everywhere_and_a_raising_tool_is_a_tool_error(make_bread):
    bread = make_bread(tools_config())
    run_id, recorder, yielded = run_recorded(bread, "calculator")
    log = assert_canonical(bread, run_id, recorder, yielded)
    types = [f.type for f in log]
    assert types.count("tool:call") == 2
    assert "tool:result" in types and "tool:error" in types
    error = next(f.crumb for f in log if f.type == "tool:error")["error"]
    assert error["code"] == "TOOL_FAILED" and "/secret" not in error["message"]
    assert yielded[-1]["type"] == "agent:run:end"
    assert yielded[-1]["output"] == 'The sum is {"sum": 5}.'


@pytest.mark.parametrize(
    ("response", "ending"), [({"approved": True}, "Published."), ({"approved": False}, "Not published.")]
)
def test_hitl_run_agrees_across_pause_and_resume(make_bread, response, ending):
    bread = make_bread()
    run_id, recorder, first = run_recorded(bread, "writer", {"topic": "bread"})
    assert first[-1]["type"] == "human:required"
    resumed = list(bread.resume(first[-1]["checkpointId"], response))
    log = assert_canonical(bread, run_id, recorder, first + resumed)
    assert resumed[0]["type"] == "human:resumed"
    assert resumed[-1] == {"type": "agent:run:end", "runId": run_id, "output": ending}
    pause_seq = next(f.seq for f in log if f.type == "human:required")
    assert next(f.seq for f in log if f.type == "human:resumed") == pause_seq + 1


def test_input_tool_run_agrees_across_pause_and_resume(bread):
    run_id, recorder, first = run_recorded(bread, "interviewer")
    assert first[-1]["kind"] == "input" and first[-1]["input"] == {"question": "What is your name?"}
    resumed = list(bread.resume(first[-1]["checkpointId"], {"answer": "Ada"}))
    assert_canonical(bread, run_id, recorder, first + resumed)
    assert resumed[-1]["output"] == "Thanks, Ada."


def test_cancelled_run_agrees_everywhere_and_its_log_says_so(bread):
    token = CancelToken()
    run_id = "run_cancelled"
    recorder = Recorder(bread, run_id)
    yielded = []
    for crumb in bread.run("slow", {"count": 1000, "delayMs": 1}, run_id=run_id, signal=token):
        yielded.append(crumb)
        if crumb.get("delta") == "tick 3 ":
            token.cancel()
    log = assert_canonical(bread, run_id, recorder, yielded)
    assert log[-1].crumb["type"] == "agent:error"
    assert log[-1].crumb["error"]["code"] == "RUN_CANCELLED"
    assert log[-2].crumb == {"type": "text:delta", "runId": run_id, "delta": "tick 1 tick 2 tick 3 "}
    assert bread.store.get_run(run_id)["status"] == "cancelled"


def test_a_durable_crumb_is_in_the_log_before_anyone_sees_it(bread):
    missing = []

    def check(frame):
        if frame.durable and frame.seq > bread.store.last_seq(frame.run_id):
            missing.append(frame.seq)

    bread.on("crumb", check)
    bread.run("writer", {"topic": "bread"}, mode="sync")
    assert missing == []


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_run_is_settled_in_the_store_by_the_time_its_last_crumb_is_seen(make_bread, tmp_path, store):
    """Status, checkpoint, session messages and the session's release commit with the crumb
    that ends or pauses the run: a client reacting to that crumb never finds the run unsettled."""
    bread = make_bread(store=store, instance_path=tmp_path)
    seen = {}

    def check(frame):
        if frame.type in ("agent:run:end", "human:required"):
            record = bread.store.get_run(frame.run_id)
            session = bread.store.get_session(record["sessionId"])
            checkpoint = bread.store.get_checkpoint(record["checkpointId"]) if record["checkpointId"] else None
            free = bread.store.claim_session(record["sessionId"], "run_other") is None
            bread.store.release_session(record["sessionId"], "run_other")
            seen[frame.type] = (record["status"], checkpoint and checkpoint["status"], len(session["messages"]), free)

    bread.on("crumb", check)
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert seen["human:required"] == ("paused", "pending", 2, True)  # the user message and the call
    assert seen["agent:run:end"][0] == "completed" and seen["agent:run:end"][3] is True
    assert seen["agent:run:end"][2] > 2


def test_a_run_another_process_declared_dead_does_not_end_as_completed(make_bread, tmp_path):
    bread = make_bread(store="sqlite", instance_path=tmp_path)
    run = bread.run("echo", "a b c", run_id="dead")
    assert next(run)["type"] == "agent:run:start"
    # What another process's sweep does first when this one's lease lapsed: the status, then
    # (not yet here) its interruption crumb. The run's end must not overwrite it.
    bread.store.update_run("dead", status="interrupted", owner=None)
    list(run)
    assert [f.type for f in bread.store.get_crumbs("dead")] == ["agent:run:start"]
    assert bread.store.get_run("dead")["status"] == "interrupted"
