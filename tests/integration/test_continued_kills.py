"""A gunicorn worker SIGKILLed at each point a run can be in (issue 26): inside a tool of each
``on_repeat``, while the model streams, inside a subagent, a loop iteration, and a pipeline's
agent and task steps; and a run whose every worker dies at the same point. The worker of the
"victim" server kills itself at the point named for the run (tests/continuation_config.py,
``CRASH_AT=marked``); its master starts a new worker and a sibling server shares the SQLite
file, so either carries the run on. A passive tail on the
sibling follows each run through it all. (The same points in process: tests/test_continuation.py.)"""

from __future__ import annotations

import httpx2 as httpx
import pytest

from ..waiting import wait_for
from . import servers
from .client import (
    RUN_END,
    Tail,
    assert_log,
    durable_seqs,
    log_of,
    new_client,
    open_stream,
    passive_url,
    text_of,
)
from .client import resume as resume_run

CONFIG = "tests.continuation_config:config"
CONTINUED = "agent:run:continued"
#: Killed, noticed (a dead local owner: at once, or by a sweep within a second), carried on, ended.
ENDED_SECONDS = 30.0


class Place:
    """The two servers and the files their tools and crash points share."""

    def __init__(self, home):
        self.calls, self.marker = home / "calls", home / "crash"
        env = {"BREAD_CONFIG": CONFIG, "CALLS_FILE": str(self.calls), "CRASH_AT_FILE": str(self.marker)}
        db = home / "shared.db"
        env["CRASH_AT"] = "marked"  # the first worker at the point dies there (and each one, with -always)
        self.victim = servers.Server("victim", home, db, env=env)
        self.sibling = servers.Server("sibling", home, db, env=env)

    def crash_next_run_at(self, point: str) -> None:
        self.calls.write_text("")
        self.marker.write_text(point)

    def called(self) -> list[str]:
        return self.calls.read_text().split("\n")[:-1]


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    place = Place(tmp_path_factory.mktemp("continued-kills"))
    place.victim.start()  # the first creates the SQLite file
    place.sibling.start()
    yield place
    for server in (place.victim, place.sibling):
        server.stop()


def killed_run(http, place: Place, route: str, body: dict, point: str) -> tuple[str, Tail]:
    """Start a run on the victim, which dies at ``point``; the run's id and the sibling's tail of
    it (which follows a passive stream's rule: through a pause, to the run's end)."""
    place.crash_next_run_at(point)
    with new_client() as client, open_stream(client, "POST", f"{place.victim.url}{route}", "sse", body=body) as started:
        run_id = started.run_id
        tail = Tail(passive_url(place.sibling.url, run_id), "sse", seconds=ENDED_SECONDS)
        tail.start()
        tail.wait_for(lambda e: e.type == CONTINUED, ENDED_SECONDS, "the continuation")
    assert not place.marker.exists(), "no worker was ever at the point it was to die at"
    return run_id, tail


def assert_carried_on(http, place: Place, run_id: str, tail: Tail):
    """The run's log: whole and gap-free, continued once, its durable crumbs and its text those
    the sibling's tail got; the log."""
    log = log_of(http, place.sibling.url, run_id, "sse")
    assert_log(log, run_id)
    assert [e.type for e in log].count(CONTINUED) == 1
    (continued,) = [e for e in log if e.type == CONTINUED]
    assert continued.data["afterSeq"] == continued.seq - 1 and continued.data["reason"] == "owner-died"
    covered = [e for e in log if e.seq <= tail.events[-1].seq]
    assert durable_seqs(tail.events) == durable_seqs(covered), "the tail did not get each durable crumb once"
    assert text_of(tail.events) == text_of(covered)
    return log


def run_body(agent: str) -> tuple[str, dict]:
    if agent == "line":
        return "/pipelines/line/run", {"input": {"n": 1}}
    return f"/agents/{agent}/run", {"input": "go"}


