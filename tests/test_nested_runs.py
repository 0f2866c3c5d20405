"""Pipelines, loops, tasks, subagents and files: each end to end in process, with the
canonical-stream invariant, HITL and cancel inside each kind of nesting, and bad input."""

import threading

import pytest
from pydantic import BaseModel, model_validator

from bread_sync import Agent, BreadError, CancelToken, Config, tool
from bread_sync.agents import subagent
from bread_sync.crumbs import TERMINAL
from bread_sync.demo import DOT_PNG
from bread_sync.demo import config as demo_config
from bread_sync.loops import Loop
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.pipelines import Pipeline, Step
from bread_sync.stores import memory

from .canonical import Recorder, assert_canonical


class Nothing(BaseModel):
    pass


@tool(ask=True)
def approve_me(data: Nothing, ctx) -> str:
    """Needs a human's yes."""
    return "approved"


looper = Agent(
    id="looper",
    model=script.provider([call("approve_me", {}), lambda convo: say(f"round {convo.input['iteration']}")]),
    tools=[approve_me],
    loop=Loop(max_iterations=2),
)
slow_loop = Agent(id="slow-loop", model=script.provider([say(["t1 ", "t2 ", "t3 "], delay=30)]), loop=Loop(3))
delegator = Agent(
    id="delegator",
    model=script.provider([
        lambda convo: call("writer", {"topic": "nested"}),
        lambda convo: say(f"The writer said: {convo.last_tool_output}"),
    ]),
    tools=[subagent("writer")],
)  # fmt: skip
echo_json = Agent(id="echo-json", model="echo", output="json")
slow_delegator = Agent(
    id="slow-delegator",
    model=script.provider([call("slow", {"count": 5, "delayMs": 30_000}), say("never")]),
    tools=[subagent("slow")],
)


def nested_config() -> Config:
    config = demo_config()
    pipelines = [*config.pipelines, Pipeline("slow-pipe", [Step(agent="slow", name="ticks")]),
                 Pipeline("counted", [Step(agent="echo-json"), Step(task="word-count")])]  # fmt: skip
    return config.model_copy(update={
        "agents": [*config.agents, looper, slow_loop, delegator, slow_delegator, echo_json], "pipelines": pipelines,
    })  # fmt: skip


@pytest.fixture
def nested(make_bread):
    return make_bread(nested_config(), blob_store="memory")


def recorded(bread, start, run_id):
    recorder = Recorder(bread, run_id)
    return recorder, list(start(run_id))


def finish(bread, run_id, recorder, crumbs, responses=()):
    """Resume each pause with the next response; then check the canonical invariant."""
    responses = list(responses)
    while crumbs[-1]["type"] == "human:required":
        crumbs += list(bread.resume(crumbs[-1]["checkpointId"], responses.pop(0)))
    log = assert_canonical(bread, run_id, recorder, crumbs)
    assert [f.type for f in log].count("agent:run:start") == 1
    assert [f.type for f in log if f.type in TERMINAL] == [log[-1].type]
    return log


# -- each capability, with the invariant ---------------------------------------------------------


def test_a_pipeline_chains_steps_and_pauses_and_resumes_inside_a_step(nested):
    recorder, crumbs = recorded(
        nested, lambda rid: nested.run_pipeline("draft-then-echo", {"topic": "rye"}, run_id=rid), "p1"
    )
    assert crumbs[-1]["type"] == "human:required"
    log = finish(nested, "p1", recorder, crumbs, [{"approved": True}])
    frames = [(f.type, f.crumb.get("index")) for f in log if f.type.startswith("pipeline:")]
    assert frames == [
        ("pipeline:step:start", 0),
        ("pipeline:step:end", 0),
        ("pipeline:step:start", 1),
        ("pipeline:step:end", 1),
    ]
    assert log[-1].crumb["output"] == "Published."
    ends = [f.crumb["output"] for f in log if f.type == "pipeline:step:end"]
    assert ends == ["Published.", "Published."]


