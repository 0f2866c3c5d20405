"""Faults against real processes: a worker killed mid-run, the SQLite file locked by another
process, and a load of 200 concurrent runs with 400 passive tails on one server."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from contextlib import ExitStack

import httpx2 as httpx

from ..sqlite_lock import lock_held
from ..waiting import wait_for
from .client import (
    RUN_END,
    TERMINAL,
    Tail,
    assert_log,
    durable_seqs,
    log_of,
    new_client,
    open_stream,
    passive_url,
    run,
    shared_client,
    text_of,
)

FAULTS = "tests.integration.fault_config:config"
#: Owners renew every third of it: a dead owner's runs can be marked interrupted 2 s after.
LEASE_SECONDS = 2
FAULT_ENV = {"BREAD_CONFIG": FAULTS, "BREAD_LEASE_SECONDS": str(LEASE_SECONDS)}
#: Long enough to be killed in the middle: 60 steps of 100 ms, 1000 ticks of 50 ms.
STEPPING = {"count": 60, "delayMs": 100}
TICKING = {"count": 100, "delayMs": 50}
NOTICED_SECONDS = LEASE_SECONDS + 8.0
#: Noticed, then the rest of a run made again: 60 steps of 100 ms, or 100 ticks of 50 ms.
CARRIED_ON_SECONDS = NOTICED_SECONDS + 20.0
CONTINUED = "agent:run:continued"
#: Far beyond a test: a dead owner's runs are marked in time only because it is known dead.
LONG_LEASE = {"BREAD_LEASE_SECONDS": "300"}
#: Well under that lease, with room for a busy 2-core machine.
AT_ONCE_SECONDS = 10.0
#: A minute of steps: longer than a server takes to be killed or to restart.
LONG_STEPPING = {"count": 60, "delayMs": 1000}


def faulty(start_server, name: str, **settings):
    settings["env"] = {**FAULT_ENV, **settings.get("env", {})}
    return start_server(name, **settings)


def durables(events) -> list[tuple[int, str]]:
    return [(e.seq, e.type) for e in events if e.durable]


def carried_on(events) -> bool:
    """Whether a run's events end with its end, after one ``agent:run:continued``."""
    crumbs = [e for e in events if e.kind == "crumb"]
    return bool(crumbs) and crumbs[-1].type == RUN_END and [e.type for e in crumbs].count(CONTINUED) == 1


# -- a worker killed mid-run ----------------------------------------------------------------------


def test_a_worker_killed_mid_run_leaves_whole_logs_and_its_runs_carried_on_to_their_end(http, start_server):
    victim = faulty(start_server, "victim")
    witness = faulty(start_server, "witness", db=victim.db)  # another process on the same file
    with ExitStack() as stack:
        stepping = stack.enter_context(
            open_stream(
                stack.enter_context(new_client()),
                "POST",
                f"{victim.url}/agents/stepper/run",
                "sse",
                body={"input": STEPPING},
            )
        )
        ticking = stack.enter_context(
            open_stream(
                stack.enter_context(new_client()),
                "POST",
                f"{victim.url}/agents/slow/run",
                "sse",
                body={"input": TICKING},
            )
        )
        stepping.until(lambda e: e.type == "tool:result" and e.data["output"] == {"noted": 3}, "the third step")
        ticking.until(lambda e: e.type == "text:delta", "the first tick")  # fmt: skip
        runs = {stepping.run_id: stepping, ticking.run_id: ticking}
        tails = {run_id: Tail(passive_url(witness.url, run_id), "sse") for run_id in runs}
        for tail in tails.values():
            tail.start()
            tail.wait_for(lambda e: e.type == "agent:run:start", 10, "the replayed start")
        seen = {run_id: durables(stream.events) for run_id, stream in runs.items()}
        (worker,) = victim.worker_pids()

        os.kill(worker, signal.SIGKILL)

        for stream in runs.values():
            try:
                stream.rest()
            except httpx.TransportError:
                pass  # the connection died with the worker, as it should
            assert not TERMINAL & set(stream.types), stream.types
        for run_id, tail in tails.items():
            events = tail.finish(CARRIED_ON_SECONDS)
            assert carried_on(events), tail.types
            log = log_of(http, witness.url, run_id, "sse")
            assert_log(log, run_id)
            assert set(seen[run_id]) <= set(durables(log)), "a durable crumb written before the kill was lost"
            assert carried_on(log)
            assert durable_seqs(events) == durable_seqs(log), "the tail did not get each durable crumb once"
            assert http.get(f"{witness.url}/runs/{run_id}").json()["status"] == "completed"
    assert worker not in wait_for(victim.worker_pids, 10, "gunicorn to respawn the worker")
    assert run(http, victim.url, "echo", {"input": "still serving"}, "sse").last_crumb.type == RUN_END


