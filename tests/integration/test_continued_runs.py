"""Runs carried on across real gunicorn servers sharing a store (issue 26): a server SIGKILLed
mid-run on SQLite and on Postgres, with a passive tail on a second server through it all;
SIGTERM with a long run in flight (handed over after the graceful timeout, completed by a
sibling); and a rolling restart (SIGHUP of the master: new workers, the old ones drained) that
loses no run.
(The runs' crash points one by one: test_continued_kills.py, and in process
tests/test_continuation.py; SIGTERM and the next start: test_lifecycle.py.)"""

from __future__ import annotations

import os
import signal
from collections import Counter
from contextlib import ExitStack

import pytest

from ..waiting import wait_for
from .client import RUN_END, Tail, assert_log, durable_seqs, log_of, new_client, open_stream, passive_url
from .test_faults import CONTINUED, faulty

#: 60 steps of 100 ms, each a tool call: long enough to be killed, or handed over, in the middle.
STEPS = 60
STEPPING = {"count": STEPS, "delayMs": 100}
#: A dead local owner is noticed by the sibling's next sweep (1 s); then the rest of the run.
COMPLETED_SECONDS = 40.0


def assert_carried_on_once(log, run_id: str, reason: str) -> None:
    """A completed run's log: whole, one continuation, and each of its tool calls answered once."""
    assert_log(log, run_id)
    types = [e.type for e in log]
    assert types[-1] == RUN_END and log[-1].data["output"] == "finished.", types
    (continued,) = [e for e in log if e.type == CONTINUED]
    assert continued.data["reason"] == reason and continued.data["afterSeq"] == continued.seq - 1
    calls = Counter(e.data["toolCallId"] for e in log if e.type == "tool:call")
    results = Counter(e.data["toolCallId"] for e in log if e.type == "tool:result")
    assert calls == results and set(results.values()) == {1}, (calls, results)
    assert sorted(e.data["output"]["noted"] for e in log if e.type == "tool:result") == list(range(1, STEPS + 1))


@pytest.fixture(params=["sqlite", "postgres"])
def shared_db(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "shared.db"
    return request.getfixturevalue("postgres_url")


def test_a_server_killed_mid_run_has_its_run_carried_on_by_a_sibling_and_tailed_whole(http, start_server, shared_db):
    victim = faulty(start_server, "victim", db=shared_db)
    sibling = faulty(start_server, "sibling", db=shared_db)
    with new_client() as client, open_stream(client, "POST", f"{victim.url}/agents/stepper/run", "sse",
                                             body={"input": STEPPING}) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result" and e.data["output"] == {"noted": 5}, "the fifth step")
        tail = Tail(passive_url(sibling.url, stepping.run_id), "sse", seconds=COMPLETED_SECONDS)
        tail.start()
        tail.wait_for(lambda e: e.type == "tool:result", 10, "the replayed first step")

        victim.kill()  # master and worker at once: only the sibling is left

        events = tail.finish(COMPLETED_SECONDS)
    log = log_of(http, sibling.url, stepping.run_id, "sse")
    assert_carried_on_once(log, stepping.run_id, "owner-died")
    assert durable_seqs(events) == durable_seqs(log), "the tail did not get each durable crumb once"
    assert http.get(f"{sibling.url}/runs/{stepping.run_id}").json()["status"] == "completed"


def test_sigterm_hands_a_long_run_to_a_sibling_after_the_graceful_timeout_and_it_completes(http, start_server):
    leaving = faulty(start_server, "leaving", graceful_timeout=2)
    sibling = faulty(start_server, "staying", db=leaving.db)
    with new_client() as client, open_stream(client, "POST", f"{leaving.url}/agents/stepper/run", "sse",
                                             body={"input": STEPPING}) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result", "the first step")
        tail = Tail(passive_url(sibling.url, stepping.run_id), "sse", seconds=COMPLETED_SECONDS)
        tail.start()

        leaving.terminate()  # six seconds of steps left: more than the two the server is given

        assert leaving.wait(2 + 5) == 0
        events = tail.finish(COMPLETED_SECONDS)
    log = log_of(http, sibling.url, stepping.run_id, "sse")
    assert_carried_on_once(log, stepping.run_id, "shutdown")
    assert durable_seqs(events) == durable_seqs(log), "the tail did not get each durable crumb once"
    assert http.get(f"{sibling.url}/runs/{stepping.run_id}").json()["status"] == "completed"


def test_a_rolling_restart_hands_every_run_over_to_the_new_workers(http, start_server):
    server = faulty(start_server, "rolling", workers=2)
    with ExitStack() as streams:
        run_ids = []
        for _ in range(4):
            client = streams.enter_context(new_client())
            url = f"{server.url}/agents/stepper/run"
            stream = streams.enter_context(open_stream(client, "POST", url, "sse", body={"input": STEPPING}))
            stream.until(lambda e: e.type == "tool:result", "the first step")
            run_ids.append(stream.run_id)
        old = set(server.worker_pids())

        os.kill(server.pid, signal.SIGHUP)  # gunicorn starts new workers, then drains the old ones

        wait_for(lambda: not old & set(server.worker_pids()), 30, "the old workers to exit")

        def all_ended():
            records = [http.get(f"{server.url}/runs/{run_id}").json() for run_id in run_ids]
            return all(r["status"] != "running" for r in records) and records

        records = wait_for(all_ended, COMPLETED_SECONDS, "every run to end")
    assert [r["status"] for r in records] == ["completed"] * 4
    for run_id in run_ids:
        log = log_of(http, server.url, run_id, "sse")
        assert_carried_on_once(log, run_id, "shutdown")