def test_a_pipeline_step_can_be_a_task(nested):
    recorder, crumbs = recorded(
        nested, lambda rid: nested.run_pipeline("counted", '{"text": "one two three"}', run_id=rid), "p2"
    )
    log = finish(nested, "p2", recorder, crumbs)
    assert log[-1].crumb["output"] == {"words": 3}
    assert [f.type for f in log].count("task:end") == 1


def test_a_loop_runs_until_its_condition_and_is_recorded(nested):
    recorder, crumbs = recorded(nested, lambda rid: nested.run("counter", {"until": 3}, run_id=rid), "l1")
    log = finish(nested, "l1", recorder, crumbs)
    loop_crumbs = [f.crumb for f in log if f.type.startswith("loop:")]
    assert [(c["phase"], c["iteration"]) for c in loop_crumbs] == [
        ("start", 0), ("iteration:start", 1), ("iteration:end", 1), ("iteration:start", 2), ("iteration:end", 2),
        ("iteration:start", 3), ("iteration:end", 3), ("end", 3),
    ]  # fmt: skip
    assert len({c["loopId"] for c in loop_crumbs}) == 1 and loop_crumbs[-1]["reason"] == "condition"
    recorded_loop = nested.store.get_loop(loop_crumbs[0]["loopId"])
    assert recorded_loop["loop"]["status"] == "completed" and recorded_loop["loop"]["iterations"] == 3
    assert [(i["index"], i["output"], i["status"]) for i in recorded_loop["iterations"]] == [
        (1, "1", "completed"), (2, "2", "completed"), (3, "3", "completed"),
    ]  # fmt: skip


def test_a_loop_stops_at_max_iterations(nested):
    result = nested.run("counter", {"until": 50}, mode="sync")
    end = [c for c in result.crumbs if c["type"] == "loop:end"][0]
    assert end["iteration"] == 10 and end["reason"] == "max_iterations" and result.output == "10"


def test_a_loop_pauses_inside_an_iteration_and_resumes_there(nested):
    recorder, crumbs = recorded(nested, lambda rid: nested.run("looper", None, run_id=rid), "l2")
    log = finish(nested, "l2", recorder, crumbs, [{"approved": True}, {"approved": True}])
    assert [f.type for f in log].count("human:required") == 2
    loop_id = next(f.crumb["loopId"] for f in log if f.type == "loop:start")
    assert [i["output"] for i in nested.store.get_loop(loop_id)["iterations"]] == ["round 1", "round 2"]


def test_a_task_called_directly_returns_validated_output_and_is_recorded(nested):
    assert nested.run_task("word-count", {"text": "a b c d"}) == {"words": 4}
    record = nested.store.list_task_runs(task="word-count")[0]
    assert (
        record["status"] == "completed" and record["output"] == {"words": 4} and record["input"] == {"text": "a b c d"}
    )


def test_a_subagent_and_a_task_as_tools_stream_inside_the_parent(nested):
    recorder, crumbs = recorded(nested, lambda rid: nested.run("manager", None, run_id=rid), "m1")
    log = finish(nested, "m1", recorder, crumbs)
    types = [f.type for f in log]
    start, end = types.index("subagent:run:start"), types.index("subagent:run:end")
    assert start < types.index("text:delta") < end  # the child's text, with the parent's seqs
    sub_end = log[end].crumb
    assert (
        sub_end["parentAgentId"] == "manager" and sub_end["subagentId"] == "echo" and sub_end["status"] == "completed"
    )
    task_end = next(f.crumb for f in log if f.type == "task:end")
    assert (
        task_end["status"] == "completed" and nested.store.get_task_run(task_end["taskRunId"])["agentId"] == "manager"
    )
    assert log[-1].crumb["output"] == "Echo said it back; it has 4 words."


def test_a_subagent_pauses_the_parent_and_the_resume_finishes_both(nested):
    recorder, crumbs = recorded(nested, lambda rid: nested.run("delegator", None, run_id=rid), "s1")
    assert crumbs[-1]["type"] == "human:required" and crumbs[-1]["toolName"] == "publish"
    log = finish(nested, "s1", recorder, crumbs, [{"approved": True}])
    assert log[-1].crumb["output"] == "The writer said: Published."
    assert [f.type for f in log].count("subagent:run:end") == 1