def test_the_respawned_worker_carries_on_a_run_nobody_touches(http, start_server):
    victim = faulty(start_server, "untouched")
    with new_client() as client, open_stream(client, "POST", f"{victim.url}/agents/stepper/run", "sse",
                                             body={"input": STEPPING}) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result", "the first step")
        (worker,) = victim.worker_pids()
        os.kill(worker, signal.SIGKILL)
    run_id = stepping.run_id

    # GET /runs/<id> only reads the record: the new worker's start-up sweep carries it on (its pid is gone).
    def status():
        answer = http.get(f"{victim.url}/runs/{run_id}")
        return answer.json()["status"] if answer.status_code == 200 and answer.json()["status"] != "running" else None

    assert wait_for(status, CARRIED_ON_SECONDS, "the run to end") == "completed"
    log = log_of(http, victim.url, run_id, "sse")
    assert_log(log, run_id)
    assert carried_on(log)


def test_a_tail_on_another_server_sees_the_run_carried_on_once_the_server_running_it_is_killed(http, start_server):
    victim = faulty(start_server, "owner", env=LONG_LEASE)
    witness = faulty(start_server, "witness", db=victim.db, env=LONG_LEASE)  # the same host, the same file
    with new_client() as client, open_stream(client, "POST", f"{victim.url}/agents/stepper/run", "sse",
                                             body={"input": LONG_STEPPING}) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result", "the first step")
        tail = Tail(passive_url(witness.url, stepping.run_id), "sse")
        tail.start()
        tail.wait_for(lambda e: e.type == "tool:result", 10, "the replayed first step")
        victim.kill()  # master and worker at once: no sweep of a respawned worker marks it

    continued = tail.wait_for(lambda e: e.type == CONTINUED, AT_ONCE_SECONDS, "the continuation")
    assert continued.data["reason"] == "owner-died"
    assert http.post(f"{witness.url}/runs/{stepping.run_id}/cancel").status_code == 200  # a minute of steps
    events = tail.finish(AT_ONCE_SECONDS)

    assert http.get(f"{witness.url}/runs/{stepping.run_id}").json()["status"] == "cancelled"
    log = log_of(http, witness.url, stepping.run_id, "sse")
    assert_log(log, stepping.run_id)
    assert durable_seqs(events) == durable_seqs(log)


# -- the SQLite file locked by another process -----------------------------------------------------

#: The longest the lock is held: under the store's busy wait (5 s), far over what the reads take.
LOCK_SECONDS = 4.0
WRITERS_WAIT_SECONDS = 0.5


class Background(threading.Thread):
    """A run request on a thread of its own; ``result`` is its read response."""

    def __init__(self, base: str, agent: str, body: dict):
        super().__init__(daemon=True)
        self.base, self.agent, self.body = base, agent, body
        self.result = None

    def run(self) -> None:
        with new_client() as client:
            self.result = run(client, self.base, self.agent, self.body, "sse")


