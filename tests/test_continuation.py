"""Runs carried on after the process driving them was SIGKILLed (issue 26), in-process.

A child process starts a run of ``crashy`` (tests/continuation_config.py) on a SQLite file and
kills itself at a chosen point; this process, sharing the file, then sweeps as a new worker does
at start-up: the dead owner is a process of this host, known gone at once, so the run is
carried on here, after an ``agent:run:continued`` crumb. Across real gunicorn servers:
tests/integration/test_continued_runs.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bread_sync.clock import now_iso
from bread_sync.crumbs import Frame
from bread_sync.engine.execution import WITHOUT_PROGRESS, progress_id
from bread_sync.runtime import Bread

from .continuation_config import config

ROOT = Path(__file__).resolve().parent.parent
#: Generous for a busy machine: each is a bound on a wait, not a pace.
CHILD_SECONDS = 60
ENDED_SECONDS = 30

CHILD = """
import json, sys, threading
from bread_sync.runtime import Bread
from tests.continuation_config import config, crash_at
bread = Bread(config())
bread.on("crumb", lambda frame: crash_at("after-" + frame.crumb["type"]))
bread.start()
if sys.argv[1] == "line":
    for crumb in bread.run_pipeline("line", {"n": 1}, run_id=sys.argv[2]):
        pass
elif sys.argv[1] != "-":
    for crumb in bread.run(sys.argv[1], "go", run_id=sys.argv[2], context=json.loads(sys.argv[3])):
        pass
threading.Event().wait(120)
"""


@pytest.fixture
def place(tmp_path, monkeypatch):
    monkeypatch.setenv("BREAD_INSTANCE", str(tmp_path))
    monkeypatch.setenv("CALLS_FILE", str(tmp_path / "calls"))
    monkeypatch.setenv("CRASH_AT_FILE", str(tmp_path / "crash"))
    (tmp_path / "calls").write_text("")
    return tmp_path


def crashed(place: Path, crash_at: str, agent: str = "crashy", run_id: str = "run_1", context=None) -> None:
    """A child process that runs ``agent`` (or the pipeline ``line``; with ``-``, it only sweeps)
    and SIGKILLs itself at ``crash_at``."""
    (place / "crash").write_text("")
    env = {**os.environ, "CRASH_AT": crash_at, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", CHILD, agent, run_id, json.dumps(context)]
    child = subprocess.run(args, env=env, cwd=ROOT, timeout=CHILD_SECONDS, capture_output=True)
    assert child.returncode == -9, child.stderr.decode()[-2000:]


def carried_on(bread: Bread, run_id: str = "run_1") -> list[dict]:
    """The sweep of a process starting up, then the run's log once it ended (or paused)."""
    bread.start()
    deadline = time.monotonic() + ENDED_SECONDS
    for frame in bread.tail(run_id, heartbeat=0.5):
        assert time.monotonic() < deadline, "the run did not end in time"
        if isinstance(frame, Frame) and frame.crumb["type"] in ("agent:run:end", "agent:error", "human:required"):
            break
    log = bread.store.get_crumbs(run_id)
    assert [f.seq for f in log] == list(range(1, len(log) + 1)), "the log has a gap or a repeat"
    return [f.crumb for f in log]


def calls(place: Path) -> list[str]:
    return (place / "calls").read_text().split("\n")[:-1]


def types(log: list[dict]) -> list[str]:
    return [c["type"] for c in log]


def continued(log: list[dict]) -> list[dict]:
    return [c for c in log if c["type"] == "agent:run:continued"]


@pytest.fixture
def bread(place):
    instance = Bread(config())
    yield instance
    instance.close()


def test_a_run_killed_in_an_idempotent_tool_is_carried_on_and_calls_it_again(place, bread):
    crashed(place, "tool-run")
    log = carried_on(bread)

    assert types(log)[-1] == "agent:run:end" and log[-1]["output"] == "Almost there: all done."
    (mark,) = continued(log)
    index = log.index(mark)
    assert mark == {"type": "agent:run:continued", "runId": "run_1", "reason": "owner-died",
                    "afterSeq": index, "attempt": 1}  # fmt: skip
    assert log[index - 1]["type"] == "tool:call" and log[index - 1]["toolName"] == "tool_run"
    assert calls(place) == ["tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"]
    assert types(log).count("tool:call") == 3 and types(log).count("agent:run:start") == 1
    assert bread.store.get_run("run_1")["status"] == "completed"


