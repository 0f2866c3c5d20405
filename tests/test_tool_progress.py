"""A tool function that is a generator reports progress: ``tool:progress`` crumbs, paced."""

from __future__ import annotations

import threading

import pytest

from bread_sync import Agent, BreadError, ToolProgress, tool
from bread_sync.engine import agent_run
from bread_sync.models import script
from bread_sync.models.script import call, say


class Clock:
    """The pacing's clock, moved by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(agent_run, "monotonic", fake)
    return fake


def caller_of(fn, name="work") -> Agent:
    return Agent(
        id="caller",
        tools=[tool(fn, name=name)],
        model=script.provider([call(name, {}), lambda convo: say(str(convo.last_tool_output))]),
    )


def of_type(crumbs, kind):
    return [c for c in crumbs if c["type"] == kind]


def test_each_report_is_a_durable_crumb_between_the_call_and_its_result(bread_for, clock):
    def work(arguments, ctx):
        for step in (1, 2):
            clock.now += 1.0
            yield ToolProgress(step, total=2, message=f"step {step}")
        return "done"

    bread = bread_for(caller_of(work))
    result = bread.run("caller", "go", mode="sync")
    kinds = [c["type"] for c in result.crumbs]
    assert result.output == "done"
    assert kinds[kinds.index("tool:call") : kinds.index("tool:result") + 1] == [
        "tool:call", "tool:progress", "tool:progress", "tool:result",
    ]  # fmt: skip
    call_id = of_type(result.crumbs, "tool:call")[0]["toolCallId"]
    assert of_type(result.crumbs, "tool:progress") == [
        {"type": "tool:progress", "runId": result.run_id, "toolCallId": call_id, "progress": 1, "total": 2,
         "message": "step 1"},
        {"type": "tool:progress", "runId": result.run_id, "toolCallId": call_id, "progress": 2, "total": 2,
         "message": "step 2"},
    ]  # fmt: skip
    logged = [f.crumb["type"] for f in bread.store.get_crumbs(result.run_id)]
    assert logged.count("tool:progress") == 2


def test_at_most_one_report_a_second_is_logged_the_others_dropped(bread_for, clock):
    def work(arguments, ctx):
        for step in range(1, 11):
            clock.now += 0.3  # reports at 0.3 s, 0.6 s, ...: logged at 0.3, 1.5 and 2.7 s
            yield ToolProgress(step)
        return "done"

    result = bread_for(caller_of(work)).run("caller", "go", mode="sync")
    assert [c["progress"] for c in of_type(result.crumbs, "tool:progress")] == [1, 5, 9]


def test_a_report_without_total_or_message_leaves_them_out(bread_for, clock):
    def work(arguments, ctx):
        yield ToolProgress(0.5)
        return {"ok": True}

    [progress] = of_type(bread_for(caller_of(work)).run("caller", "go", mode="sync").crumbs, "tool:progress")
    assert set(progress) == {"type", "runId", "toolCallId", "progress"}


def test_a_generator_that_raises_is_a_tool_error_after_its_progress(bread_for, clock):
    def work(arguments, ctx):
        yield ToolProgress(1)
        raise BreadError("TOOL_FAILED", "the far side said no")

    crumbs = bread_for(caller_of(work)).run("caller", "go", mode="sync").crumbs
    kinds = [c["type"] for c in crumbs]
    assert kinds.index("tool:progress") < kinds.index("tool:error")
    assert of_type(crumbs, "tool:error")[0]["error"].message == "the far side said no"


def test_yielding_anything_but_tool_progress_is_a_tool_error(bread_for, clock):
    def work(arguments, ctx):
        yield "50%"
        return "done"

    crumbs = bread_for(caller_of(work)).run("caller", "go", mode="sync").crumbs
    assert of_type(crumbs, "tool:error")[0]["error"].code == "TOOL_FAILED"


def test_a_cancel_between_reports_closes_the_tool_and_ends_the_run_cancelled(bread_for, clock):
    closed = threading.Event()

    def work(arguments, ctx):
        try:
            yield ToolProgress(1)
            yield ToolProgress(2)
            return "never"
        finally:
            closed.set()

    bread = bread_for(caller_of(work))
    run = bread.run("caller", "go")
    crumbs = []
    for crumb in run:
        crumbs.append(crumb)
        if crumb["type"] == "tool:progress":
            bread.cancel(run.run_id)
    assert closed.is_set()
    assert crumbs[-1]["type"] == "agent:error" and crumbs[-1]["error"].code == "RUN_CANCELLED"
    assert of_type(crumbs, "tool:error") == []