def test_the_store_locked_by_another_process_makes_requests_wait_and_corrupts_nothing(http, start_server):
    server = faulty(start_server, "locked")
    finished = [run(http, server.url, "echo", {"input": f"before {n}"}, "sse") for n in range(3)]
    with new_client() as client, open_stream(client, "POST", f"{server.url}/agents/stepper/run", "sse",
                                             body={"input": {"count": 8, "delayMs": 100}}) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result", "the first step")
        with lock_held(server.db, LOCK_SECONDS) as lock:
            started = Background(server.url, "echo", {"input": "started while locked"})
            started.start()
            time.sleep(WRITERS_WAIT_SECONDS)  # by now that run and the stepper wait to write
            reads = [http.get(f"{server.url}{path}") for path in ("/health", "/agents", f"/runs/{finished[0].run_id}")]
            replayed = log_of(http, server.url, finished[1].run_id, "sse")
            still_waiting = started.is_alive()
            read_while_locked = lock.release()  # a stalled worker's reads end only as the lock runs out
        stepping.rest()
        started.join(15)

    assert read_while_locked, "reads waited for the lock to run out while writers waited: the worker stalled"
    assert [r.status_code for r in reads] == [200, 200, 200]
    assert text_of(replayed) == "before 1" and replayed[-1].type == RUN_END
    assert still_waiting, "a run started while the file was locked did not wait for it"
    assert started.result.last_crumb.data["output"] == "started while locked"
    assert stepping.last_crumb.type == RUN_END, stepping.types
    for stream in [*finished, started.result, stepping]:
        log = log_of(http, server.url, stream.run_id, "sse")
        assert_log(log, stream.run_id)
        assert text_of(log) == text_of(stream.events)
    with sqlite3.connect(server.db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert "Traceback" not in server.log(limit=10**9)


# -- load ------------------------------------------------------------------------------------------

RUNS = 200
TAILS_PER_RUN = 2
LOAD_INPUT = {"count": 3, "delayMs": 100}
LOAD_SECONDS = 60.0


class LoadedRun(threading.Thread):
    """One run request; a passive tail opens as its first crumb arrives, another mid-run."""

    def __init__(self, base: str, client: httpx.Client, ready: threading.Barrier):
        super().__init__(daemon=True)
        self.base, self.client, self.ready = base, client, ready
        self.stream = None
        self.tails: list[Tail] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.ready.wait()
            with open_stream(self.client, "POST", f"{self.base}/agents/stepper/run", "ndjson",
                             body={"input": LOAD_INPUT}, seconds=LOAD_SECONDS) as stream:  # fmt: skip
                self.stream = stream
                stream.until(lambda e: e.type == "agent:run:start", "the start")
                self._tail()
                stream.until(lambda e: e.type == "tool:result", "the first step")
                self._tail()
                stream.rest()
        except BaseException as exc:  # reported on the test's thread
            self.error = exc

    def _tail(self) -> None:
        tail = Tail(passive_url(self.base, self.stream.run_id), "ndjson", seconds=LOAD_SECONDS, client=self.client)
        self.tails.append(tail)
        tail.start()


def test_200_concurrent_runs_with_400_passive_tails(http, start_server):
    server = faulty(start_server, "load", transport="http-chunked")
    ready = threading.Barrier(RUNS, timeout=30)
    with shared_client(RUNS * (1 + TAILS_PER_RUN)) as client:
        runs = [LoadedRun(server.url, client, ready) for _ in range(RUNS)]
        began = time.monotonic()
        for loaded in runs:
            loaded.start()
        for loaded in runs:
            loaded.join(max(1.0, LOAD_SECONDS - (time.monotonic() - began)))
        for loaded in runs:
            assert not loaded.is_alive(), "a run request was still open after the deadline"
            if loaded.error is not None:
                raise loaded.error
            for tail in loaded.tails:
                tail.join(max(1.0, LOAD_SECONDS - (time.monotonic() - began)))
        took = time.monotonic() - began

    assert len({loaded.stream.run_id for loaded in runs}) == RUNS
    for loaded in runs:
        run_id = loaded.stream.run_id
        assert loaded.stream.last_crumb.type == RUN_END, loaded.stream.types
        log = log_of(http, server.url, run_id, "ndjson")
        assert_log(log, run_id)
        assert len(loaded.tails) == TAILS_PER_RUN
        for tail in loaded.tails:
            events = tail.finish(LOAD_SECONDS)
            assert durable_seqs(events) == durable_seqs(log), "a tail lost or repeated a durable crumb"
            assert text_of(events) == text_of(log)
    print(f"{RUNS} runs and {RUNS * TAILS_PER_RUN} tails served in {took:.1f} s")