def test_a_model_generated_file_is_stored_and_announced(nested):
    recorder, crumbs = recorded(nested, lambda rid: nested.run("artist", None, run_id=rid), "f1")
    log = finish(nested, "f1", recorder, crumbs)
    announced = next(f.crumb for f in log if f.type == "file:generated")
    assert announced["mimeType"] == "image/png" and announced["name"] == "dot.png"
    data, meta = nested.blob_store.get(announced["uri"])
    assert data == DOT_PNG and meta["size"] == len(DOT_PNG)


def test_without_a_blob_store_a_generated_file_is_a_clear_error(make_bread):
    bread = make_bread(nested_config(), blob_store=None)
    result = bread.run("artist", None, mode="sync")
    assert result.error.code == "BLOB_STORE_NOT_CONFIGURED"


def test_tools_reach_the_blob_store(make_bread):
    @tool
    def save(data: Nothing, ctx) -> str:
        """Saves a file."""
        return ctx.blob_store.put(b"hi", "text/plain")["url"]

    bread = make_bread(Config(agents=[Agent(id="saver", model=script.provider([call("save", {})]), tools=[save])]),
                       blob_store="memory")  # fmt: skip
    url = next(c for c in bread.run("saver", mode="sync").crumbs if c["type"] == "tool:result")["output"]
    assert bread.blob_store.get(url)[0] == b"hi"


# -- cancel inside each kind of nesting -----------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "nesting"),
    [
        (
            lambda b, rid, t: b.run_pipeline("slow-pipe", {"count": 5, "delayMs": 30_000}, run_id=rid, signal=t),
            "pipeline",
        ),
        (lambda b, rid, t: b.run("slow-loop", None, run_id=rid, signal=t), "loop"),
        (lambda b, rid, t: b.run("slow-delegator", None, run_id=rid, signal=t), "subagent"),
    ],
)
def test_cancel_inside_nested_work_ends_the_whole_run(nested, start, nesting):
    token, run_id = CancelToken(), f"c-{nesting}"
    recorder, crumbs, ticked = Recorder(nested, run_id), [], threading.Event()

    def drive():
        for crumb in start(nested, run_id, token):
            crumbs.append(crumb)
            if crumb["type"] == "text:delta" and crumb["delta"].startswith("t"):
                ticked.set()

    thread = threading.Thread(target=drive)
    thread.start()
    assert ticked.wait(10)
    assert nested.cancel(run_id)
    thread.join(10)
    assert not thread.is_alive()
    log = assert_canonical(nested, run_id, recorder, crumbs)
    assert log[-1].crumb["error"]["code"] == "RUN_CANCELLED"
    assert [f.type for f in log if f.type in TERMINAL] == ["agent:error"]
    assert not any(f.type == "subagent:run:end" for f in log)  # nested work emits no end of its own


def test_cancelling_the_parent_leaves_no_child_running(nested):
    test_cancel_inside_nested_work_ends_the_whole_run(
        nested, lambda b, rid, t: b.run("slow-delegator", None, run_id=rid, signal=t), "child"
    )
    assert nested.cancels.live_run_ids() == []


# -- bad input ----------------------------------------------------------------------------------


def raises(code, fn, *args, **kwargs):
    with pytest.raises(BreadError) as caught:
        fn(*args, **kwargs)
    assert caught.value.code == code


def test_unknown_pipeline_task_and_skill(nested):
    raises("PIPELINE_NOT_FOUND", nested.run_pipeline, "nope", {})
    raises("TASK_NOT_FOUND", nested.run_task, "nope", {})
    raises("SKILL_NOT_FOUND", nested.run, "echo", "x", skill="nope")
    assert nested.store.list_runs() == []