def test_a_run_carried_on_gives_its_tools_the_context_it_was_started_with(place, bread):
    crashed(place, "tool-run", context=[{"description": "the user", "value": "ann"}])
    log = carried_on(bread)

    assert log[0]["context"] == [{"description": "the user", "value": "ann"}]
    assert log[-1]["type"] == "agent:run:end"
    assert calls(place) == ["tool_run 1 for ann", "tool_run 1 for ann", "tool_ask 2 for ann", "tool_fail 3 for ann"]


def test_the_session_history_holds_each_message_of_a_carried_on_run_once(place, bread):
    crashed(place, "tool-run")
    log = carried_on(bread)

    history = bread.store.get_session(log[0]["sessionId"])["messages"]
    roles = [m["role"] for m in history]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "assistant"]  # the three calls are one turn's
    assert [m["name"] for m in history if m["role"] == "tool"] == ["tool_run", "tool_ask", "tool_fail"]
    assert history[-1]["content"] == "Almost there: all done."


def test_a_run_killed_in_a_tool_that_asks_pauses_and_an_approval_calls_it_again(place, bread):
    crashed(place, "tool-ask")
    log = carried_on(bread)

    pause = log[-1]
    assert pause["type"] == "human:required" and pause["kind"] == "approval" and pause["outcomeUnknown"] is True
    assert pause["toolName"] == "tool_ask" and types(log)[-2] == "agent:run:continued"
    result = bread.resume(pause["checkpointId"], {"approved": True}, mode="sync")
    assert result.output == "Almost there: all done."
    assert calls(place) == ["tool_run 1", "tool_ask 2", "tool_ask 2", "tool_fail 3"]