DONE = "Almost there: all done."
#: agent, where its worker dies, the calls its tools (and task) saw, what it ends with.
ENDED = {
    "idempotent tool": ("crashy", "tool-run", ["tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"], DONE),
    "tool that fails": ("crashy", "tool-fail", ["tool_run 1", "tool_ask 2", "tool_fail 3"], DONE),
    "model streaming": ("crashy", "model", ["tool_run 1", "tool_ask 2", "tool_fail 3"], DONE),
    "subagent": ("boss", "tool-run", ["tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"], "The crew is done."),
    "loop iteration": ("looper", "tool-run-2", ["tool_run 1", "tool_run 2", "tool_run 2", "tool_run 3"], "Round done."),
    "pipeline agent step": (
        "line",
        "tool-run",
        ["task 1", "tool_run 1", "tool_run 1", "tool_ask 2", "tool_fail 3"],
        DONE,
    ),  # fmt: skip
    "pipeline task step": ("line", "task", ["task 1", "task 1", "tool_run 1", "tool_ask 2", "tool_fail 3"], DONE),
}


@pytest.mark.parametrize("case", ENDED)
def test_a_worker_killed_mid_run_has_the_run_carried_on_to_its_end(http, place, case):
    agent, point, calls, output = ENDED[case]
    route, body = run_body(agent)

    run_id, tail = killed_run(http, place, route, body, point)
    tail.finish(ENDED_SECONDS)

    log = assert_carried_on(http, place, run_id, tail)
    assert log[-1].type == RUN_END and log[-1].data["output"] == output, [e.type for e in log]
    assert place.called() == calls
    if point == "tool-fail":
        (error,) = [e for e in log if e.type == "tool:error"]
        assert error.data["toolName"] == "tool_fail" and error.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    if point == "model":  # the text the dead worker streamed was never logged: the call was made again
        (continued,) = [e for e in log if e.type == CONTINUED]
        assert text_of([e for e in log if e.seq > continued.seq]) == DONE
    if agent == "looper":
        assert [e.data["iteration"] for e in log if e.type == "loop:iteration:end"] == [1, 2, 3]
    if agent == "line":
        assert [e.data["index"] for e in log if e.type == "pipeline:step:end"] == [0, 1]


def test_a_worker_killed_in_a_tool_that_asks_pauses_and_the_answer_on_the_sibling_calls_it_again(http, place):
    run_id, tail = killed_run(http, place, "/agents/crashy/run", {"input": "go"}, "tool-ask")

    paused = tail.wait_for(lambda e: e.type == "human:required", ENDED_SECONDS, "the question")
    assert paused.data["outcomeUnknown"] is True
    assert (paused.data["kind"], paused.data["toolName"]) == ("approval", "tool_ask")
    with new_client() as client:
        answered = resume_run(client, place.sibling.url, paused.data["checkpointId"], {"approved": True}, "sse")
    assert answered.status == 200 and answered.last_crumb.data["output"] == DONE, answered.types
    tail.finish(ENDED_SECONDS)
    assert_carried_on(http, place, run_id, tail)
    assert place.called() == ["tool_run 1", "tool_ask 2", "tool_ask 2", "tool_fail 3"]


def test_a_run_whose_every_worker_dies_at_the_same_point_ends_interrupted_after_three_continuations(http, place):
    place.crash_next_run_at("model-always")
    try:
        with new_client() as client, open_stream(client, "POST", f"{place.victim.url}/agents/crashy/run", "sse",
                                                 body={"input": "go"}) as started:  # fmt: skip
            run_id = started.run_id

        def ended() -> dict | None:
            try:  # the server asked may be between a dead worker and its next one
                record = http.get(f"{place.sibling.url}/runs/{run_id}").json()
            except httpx.TransportError:
                return None
            return record if record["status"] != "running" else None

        record = wait_for(ended, ENDED_SECONDS, "the run to end")
    finally:
        place.marker.unlink(missing_ok=True)

    assert record["status"] == "interrupted"
    log = log_of(http, place.sibling.url, run_id, "sse")
    assert_log(log, run_id)
    assert [e.data["attempt"] for e in log if e.type == CONTINUED] == [1, 2, 3]
    assert log[-1].type == "agent:error" and log[-1].data["error"]["code"] == "RUN_INTERRUPTED"
