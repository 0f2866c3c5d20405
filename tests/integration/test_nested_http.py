"""Pipelines, loops, tasks, subagents, files, skills and session policies end to end through
real gunicorn (gevent) servers, over both wire formats.

The demo agents run on the shared ``server`` / ``peer`` pair. Nested work that is slow (to
cancel midway) or that pauses for a human inside a loop or a subagent runs on a second pair
serving ``tests.nested_http_config`` (the demo plus those agents); each pair shares one SQLite
file and nothing else, so a resume or a cancel sent to the other process goes through the store.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bread_sync.demo import DOT_PNG, MANAGER_TEXT

from ..nested_http_config import SKILL_TEXT, SLOW_TICKS, TICK_SECONDS
from ..waiting import wait_for
from .client import (
    AGENT_ERROR,
    HUMAN_REQUIRED,
    HUMAN_RESUMED,
    RUN_END,
    RUN_START,
    TERMINAL,
    TEXT_DELTA,
    TRANSPORTS,
    Event,
    Stream,
    Tail,
    assert_error_body,
    assert_log,
    durable_seqs,
    failure_of,
    fetch,
    log_of,
    new_client,
    open_stream,
    passive_url,
    resume,
    run,
    run_error_of,
    text_of,
)
from .servers import BIND_ATTEMPTS, MAIN, READY_SECONDS

CONFIG = "tests.nested_http_config:config"
CANCEL_SECONDS = 5.0
STEP_START, STEP_END = "pipeline:step:start", "pipeline:step:end"
SUB_START, SUB_END = "subagent:run:start", "subagent:run:end"
TOOL_INPUT = ["tool:input:start", "tool:input:delta", "tool:input:end", "tool:call"]


@pytest.fixture(scope="module", autouse=True)
def _started_together(pool):
    """Start this module's eight servers two rounds at a time instead of one by one: the
    primaries (each peer needs its primary's SQLite file), then the peers."""
    for start in (pool.primary, pool.peer):
        errors: list[BaseException] = []

        def up(transport: str, config: str | None, start=start, errors=errors) -> None:
            try:
                start(transport, config)
            except BaseException as exc:  # raised below, on the test's thread
                errors.append(exc)

        threads = [
            threading.Thread(target=up, args=(transport, config))
            for transport in TRANSPORTS.values()
            for config in (None, CONFIG)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(READY_SECONDS * BIND_ATTEMPTS + 10)
        if errors:
            raise errors[0]


@pytest.fixture
def nested(pool, wire):
    """A server of this wire format serving the nested config."""
    return pool.primary(TRANSPORTS[wire], CONFIG)


@pytest.fixture
def nested_peer(pool, wire):
    """A second process on ``nested``'s SQLite file."""
    return pool.peer(TRANSPORTS[wire], CONFIG)


# -- what every run must satisfy ------------------------------------------------------------------


def assert_invariant(http, base: str, run_id: str, wire: str, *responses: Stream) -> list[Event]:
    """The crumb-stream invariant over the responses of one run (the run, then each resume, in
    order) and its log read back through a passive replay from seq 0 on ``base``: the log is
    gap-free with one start and one terminal crumb; what the responses carried has strictly
    increasing durable seqs, text deltas at the watermark, one terminal crumb (a pause ends every
    response but the last), and equals the log for durable crumbs and for the text. The log."""
    carried: list[Event] = []
    for i, response in enumerate(responses):
        assert response.status == 200 and response.streaming, (response.status, response.text[:500])
        assert response.run_id == run_id
        if i < len(responses) - 1:
            assert response.crumbs[-1].type == HUMAN_REQUIRED, response.types
        carried += response.crumbs
    assert {e.data["runId"] for e in carried} == {run_id}
    seqs = durable_seqs(carried)
    assert all(a < b for a, b in zip(seqs, seqs[1:], strict=False)), f"durable seqs not increasing: {seqs}"
    watermark = 0
    for event in carried:
        if event.durable:
            watermark = event.seq
        else:
            assert event.seq == watermark, f"a text:delta at seq {event.seq} after durable seq {watermark}"
    types = [e.type for e in carried]
    assert sum(t in TERMINAL for t in types) == 1 and types[-1] in TERMINAL, types

    log = log_of(http, base, run_id, wire)
    assert_log(log, run_id)
    assert [(e.seq, e.data) for e in carried if e.durable] == [(e.seq, e.data) for e in log if e.type != TEXT_DELTA]
    assert text_of(carried) == text_of(log)
    return log


def shape(events: list[Event] | Stream) -> list[str]:
    """The crumb types, each run of text deltas counted once (how many words is the model's affair)."""
    types = [e.type for e in (events.crumbs if isinstance(events, Stream) else events) if e.kind == "crumb"]
    return [t for i, t in enumerate(types) if t != TEXT_DELTA or i == 0 or types[i - 1] != TEXT_DELTA]


def of_type(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == kind]


def get_json(http, url: str) -> Any:
    answer = http.get(url)
    assert answer.status_code == 200, (answer.status_code, answer.text[:500])
    return answer.json()


class Background(threading.Thread):
    """One streaming request read to its end on a thread (and a connection) of its own."""

    def __init__(self, url: str, wire: str, body: dict[str, Any]):
        super().__init__(name=f"request {url}", daemon=True)
        self.url, self.wire, self.body = url, wire, body
        self.stream: Stream | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with new_client() as client:
                self.stream = fetch(client, "POST", self.url, self.wire, body=self.body)
        except BaseException as exc:  # raised on the test's thread by result()
            self.error = exc

    def result(self, seconds: float) -> Stream:
        self.join(seconds)
        assert not self.is_alive(), f"{self.name} was still open after {seconds:g} s"
        if self.error is not None:
            raise self.error
        return self.stream


# -- each capability end to end ------------------------------------------------------------------

PIPELINE_FIRST_LEG = [RUN_START, STEP_START, TEXT_DELTA, *TOOL_INPUT, HUMAN_REQUIRED]
PIPELINE_CONTINUATION = [
    HUMAN_RESUMED, "tool:result", TEXT_DELTA, STEP_END, STEP_START, TEXT_DELTA, STEP_END, RUN_END,
]  # fmt: skip


def test_a_pipeline_pauses_in_its_step_and_resumes_on_another_process(http, server, peer, wire):
    first = fetch(http, "POST", f"{server.url}/pipelines/draft-then-echo/run", wire, body={"input": {"topic": "rye"}})
    assert first.status == 200 and first.run_id, first.text
    assert shape(first) == PIPELINE_FIRST_LEG, first.types
    start = first.crumbs[0].data
    assert (start["agentId"], start["pipelineId"], start["input"]) == ("draft-then-echo",) * 2 + ({"topic": "rye"},)
    paused = first.last_crumb.data
    assert (paused["kind"], paused["toolName"], paused["input"]) == ("approval", "publish", {"title": "rye"})
    record = get_json(http, f"{peer.url}/runs/{first.run_id}")
    assert (record["status"], record["checkpoint"]["id"]) == ("paused", paused["checkpointId"])

    tail = Tail(passive_url(peer.url, first.run_id), wire)  # the log, then what the peer's transport carries
    tail.start()
    tail.wait_for(lambda e: e.type == HUMAN_REQUIRED, 10, "the replayed pause")
    continuation = resume(http, peer.url, paused["checkpointId"], {"approved": True}, wire)
    relayed = [e for e in tail.finish(15) if e.kind == "crumb"]

    assert shape(continuation) == PIPELINE_CONTINUATION, continuation.types
    log = assert_invariant(http, peer.url, first.run_id, wire, first, continuation)
    frames = [(e.type, e.data["stepName"], e.data["index"], e.data.get("output")) for e in log if "step" in e.type]
    assert frames == [
        (STEP_START, "writer", 0, None), (STEP_END, "writer", 0, "Published."),
        (STEP_START, "echo", 1, None), (STEP_END, "echo", 1, "Published."),
    ]  # fmt: skip
    assert log[-1].data["output"] == "Published."
    assert [(e.seq, e.data) for e in relayed if e.durable] == [(e.seq, e.data) for e in log if e.durable]
    assert text_of(relayed) == text_of(log)
    assert get_json(http, f"{server.url}/runs/{first.run_id}")["status"] == "completed"
    again = resume(http, server.url, paused["checkpointId"], {"approved": True}, wire)
    assert failure_of(again, wire)["code"] == "CHECKPOINT_ALREADY_RESUMED"


def test_a_loop_counts_and_is_reported_by_the_loop_routes(http, server, peer, wire):
    stream = run(http, server.url, "counter", {"input": {"until": 3}}, wire)

    log = assert_invariant(http, server.url, stream.run_id, wire, stream)
    loop_crumbs = [e.data for e in log if e.type.startswith("loop:")]
    assert [(c["phase"], c["iteration"]) for c in loop_crumbs] == [
        ("start", 0), ("iteration:start", 1), ("iteration:end", 1), ("iteration:start", 2), ("iteration:end", 2),
        ("iteration:start", 3), ("iteration:end", 3), ("end", 3),
    ]  # fmt: skip
    loop_id = loop_crumbs[0]["loopId"]
    assert {c["loopId"] for c in loop_crumbs} == {loop_id} and {c["agentId"] for c in loop_crumbs} == {"counter"}
    assert (loop_crumbs[0]["maxIterations"], loop_crumbs[-1]["reason"]) == (10, "condition")
    assert [c["output"] for c in loop_crumbs if c["phase"] == "iteration:end"] == ["1", "2", "3"]
    assert stream.last_crumb.data["output"] == "3"

    session_id = stream.crumbs[0].data["sessionId"]
    listed = get_json(http, f"{server.url}/loops?agent=counter")
    assert loop_id in [loop["id"] for loop in listed]
    assert [loop["id"] for loop in get_json(http, f"{server.url}/loops?session={session_id}")] == [loop_id]
    assert loop_id in [loop["id"] for loop in get_json(http, f"{server.url}/loops?status=completed")]
    assert loop_id not in [loop["id"] for loop in get_json(http, f"{server.url}/loops?agent=writer")]
    assert loop_id not in [loop["id"] for loop in get_json(http, f"{server.url}/loops?status=running")]
    found = get_json(http, f"{peer.url}/loops/{loop_id}")  # the other process reads the same store
    assert sorted(found) == ["iterations", "loop"]
    loop = found["loop"]
    assert (loop["id"], loop["agentId"], loop["sessionId"], loop["runId"]) == (
        loop_id, "counter", session_id, stream.run_id,
    )  # fmt: skip
    assert (loop["status"], loop["iterations"], loop["maxIterations"]) == ("completed", 3, 10)
    iterations = found["iterations"]
    assert [(i["index"], i["status"], i["output"]) for i in iterations] == [
        (1, "completed", "1"), (2, "completed", "2"), (3, "completed", "3"),
    ]  # fmt: skip
    assert all(i["startedAt"] and i["endedAt"] and i["startedAt"] <= i["endedAt"] for i in iterations)

    capped = run(http, server.url, "counter", {"input": {"until": 50}}, wire)
    end = of_type(capped.crumbs, "loop:end")[0]
    assert (end["iteration"], end["reason"], capped.last_crumb.data["output"]) == (10, "max_iterations", "10")
    assert_invariant(http, server.url, capped.run_id, wire, capped)


def test_a_subagent_and_a_task_stream_inside_the_manager_and_the_task_is_recorded(http, server, peer, wire):
    stream = run(http, server.url, "manager", {"input": None}, wire)

    log = assert_invariant(http, server.url, stream.run_id, wire, stream)
    types = [e.type for e in stream.crumbs]
    sub_start, sub_end = types.index(SUB_START), types.index(SUB_END)
    inside = stream.crumbs[sub_start + 1 : sub_end]
    assert inside and {e.type for e in inside} == {TEXT_DELTA}, types
    assert text_of(inside) == MANAGER_TEXT
    assert {e.seq for e in inside} == {stream.crumbs[sub_start].seq}  # the parent's seqs
    frame = {"parentAgentId": "manager", "subagentId": "echo"}
    assert stream.crumbs[sub_start].data == {"type": SUB_START, "runId": stream.run_id, **frame, "status": "running"}
    assert stream.crumbs[sub_end].data == {
        "type": SUB_END, "runId": stream.run_id, **frame, "status": "completed", "output": MANAGER_TEXT,
    }  # fmt: skip
    assert types.count(RUN_START) == 1 and [t for t in types if t in TERMINAL] == [RUN_END]
    task_start, task_end = of_type(log, "task:start"), of_type(log, "task:end")
    assert len(task_start) == len(task_end) == 1
    task_run_id = task_start[0]["taskRunId"]
    assert (task_start[0]["taskId"], task_start[0]["status"]) == ("word-count", "running")
    assert (task_end[0]["taskRunId"], task_end[0]["status"]) == (task_run_id, "completed")
    assert of_type(log, "tool:result")[-1]["output"] == {"words": 4}
    assert stream.last_crumb.data["output"] == "Echo said it back; it has 4 words."

    session_id = stream.crumbs[0].data["sessionId"]
    assert task_run_id in [t["id"] for t in get_json(http, f"{server.url}/tasks?agent=manager")]
    assert [t["id"] for t in get_json(http, f"{server.url}/tasks?session={session_id}")] == [task_run_id]
    assert [t["id"] for t in get_json(http, f"{server.url}/tasks?session={session_id}&status=failed")] == []
    # Newest first: no other test of this suite runs word-count on this store.
    assert [t["id"] for t in get_json(http, f"{server.url}/tasks?task=word-count&limit=1")] == [task_run_id]
    record = get_json(http, f"{peer.url}/tasks/{task_run_id}")
    expected = {
        "id": task_run_id, "taskId": "word-count", "sessionId": session_id, "agentId": "manager",
        "runId": stream.run_id, "status": "completed", "input": {"text": MANAGER_TEXT}, "output": {"words": 4},
        "error": None,
    }  # fmt: skip
    assert {k: record[k] for k in expected} == expected
    assert isinstance(record["durationMs"], int) and record["durationMs"] >= 0


def test_a_generated_file_is_announced_and_served(http, server, wire):
    stream = run(http, server.url, "artist", {"input": None}, wire)

    assert_invariant(http, server.url, stream.run_id, wire, stream)
    [announced] = of_type(stream.crumbs, "file:generated")
    assert (announced["mimeType"], announced["name"]) == ("image/png", "dot.png")
    assert announced["uri"].startswith("/files/")
    served = http.get(f"{server.url}{announced['uri']}")
    assert served.status_code == 200, served.text[:500]
    assert served.content == DOT_PNG
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"


def test_a_skill_reaches_the_model_and_an_unknown_one_fails_in_the_stream(http, nested, wire):
    assert get_json(http, f"{nested.url}/agents/skilled")["skills"] == ["terse"]
    stream = run(http, nested.url, "skilled", {"input": "hi", "skill": "terse"}, wire)
    assert_invariant(http, nested.url, stream.run_id, wire, stream)
    assert stream.crumbs[0].data["skill"] == "terse"
    assert SKILL_TEXT in stream.last_crumb.data["output"]

    for agent in ("echo", "skilled"):
        run_id = f"run-skill-{uuid.uuid4().hex}"
        refused = run(http, nested.url, agent, {"input": "hi", "skill": "nope", "runId": run_id}, wire)
        assert refused.run_id == run_id
        assert failure_of(refused, wire)["code"] == "SKILL_NOT_FOUND"
        assert_error_body(http.get(f"{nested.url}/runs/{run_id}"), 404, "RUN_NOT_FOUND")


# -- cancel inside nested work --------------------------------------------------------------------


def first_tick(event: Event) -> bool:
    return event.type == TEXT_DELTA and event.data["delta"] == "tick 1 "


def inside_pipeline_step(stream: Stream) -> None:
    assert [(d["index"], d.get("output")) for d in of_type(stream.crumbs, STEP_END)] == [(0, SLOW_TICKS)]
    assert [d["stepName"] for d in of_type(stream.crumbs, STEP_START)] == ["warm-up", "ticks"]


def inside_loop_iteration(stream: Stream) -> None:
    loop = [(e.data["phase"], e.data["iteration"]) for e in stream.crumbs if e.type.startswith("loop:")]
    assert loop == [("start", 0), ("iteration:start", 1), ("iteration:end", 1), ("iteration:start", 2)]


def inside_subagent(stream: Stream) -> None:
    assert [d["subagentId"] for d in of_type(stream.crumbs, SUB_START)] == ["slow"]
    assert of_type(stream.crumbs, SUB_END) == []


CANCELS = {
    "pipeline step": ("/pipelines/slow-pipe/run", SLOW_TICKS, inside_pipeline_step, STEP_END),
    "loop iteration": ("/agents/slow-loop/run", None, inside_loop_iteration, "loop:iteration:end"),
    "subagent": ("/agents/slow-delegator/run", None, inside_subagent, SUB_END),
}


@pytest.mark.parametrize("where", CANCELS)
def test_cancel_inside_nested_work_ends_the_whole_run(http, nested, nested_peer, wire, where):
    path, body_input, check_inside, nested_end = CANCELS[where]
    with open_stream(http, "POST", f"{nested.url}{path}", wire, body={"input": body_input}, seconds=20) as stream:
        assert stream.status == 200, stream.text
        stream.until(first_tick, "the first tick")
        check_inside(stream)
        ends_before = len(of_type(stream.crumbs, nested_end))
        sent = time.monotonic()
        answer = http.post(f"{nested_peer.url}/runs/{stream.run_id}/cancel")  # through the store
        assert answer.status_code == 200, answer.text
        stream.rest()
        seconds = time.monotonic() - sent

    assert seconds < CANCEL_SECONDS, f"the cancelled run took {seconds:.1f} s to end"
    assert run_error_of(stream, wire)["code"] == "RUN_CANCELLED"
    assert len(text_of(stream.crumbs).split("tick ")) - 1 < 2 + CANCEL_SECONDS / TICK_SECONDS
    assert len(of_type(stream.crumbs, nested_end)) == ends_before, "the cancelled nested work reported an end"
    log = assert_invariant(http, nested.url, stream.run_id, wire, stream)
    assert log[-1].type == AGENT_ERROR and log[-1].data["error"]["code"] == "RUN_CANCELLED"
    assert not any(e.type in (RUN_END, "loop:end") for e in log)
    assert get_json(http, f"{nested_peer.url}/runs/{stream.run_id}")["status"] == "cancelled"
    if where == "loop iteration":
        loop_id = of_type(log, "loop:start")[0]["loopId"]
        found = get_json(http, f"{nested_peer.url}/loops/{loop_id}")
        assert (found["loop"]["status"], found["loop"]["iterations"]) == ("cancelled", 2)
        assert [(i["index"], i["status"], i["output"]) for i in found["iterations"]] == [
            (1, "completed", "round 1"), (2, "cancelled", None),
        ]  # fmt: skip


def test_a_running_loop_reports_its_iterations_so_far(http, nested, wire):
    with open_stream(http, "POST", f"{nested.url}/agents/slow-loop/run", wire, body={"input": None}) as stream:
        assert stream.status == 200, stream.text
        stream.until(first_tick, "the first tick of iteration 2")
        loop_id = of_type(stream.crumbs, "loop:start")[0]["loopId"]
        found = get_json(http, f"{nested.url}/loops/{loop_id}")
        assert http.post(f"{nested.url}/runs/{stream.run_id}/cancel").status_code == 200
        stream.rest()
    assert run_error_of(stream, wire)["code"] == "RUN_CANCELLED"

    assert [(i["index"], i["status"]) for i in found["iterations"]] == [(1, "completed"), (2, "running")]
    assert found["loop"]["status"] == "running"
    assert found["loop"]["iterations"] == 2, found["loop"]


def test_cancelling_a_run_paused_in_a_loop_iteration_ends_its_loop(http, nested, nested_peer, wire):
    first = run(http, nested.url, "looper", {"input": None}, wire)
    assert first.last_crumb.type == HUMAN_REQUIRED, first.types
    loop_id = of_type(first.crumbs, "loop:start")[0]["loopId"]

    answer = http.post(f"{nested_peer.url}/runs/{first.run_id}/cancel")

    assert answer.status_code == 200, answer.text
    assert get_json(http, f"{nested.url}/runs/{first.run_id}")["status"] == "cancelled"
    log = log_of(http, nested.url, first.run_id, wire)
    assert_log(log, first.run_id)
    assert (log[-2].type, log[-1].data["error"]["code"]) == (HUMAN_REQUIRED, "RUN_CANCELLED")
    found = get_json(http, f"{nested.url}/loops/{loop_id}")
    assert [(i["index"], i["status"]) for i in found["iterations"]] == [(1, "cancelled")], found
    assert found["loop"]["status"] == "cancelled", found["loop"]


# -- HITL inside nested work, resumed on the other process -----------------------------------------


def test_a_loop_pauses_in_each_iteration_and_resumes_on_either_process(http, nested, nested_peer, wire):
    first = run(http, nested.url, "looper", {"input": None}, wire)
    assert first.status == 200, first.text
    assert shape(first) == [RUN_START, "loop:start", "loop:iteration:start", *TOOL_INPUT, HUMAN_REQUIRED]
    second = resume(http, nested_peer.url, first.last_crumb.data["checkpointId"], {"approved": True}, wire)
    assert shape(second) == [
        HUMAN_RESUMED, "tool:result", TEXT_DELTA, "loop:iteration:end", "loop:iteration:start",
        *TOOL_INPUT, HUMAN_REQUIRED,
    ], second.types  # fmt: skip
    loop_id = first.crumbs[1].data["loopId"]
    paused = get_json(http, f"{nested.url}/loops/{loop_id}")
    assert [(i["index"], i["status"]) for i in paused["iterations"]] == [(1, "completed"), (2, "running")]
    third = resume(http, nested.url, second.last_crumb.data["checkpointId"], {"approved": True}, wire)
    assert shape(third) == [HUMAN_RESUMED, "tool:result", TEXT_DELTA, "loop:iteration:end", "loop:end", RUN_END]

    log = assert_invariant(http, nested_peer.url, first.run_id, wire, first, second, third)
    loop_crumbs = [e.data for e in log if e.type.startswith("loop:")]
    assert {c["loopId"] for c in loop_crumbs} == {loop_id}
    assert [(c["phase"], c["iteration"], c.get("output")) for c in loop_crumbs] == [
        ("start", 0, None), ("iteration:start", 1, None), ("iteration:end", 1, "round 1"),
        ("iteration:start", 2, None), ("iteration:end", 2, "round 2"), ("end", 2, "round 2"),
    ]  # fmt: skip
    assert loop_crumbs[-1]["reason"] == "max_iterations"
    found = get_json(http, f"{nested_peer.url}/loops/{loop_id}")
    assert (found["loop"]["status"], found["loop"]["iterations"], found["loop"]["runId"]) == (
        "completed", 2, first.run_id,
    )  # fmt: skip
    assert [(i["index"], i["status"], i["output"]) for i in found["iterations"]] == [
        (1, "completed", "round 1"), (2, "completed", "round 2"),
    ]  # fmt: skip


def test_a_subagent_pauses_the_parent_and_resumes_on_the_other_process(http, nested, nested_peer, wire):
    first = run(http, nested.url, "delegator", {"input": None}, wire)
    assert first.status == 200, first.text
    assert shape(first) == [RUN_START, *TOOL_INPUT, SUB_START, TEXT_DELTA, *TOOL_INPUT, HUMAN_REQUIRED], first.types
    paused = first.last_crumb.data
    assert (paused["toolName"], paused["input"]) == ("publish", {"title": "nested"})

    continuation = resume(http, nested_peer.url, paused["checkpointId"], {"approved": True}, wire)

    assert shape(continuation) == [
        HUMAN_RESUMED, "tool:result", TEXT_DELTA, SUB_END, "tool:result", TEXT_DELTA, RUN_END,
    ], continuation.types  # fmt: skip
    log = assert_invariant(http, nested.url, first.run_id, wire, first, continuation)
    assert [e.type for e in log].count(SUB_START) == 1
    [end] = of_type(log, SUB_END)
    assert (end["parentAgentId"], end["subagentId"], end["status"], end["output"]) == (
        "delegator", "writer", "completed", "Published.",
    )  # fmt: skip
    assert of_type(log, "tool:result")[-1] == {
        "type": "tool:result", "runId": first.run_id, "toolCallId": first.crumbs[1].data["toolCallId"],
        "toolName": "writer", "output": "Published.",
    }  # fmt: skip
    assert log[-1].data["output"] == "The writer said: Published."


# -- bad input -----------------------------------------------------------------------------------


def assert_nothing_created(http, base: str, run_id: str) -> None:
    assert_error_body(http.get(f"{base}/runs/{run_id}"), 404, "RUN_NOT_FOUND")


def test_an_unknown_pipeline_fails_in_the_stream(http, server, wire):
    stream = fetch(http, "POST", f"{server.url}/pipelines/no-such-pipeline/run", wire, body={"input": {}})
    assert failure_of(stream, wire)["code"] == "PIPELINE_NOT_FOUND"
    assert stream.run_id and stream.run_id.startswith("run_"), stream.headers
    assert_nothing_created(http, server.url, stream.run_id)

    run_id = f"run-pipe-{uuid.uuid4().hex}"
    chosen = fetch(http, "POST", f"{server.url}/pipelines/nope/run", wire, body={"input": {}, "runId": run_id})
    assert failure_of(chosen, wire)["code"] == "PIPELINE_NOT_FOUND" and chosen.run_id == run_id
    assert_nothing_created(http, server.url, run_id)


@pytest.mark.parametrize("until", [{"until": 0}, {"until": "three"}, {}, None, {"until": 1001}])
def test_a_loop_input_failing_the_schema_fails_in_the_stream(http, server, wire, until):
    run_id = f"run-loop-{uuid.uuid4().hex}"
    stream = run(http, server.url, "counter", {"input": until, "runId": run_id}, wire)
    assert failure_of(stream, wire)["code"] == "INPUT_INVALID"
    assert stream.run_id == run_id
    assert_nothing_created(http, server.url, run_id)


def test_unknown_loops_and_task_runs_are_404(http, server, wire):
    assert_error_body(http.get(f"{server.url}/loops/loop_{uuid.uuid4().hex}"), 404, "LOOP_NOT_FOUND")
    assert_error_body(http.get(f"{server.url}/loops/nope"), 404, "LOOP_NOT_FOUND")
    assert_error_body(http.get(f"{server.url}/tasks/task_{uuid.uuid4().hex}"), 404, "TASK_RUN_NOT_FOUND")
    assert_error_body(http.get(f"{server.url}/tasks/nope"), 404, "TASK_RUN_NOT_FOUND")


def test_task_args_failing_the_schema_fail_the_task_not_the_run(http, nested, wire):
    stream = run(http, nested.url, "bad-counter", {"input": None}, wire)

    log = assert_invariant(http, nested.url, stream.run_id, wire, stream)
    [end] = of_type(log, "task:end")
    assert (end["status"], end["error"]["code"]) == ("failed", "INPUT_INVALID")
    [tool_error] = of_type(log, "tool:error")
    assert tool_error["error"]["code"] == "INPUT_INVALID"
    assert log[-1].data["output"] == "ok=False"
    record = get_json(http, f"{nested.url}/tasks/{end['taskRunId']}")
    assert (record["status"], record["error"]["code"], record["input"]) == ("failed", "INPUT_INVALID", {"text": 3})


#: Ids and paths that must not reach a file: each is 404 and its body names no server path.
FILE_TRICKS = [
    "0123456789abcdef0123456789abcdef",  # an id of the right shape that was never stored
    "nope",
    "..",
    "%2e%2e",
    "..%2F..%2Fbread.db",
    "..%2f..%2f..%2fetc%2fpasswd",
    "%2Fetc%2Fpasswd",
    "..%5C..%5Cbread.db",
    "0123456789abcdef0123456789abcdef%00",
    "~",
    "files",
]


def test_unknown_files_and_path_tricks_are_404_without_a_server_path(http, server, wire):
    stored = of_type(run(http, server.url, "artist", {"input": None}, wire).crumbs, "file:generated")[0]["uri"]
    tricks = [*FILE_TRICKS, stored.removeprefix("/files/") + ".json", stored.removeprefix("/files/") + ".part"]
    leaks = (str(MAIN), str(server.home), str(server.db), "/tmp/", "Traceback", 'File "')
    for trick in tricks:
        answer = http.get(f"{server.url}/files/{trick}")
        assert answer.status_code == 404, (trick, answer.status_code, answer.content[:200])
        error = answer.json()["error"]
        assert error["code"] in ("FILE_NOT_FOUND", "ROUTE_NOT_FOUND"), (trick, error)
        for leak in leaks:
            assert leak not in answer.text, (trick, leak, answer.text)
    assert http.get(f"{server.url}{stored}").content == DOT_PNG  # the real one is still served


# -- one run at a time per session, across two processes ------------------------------------------


@contextmanager
def holding(http, server, wire: str, session_id: str, ticks: dict[str, int]) -> Iterator[Stream]:
    """A ``slow`` run on ``server`` holding the session, read up to its first tick; cancelled on
    the way out if a failing test left it running."""
    body = {"input": ticks, "session": {"id": session_id}}
    with open_stream(http, "POST", f"{server.url}/agents/slow/run", wire, body=body, seconds=20) as stream:
        assert stream.status == 200, stream.text
        try:
            stream.until(first_tick, "the holder's first tick")
            yield stream
        finally:
            if not stream.ended:
                http.post(f"{server.url}/runs/{stream.run_id}/cancel")


def session_runs(http, base: str, session_id: str) -> list[str]:
    """The run id of each message of the session's history, in order."""
    return [m["runId"] for m in get_json(http, f"{base}/sessions/{session_id}")["messages"]]


def assert_started_after_end(http, base: str, session_id: str, run_id: str, holder_id: str) -> None:
    """``run_id`` wrote its first message no earlier than ``holder_id``'s record last changed (its
    end): the processes share a clock, and the store's timestamps are ISO strings to the ms."""
    messages = get_json(http, f"{base}/sessions/{session_id}")["messages"]
    first = next(m["at"] for m in messages if m["runId"] == run_id)
    ended = get_json(http, f"{base}/runs/{holder_id}")["updatedAt"]
    assert first >= ended, f"run {run_id} started at {first}, before the holder ended at {ended}"


def test_a_busy_session_rejects_a_run_from_another_process_by_default(http, server, peer, wire):
    session_id, run_id = f"ses-{uuid.uuid4().hex}", f"run-busy-{uuid.uuid4().hex}"
    with holding(http, server, wire, session_id, SLOW_TICKS) as holder:
        body = {"input": "me too", "session": {"id": session_id}, "runId": run_id}
        refused = run(http, peer.url, "echo", body, wire)
        assert failure_of(refused, wire)["code"] == "SESSION_BUSY"
        assert refused.run_id == run_id
        assert_nothing_created(http, peer.url, run_id)
        assert http.post(f"{server.url}/runs/{holder.run_id}/cancel").status_code == 200
        holder.rest()
    assert run_error_of(holder, wire)["code"] == "RUN_CANCELLED"

    after = run(http, peer.url, "echo", {"input": "now", "session": {"id": session_id}}, wire)
    assert after.last_crumb.data["output"] == "now"  # the cancelled holder let go of the session
    assert session_runs(http, server.url, session_id)[-2:] == [after.run_id] * 2


def test_interrupt_cancels_the_holder_on_another_process_then_runs(http, server, peer, wire):
    session_id = f"ses-{uuid.uuid4().hex}"
    with holding(http, server, wire, session_id, SLOW_TICKS) as holder:
        body = {"input": "me first", "session": {"id": session_id}, "sessionPolicy": "interrupt"}
        second = run(http, peer.url, "echo", body, wire)
        holder.rest()

    assert run_error_of(holder, wire)["code"] == "RUN_CANCELLED"
    assert_invariant(http, server.url, holder.run_id, wire, holder)
    assert get_json(http, f"{peer.url}/runs/{holder.run_id}")["status"] == "cancelled"
    assert second.last_crumb.data["output"] == "me first"
    assert_invariant(http, peer.url, second.run_id, wire, second)
    assert session_runs(http, server.url, session_id) == [holder.run_id, second.run_id, second.run_id]
    assert_started_after_end(http, server.url, session_id, second.run_id, holder.run_id)


def test_enqueue_waits_on_another_process_until_the_holder_ends(http, server, peer, wire):
    session_id, run_id = f"ses-{uuid.uuid4().hex}", f"run-queued-{uuid.uuid4().hex}"
    with holding(http, server, wire, session_id, {"count": 16, "delayMs": 125}) as holder:
        body = {"input": "after you", "session": {"id": session_id}, "sessionPolicy": "enqueue", "runId": run_id}
        queued = Background(f"{peer.url}/agents/echo/run", wire, body)
        queued.start()
        wait_for(lambda: http.get(f"{peer.url}/runs/{run_id}").status_code == 200, 10, "the queued run's record")
        assert get_json(http, f"{server.url}/runs/{holder.run_id}")["status"] == "running"
        assert run_id not in session_runs(http, server.url, session_id)
        holder.rest()
    second = queued.result(15)

    assert holder.last_crumb.type == RUN_END and "tick 16 " in holder.last_crumb.data["output"]
    assert second.last_crumb.data["output"] == "after you"
    assert_invariant(http, server.url, holder.run_id, wire, holder)
    assert_invariant(http, peer.url, run_id, wire, second)
    # Had the queued run not waited, its messages would sit between the holder's two.
    assert session_runs(http, server.url, session_id) == [holder.run_id] * 2 + [run_id] * 2
    assert_started_after_end(http, server.url, session_id, run_id, holder.run_id)


def test_a_queued_run_cancelled_while_it_waits_still_opens_its_log(http, server, peer, wire):
    session_id, run_id = f"ses-{uuid.uuid4().hex}", f"run-queued-{uuid.uuid4().hex}"
    with holding(http, server, wire, session_id, SLOW_TICKS) as holder:
        body = {"input": "after you", "session": {"id": session_id}, "sessionPolicy": "enqueue", "runId": run_id}
        queued = Background(f"{peer.url}/agents/echo/run", wire, body)
        queued.start()
        wait_for(lambda: http.get(f"{peer.url}/runs/{run_id}").status_code == 200, 10, "the queued run's record")
        assert http.post(f"{peer.url}/runs/{run_id}/cancel").status_code == 200
        cancelled = queued.result(10)
        assert http.post(f"{server.url}/runs/{holder.run_id}/cancel").status_code == 200
        holder.rest()

    assert run_error_of(cancelled, wire)["code"] == "RUN_CANCELLED"
    assert get_json(http, f"{peer.url}/runs/{run_id}")["status"] == "cancelled"
    assert run_id not in session_runs(http, server.url, session_id)
    assert_invariant(http, peer.url, run_id, wire, cancelled)