def test_a_denied_repeat_gives_the_model_a_tool_outcome_unknown_error(place, bread):
    crashed(place, "tool-ask")
    pause = carried_on(bread)[-1]
    bread.resume(pause["checkpointId"], {"approved": False}, mode="sync")

    log = [f.crumb for f in bread.store.get_crumbs("run_1")]
    (error,) = [c for c in log if c["type"] == "tool:error"]
    assert error["toolName"] == "tool_ask" and error["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert calls(place) == ["tool_run 1", "tool_ask 2", "tool_fail 3"]
    assert types(log)[-1] == "agent:run:end"


def test_a_tool_that_must_not_repeat_gets_a_tool_outcome_unknown_error_at_once(place, bread):
    crashed(place, "tool-fail")
    log = carried_on(bread)

    (error,) = [c for c in log if c["type"] == "tool:error"]
    assert error["toolName"] == "tool_fail" and error["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert types(log).index("agent:run:continued") < log.index(error)
    assert calls(place) == ["tool_run 1", "tool_ask 2", "tool_fail 3"]
    assert types(log)[-1] == "agent:run:end"


def test_a_run_killed_while_the_model_streams_makes_the_call_again_after_its_last_durable_crumb(place, bread):
    crashed(place, "model")
    log = carried_on(bread)

    (mark,) = continued(log)
    index = log.index(mark)
    assert mark["afterSeq"] == index and log[index - 1]["type"] == "tool:result"  # the text streamed was never logged
    after = "".join(c["delta"] for c in log[index:] if c["type"] == "text:delta")
    assert after == "Almost there: all done." and log[-1]["output"] == after
    assert calls(place) == ["tool_run 1", "tool_ask 2", "tool_fail 3"]


def test_a_run_killed_inside_a_subagent_carries_the_subagent_on(place, bread):
    crashed(place, "tool-run", agent="boss")
    log = carried_on(bread)

    assert types(log).count("subagent:run:start") == 1 and types(log).count("subagent:run:end") == 1
    end = next(c for c in log if c["type"] == "subagent:run:end")
    assert end["status"] == "completed" and end["output"] == "Almost there: all done."
    assert log[-1]["type"] == "agent:run:end" and log[-1]["output"] == "The crew is done."
    assert calls(place) == ["tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"]


def test_a_run_killed_four_times_in_a_row_ends_interrupted(place, bread):
    crashed(place, "model-always")
    for _ in range(3):  # each sweeps at start-up, carries the run on, and dies at the same point
        crashed(place, "model-always", agent="-")
    log = carried_on(bread)

    assert [c["attempt"] for c in continued(log)] == [1, 2, 3]
    assert log[-1]["type"] == "agent:error" and log[-1]["error"]["code"] == "RUN_INTERRUPTED"
    assert bread.store.get_run("run_1")["status"] == "interrupted"


def test_an_agent_that_opts_out_is_interrupted_as_before(place, bread):
    crashed(place, "tool-run", agent="unwilling")
    log = carried_on(bread)

    assert continued(log) == [] and log[-1]["error"]["code"] == "RUN_INTERRUPTED"
    assert calls(place) == ["tool_run 1"]


def test_progress_is_saved_with_the_crumbs_that_change_it_and_never_with_live_text(place, bread, monkeypatch):
    saves = []
    save_checkpoint = bread.store.save_checkpoint
    monkeypatch.setattr(
        bread.store, "save_checkpoint", lambda checkpoint: saves.append(checkpoint["id"]) or save_checkpoint(checkpoint)
    )

    bread.run("crashy", "go", run_id="run_2", mode="sync")

    logged = [f.type for f in bread.store.get_crumbs("run_2")]
    # Of the 12 crumbs that could carry it (per call: its input's start and end, the call, its
    # result), those where the run's state changed and the log does not tell how: the first
    # input's start (the turn begun), then each call; the turn's other tool inputs changed
    # nothing, and each result is read from the log after the progress by a continuation.
    assert sum(t not in WITHOUT_PROGRESS for t in logged) == 12 and len(saves) == 4
    assert set(saves) == {progress_id("run_2")}
    progress = bread.store.get_checkpoint(progress_id("run_2"))
    # the run's own turn leaves its conversation to the session's history, written with the same crumbs
    assert progress["stack"]["messages"] == 4  # its count as of the last tool call
    assert logged[progress["seq"] - 1] == "tool:call"  # the crumb it was saved with


def test_a_run_killed_right_after_a_tool_result_reads_it_from_the_log_and_calls_nothing_again(place, bread):
    crashed(place, "after-tool:result")  # the first call's result, logged without a progress
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["output"] == "Almost there: all done."
    assert [types(log).count(kind) for kind in ("tool:call", "tool:result")] == [3, 3]
    assert calls(place) == ["tool_run 1", "tool_ask 2", "tool_fail 3"]
    history = bread.store.get_session(log[0]["sessionId"])["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "tool", "assistant"]


def test_a_loop_killed_inside_an_iteration_carries_that_iteration_on(place, bread):
    crashed(place, "tool-run-2", agent="looper")
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["type"] == "agent:run:end"
    starts = [c["iteration"] for c in log if c["type"] == "loop:iteration:start"]
    assert starts == [1, 2, 3] and types(log).count("loop:start") == 1
    assert [c["iteration"] for c in log if c["type"] == "loop:iteration:end"] == [1, 2, 3]
    assert log[-2]["type"] == "loop:end" and log[-2]["reason"] == "max_iterations"
    assert calls(place) == ["tool_run 1", "tool_run 2", "tool_run 2", "tool_run 3"]
    (record,) = bread.store.list_loops()
    assert record["status"] == "completed" and record["iterations"] == 3
    iterations = bread.store.get_loop(record["id"])["iterations"]
    assert [(i["index"], i["status"]) for i in iterations] == [(1, "completed"), (2, "completed"), (3, "completed")]


def test_a_pipeline_killed_inside_an_agent_step_carries_the_step_on(place, bread):
    crashed(place, "tool-run", agent="line")
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["type"] == "agent:run:end"
    assert log[-1]["output"] == "Almost there: all done."
    assert [c["index"] for c in log if c["type"] == "pipeline:step:start"] == [0, 1]
    assert [c["index"] for c in log if c["type"] == "pipeline:step:end"] == [0, 1]
    assert types(log).index("pipeline:step:start", 2) < types(log).index("agent:run:continued")
    assert calls(place) == ["task 1", "tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"]


def test_a_pipeline_killed_inside_a_task_step_calls_the_task_again_in_the_frame_it_opened(place, bread):
    crashed(place, "task", agent="line")
    died_by = now_iso()
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["output"] == "Almost there: all done."
    assert [c["index"] for c in log if c["type"] == "pipeline:step:start"] == [0, 1]
    (start,) = [c for c in log if c["type"] == "task:start"]
    (end,) = [c for c in log if c["type"] == "task:end"]
    assert start["taskRunId"] == end["taskRunId"] and end["status"] == "completed"
    assert log.index(start) < types(log).index("agent:run:continued") < log.index(end)
    assert calls(place)[:2] == ["task 1", "task 1"]
    (record,) = bread.store.list_task_runs()
    assert record["id"] == start["taskRunId"] and record["status"] == "completed"
    assert record["createdAt"] < died_by < record["updatedAt"], "the record is the first call's, carried on"
    assert [c["output"] for c in log if c["type"] == "pipeline:step:end"][0] == {"n": 2}


def test_a_run_killed_inside_a_task_called_as_a_tool_calls_it_again_in_its_frame(place, bread):
    crashed(place, "task", agent="counter")
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["output"] == "Counted 8."
    assert [types(log).count(kind) for kind in ("tool:call", "task:start", "task:end", "tool:result")] == [1, 1, 1, 1]
    assert types(log).index("task:start") < types(log).index("agent:run:continued") < types(log).index("task:end")
    assert calls(place) == ["task 7", "task 7"]


@pytest.mark.parametrize(
    ("agent", "crash_at", "counts"),
    [
        ("boss", "after-subagent:run:end", {"subagent:run:start": 1, "subagent:run:end": 1, "tool:result": 4}),
        ("chief", "after-subagent:run:end", {"subagent:run:start": 1, "subagent:run:end": 1, "tool:error": 1}),
        ("looper", "after-loop:iteration:end", {"loop:start": 1, "loop:iteration:start": 3, "loop:iteration:end": 3}),
        ("looper", "after-loop:end", {"loop:iteration:end": 3, "loop:end": 1}),
        ("line", "after-task:end", {"task:start": 1, "task:end": 1, "pipeline:step:start": 2}),
        ("counter", "after-task:end", {"task:start": 1, "task:end": 1, "tool:result": 1}),
        ("line", "after-pipeline:step:end", {"pipeline:step:start": 2, "pipeline:step:end": 2, "task:end": 1}),
    ],
)
def test_a_run_killed_right_after_a_frame_crumb_logs_it_once_and_calls_nothing_again(
    place, bread, agent, crash_at, counts
):
    crashed(place, crash_at, agent=agent)
    log = carried_on(bread)

    assert len(continued(log)) == 1 and log[-1]["type"] == "agent:run:end"
    assert {kind: types(log).count(kind) for kind in counts} == counts
    assert len(set(calls(place))) == len(calls(place)), calls(place)


def test_a_traced_run_carried_on_links_its_span_to_the_span_it_continues(place, bread, monkeypatch):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # the killed process traces: its record names its span
    crashed(place, "tool-run")
    assert "trace" not in bread.store.get_checkpoint(progress_id("run_1"))  # not saved with each progress
    kept = bread.store.get_run("run_1")["trace"]["traceparent"]
    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread.tracer = otel.tracer(spans)
    carried_on(bread)

    deadline = time.monotonic() + ENDED_SECONDS  # the span ends just after the crumb the tail saw last
    while not (runs := [s for s in exporter.get_finished_spans() if s.name == "invoke_agent crashy"]):
        assert time.monotonic() < deadline, [s.name for s in exporter.get_finished_spans()]
        time.sleep(0.01)
    (run,) = runs
    assert [format(link.context.span_id, "016x") for link in run.links] == [kept.split("-")[2]]
    assert [event.name for event in run.events] == ["continued"]
    assert run.attributes["bread.run.status"] == "completed"