@pytest.mark.parametrize("args", [{}, {"text": 3}, "text", None])
def test_task_args_failing_the_schema(nested, args):
    raises("INPUT_INVALID", nested.run_task, "word-count", args)
    assert nested.store.list_task_runs()[0]["status"] == "failed"


def test_a_loop_needs_at_least_one_iteration():
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="max_iterations"):
            Loop(max_iterations=bad)


def test_a_pipeline_step_input_failing_the_schema_fails_the_run(nested):
    result = nested.run_pipeline("draft-then-echo", {"wrong": 1}, mode="sync")
    assert result.error.code == "INPUT_INVALID"


def test_a_pipeline_reads_its_first_step_s_input_once(make_bread):
    """Where the run enters (the files its caller may read, as the step reads the input) and at
    the step itself: one validation, accepted or refused."""
    read = []

    class Counted(BaseModel):
        topic: str

        @model_validator(mode="before")
        @classmethod
        def count(cls, data):
            read.append(data)
            return data

    reader = Agent(id="reader", model="echo", input_schema=Counted)
    bread = make_bread(agents=[reader], pipelines=[Pipeline("p", [Step(agent="reader")])])

    assert bread.run_pipeline("p", {"topic": "rye"}, mode="sync").status == "completed"
    assert read == [{"topic": "rye"}]
    refused = bread.run_pipeline("p", {"topic": 3}, mode="sync")
    assert refused.error.code == "INPUT_INVALID" and "topic" in refused.error.message
    assert read == [{"topic": "rye"}, {"topic": 3}]


# -- one run at a time per session ----------------------------------------------------------------


def hold_session(bread, session_id):
    """A writer run paused? No: a slow run holding the session, driven in a thread."""
    run = bread.run("slow", {"count": 2, "delayMs": 30_000}, session={"id": session_id}, run_id="holder")
    next(run)
    thread = threading.Thread(target=lambda: list(run))
    thread.start()
    return thread


def test_a_second_run_on_a_busy_session_is_rejected_by_default(nested):
    thread = hold_session(nested, "busy")
    raises("SESSION_BUSY", nested.run, "echo", "hi", session={"id": "busy"})
    nested.cancel("holder")
    thread.join(10)
    assert nested.run("echo", "hi", session={"id": "busy"}, mode="sync").status == "completed"


def test_enqueue_waits_for_the_holder_to_end(nested):
    thread = hold_session(nested, "queue")
    second = nested.run("echo", "after you", session={"id": "queue"}, session_policy="enqueue")
    results = []
    waiter = threading.Thread(target=lambda: results.append(second.result()))
    waiter.start()
    nested.cancel("holder")
    waiter.join(10)
    thread.join(10)
    assert results[0].output == "after you"
    messages = nested.store.get_session("queue")["messages"]
    assert [m["runId"] for m in messages] == ["holder"] * (len(messages) - 2) + [second.run_id] * 2


def test_interrupt_cancels_the_holder_then_runs(nested):
    thread = hold_session(nested, "intr")
    result = nested.run("echo", "me first", session={"id": "intr"}, session_policy="interrupt", mode="sync")
    thread.join(10)
    assert result.output == "me first"
    assert nested.store.get_run("holder")["status"] == "cancelled"


def test_the_session_claim_holds_across_processes_sharing_the_store(make_bread):
    store = memory.store()
    a, b = make_bread(nested_config(), store=store), make_bread(nested_config(), store=store)
    thread = hold_session(a, "shared")
    raises("SESSION_BUSY", b.run, "echo", "hi", session={"id": "shared"})
    result = b.run("echo", "hi", session={"id": "shared"}, session_policy="interrupt", mode="sync")
    thread.join(10)
    assert result.output == "hi" and store.get_run("holder")["status"] == "cancelled"


def test_a_paused_run_lets_go_of_its_session(nested):
    paused = nested.run("writer", {"topic": "x"}, session={"id": "p"}, mode="sync")
    assert nested.run("echo", "meanwhile", session={"id": "p"}, mode="sync").status == "completed"
    assert nested.resume(paused.checkpoint["checkpointId"], {"approved": False}, mode="sync").output == "Not published."
