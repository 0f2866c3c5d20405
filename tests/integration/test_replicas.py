"""Replicas behind a load balancer: three gunicorn servers (gevent) on three ports sharing one
store and one Redis, as ``REDIS_URL`` sets them up, and nothing else. The store is a SQLite
file (replicas on one host), then a Postgres database (replicas on several hosts).

The replicas run ``tests.replica_config``: the demo agents plus ``stepper`` (durable crumbs all
along a run), with owners looking in the store for recorded cancels only once a minute, so a
cancel that ends a run at once came over Redis. A text chunk reaches a tail on another replica
one by one only through Redis: the store logs each text segment as one aggregated entry.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from .. import postgres_server
from ..waiting import wait_for
from . import servers
from .client import (
    HUMAN_REQUIRED,
    HUMAN_RESUMED,
    RUN_END,
    RUN_START,
    TEXT_DELTA,
    WRITER_FIRST_LEG,
    Stream,
    Tail,
    assert_continuation,
    assert_error_body,
    assert_log,
    fetch,
    log_of,
    new_client,
    open_stream,
    passive_url,
    resume,
    run_error_of,
)

WIRE, TRANSPORT = "sse", "http-sse"
CONFIG = "tests.replica_config:config"
#: The store is polled for cancels once a minute on these replicas.
CANCEL_SECONDS = 2.0
TOOL_RESULT = "tool:result"


def replica(name: str, home, db, redis_url: str) -> servers.Server:
    return servers.Server(name, home, db, TRANSPORT, env={"REDIS_URL": redis_url, "BREAD_CONFIG": CONFIG})


def start_all(group: list[servers.Server]) -> None:
    """The first creates the store (the SQLite file, or Postgres's tables); the others start together."""
    group[0].start()
    errors: list[BaseException] = []

    def start(server: servers.Server) -> None:
        try:
            server.start()
        except BaseException as exc:  # raised below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(server,)) for server in group[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(servers.READY_SECONDS * servers.BIND_ATTEMPTS)
    if errors:
        raise errors[0]


def stop_all(group: list[servers.Server]) -> None:
    for server in group:
        server.terminate()
    for server in group:
        server.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_db(request, tmp_path_factory):
    """What the replicas share: a SQLite file, or a Postgres database (``BREAD_DB`` either way)."""
    if request.param == "sqlite":
        yield tmp_path_factory.mktemp("replicas-db") / "shared.db"
        return
    admin_url = request.getfixturevalue("postgres_admin_url")
    name = f"replicas_{uuid.uuid4().hex[:12]}"
    yield postgres_server.create_database(admin_url, name)
    postgres_server.drop_database(admin_url, name)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, redis_url, shared_db):
    home = tmp_path_factory.mktemp("replicas")
    group = [replica(f"replica-{name}", home, shared_db, redis_url) for name in "abc"]
    try:
        start_all(group)
        yield group
    finally:
        stop_all(group)


class Runner(threading.Thread):
    """A run request read on a thread of its own, so a test can watch its response progress."""

    def __init__(self, base: str, agent: str, body: dict, seconds: float = 30.0):
        super().__init__(name=f"run {agent} on {base}", daemon=True)
        self.url, self.body, self.seconds = f"{base}/agents/{agent}/run", body, seconds
        self.run_id = body["runId"]
        self.stream: Stream | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with new_client() as client:
                with open_stream(client, "POST", self.url, WIRE, body=self.body, seconds=self.seconds) as stream:
                    self.stream = stream
                    while stream.next_event() is not None:
                        pass
        except BaseException as exc:  # handed to the test thread by finish()
            self.error = exc

    def count(self, kind: str) -> int:
        return sum(e.type == kind for e in list(self.stream.events)) if self.stream else 0

    def finish(self, seconds: float) -> Stream:
        self.join(seconds)
        if self.error is not None:
            raise self.error
        assert not self.is_alive() and self.stream is not None, "the run's response did not end"
        return self.stream


def start_stepper(base: str, count: int, delay_ms: int) -> Runner:
    runner = Runner(base, "stepper", {"input": {"count": count, "delayMs": delay_ms}, "runId": new_run_id()})
    runner.start()
    return runner


def new_run_id() -> str:
    return f"run-replicas-{uuid.uuid4().hex}"


def wait_for_run(http, base: str, run_id: str) -> None:
    wait_for(lambda: http.get(f"{base}/runs/{run_id}").status_code == 200, 10, f"run {run_id} on {base}")


def count(events, kind: str) -> int:
    return sum(e.type == kind for e in list(events))


def non_text_seqs(events) -> list[int]:
    return [e.seq for e in events if e.kind == "crumb" and e.type != TEXT_DELTA]


def live_chunks(events) -> list[str]:
    """Text chunks as the model streamed them (``done `` alone): the log never holds one."""
    return [e.data["delta"] for e in events if e.type == TEXT_DELTA and e.data["delta"] == "done "]


def test_the_cross_replica_hitl_walk_through(http, replicas):
    a, b, c = replicas
    # 1. POST /agents/writer/run lands on A; A executes, logging and publishing every crumb.
    url = f"{a.url}/agents/writer/run"
    with open_stream(http, "POST", url, WIRE, body={"input": {"topic": "bread"}}) as first_leg:
        first_leg.until(lambda e: e.type == RUN_START, "the run's start")
        run_id = first_leg.run_id
        # 2. A dashboard opens the passive stream on B: the log from the store, then live frames.
        dashboard = Tail(passive_url(b.url, run_id), WIRE)
        dashboard.start()
        # 3. The run suspends at human:required: A's stream ends ...
        first_leg.rest()
    assert first_leg.types == WRITER_FIRST_LEG
    checkpoint_id = first_leg.last_crumb.data["checkpointId"]
    # ... and B's stays open.
    dashboard.wait_for(lambda e: e.type == HUMAN_REQUIRED, 10, "the pause, on B")
    assert dashboard.status == 200 and not dashboard.done

    # 4. POST /resume/:checkpointId lands on C: C executes the continuation, publishing it.
    continuation = resume(http, c.url, checkpoint_id, {"approved": True}, WIRE)
    assert_continuation(continuation, run_id)

    # 5. B relays the continuation live and closes at agent:run:end.
    relayed = [e for e in dashboard.finish(10) if e.kind == "crumb"]
    assert relayed[-1].type == RUN_END
    after_pause = relayed[[e.type for e in relayed].index(HUMAN_REQUIRED) + 1 :]
    # As C streamed it: the text as a live chunk at its watermark (9), not the log's entry 10.
    assert [(e.type, e.seq, e.data) for e in after_pause] == [(e.type, e.seq, e.data) for e in continuation.events]
    assert after_pause[0].type == HUMAN_RESUMED
    log = log_of(http, b.url, run_id, WIRE)
    assert_log(log, run_id)
    assert non_text_seqs(relayed) == non_text_seqs(log) == [1, 3, 4, 5, 6, 7, 8, 9, 11]
    assert "".join(e.data["delta"] for e in relayed if e.type == TEXT_DELTA) == "Drafting a post about bread.Published."


def test_a_cancel_sent_to_another_replica_stops_the_run_at_once(http, replicas):
    a, b, c = replicas
    body = {"input": {"count": 1000, "delayMs": 200}}
    with open_stream(http, "POST", f"{a.url}/agents/slow/run", WIRE, body=body) as stream:
        stream.until(lambda e: e.type == TEXT_DELTA, "the first tick")
        sent = time.monotonic()
        answer = http.post(f"{b.url}/runs/{stream.run_id}/cancel")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"ok": True, "runId": stream.run_id}
        stream.rest()
        seconds = time.monotonic() - sent

    assert seconds < CANCEL_SECONDS, f"the run took {seconds:.2f} s to stop: the cancel did not come over Redis"
    assert run_error_of(stream, WIRE)["code"] == "RUN_CANCELLED"
    assert http.get(f"{c.url}/runs/{stream.run_id}").json()["status"] == "cancelled"
    assert_log(log_of(http, c.url, stream.run_id, WIRE), stream.run_id)
    # 404 only when no replica runs it: a finished run, an unknown one.
    assert_error_body(http.post(f"{c.url}/runs/{stream.run_id}/cancel"), 404, "RUN_NOT_FOUND")
    assert_error_body(http.post(f"{b.url}/runs/{new_run_id()}/cancel"), 404, "RUN_NOT_FOUND")


def test_a_passive_tail_reconnects_to_another_replica_with_last_event_id(http, replicas):
    a, b, c = replicas
    runner = start_stepper(a.url, count=12, delay_ms=100)
    wait_for_run(http, b.url, runner.run_id)

    with open_stream(http, "GET", passive_url(b.url, runner.run_id), WIRE) as first:
        first.until(lambda e: count(first.events, TOOL_RESULT) >= 4, "four steps, on B")
    last_event_id = [e.seq for e in first.events if e.seq is not None][-1]
    # The tail on B got chunks as A streamed them: live, through Redis.
    assert live_chunks(first.events)

    second = fetch(http, "GET", passive_url(c.url, runner.run_id), WIRE, headers={"Last-Event-ID": str(last_event_id)})
    assert second.status == 200 and second.last_crumb.type == RUN_END

    response = runner.finish(20)
    log = log_of(http, a.url, runner.run_id, WIRE)
    assert_log(log, runner.run_id)
    assert count(log, TOOL_RESULT) == 12
    # No durable crumb lost or twice across the reconnection, nor in the run's own response.
    assert non_text_seqs(first.events) + non_text_seqs(second.events) == non_text_seqs(log)
    assert non_text_seqs(response.events) == non_text_seqs(log)


def test_redis_stopped_mid_run_loses_nothing_and_fan_out_resumes(http, redis_server, tmp_path):
    group = [replica(f"outage-{name}", tmp_path, tmp_path / "outage.db", redis_server.url) for name in "ab"]
    try:
        start_all(group)
        a, b = group
        runner = start_stepper(a.url, count=40, delay_ms=100)
        wait_for_run(http, b.url, runner.run_id)
        tail = Tail(passive_url(b.url, runner.run_id), WIRE)
        tail.start()
        tail.wait_for(lambda e: live_chunks(tail.events), 10, "a live chunk, on B")

        redis_server.stop()
        on_b, on_a = count(tail.events, TOOL_RESULT), runner.count(TOOL_RESULT)
        # While Redis is down the run goes on; both its response on A and the tail on B read the store.
        wait_for(lambda: count(tail.events, TOOL_RESULT) >= on_b + 3, 10, "three steps on B, Redis down")
        wait_for(lambda: runner.count(TOOL_RESULT) >= on_a + 3, 10, "three steps on A, Redis down")
        assert runner.is_alive(), "the run ended while Redis was down: nothing was left to check after"

        redis_server.start()
        restarted = len(tail.events)
        relayed = tail.finish(20)
        response = runner.finish(20)

        log = log_of(http, b.url, runner.run_id, WIRE)
        assert_log(log, runner.run_id)
        assert count(log, TOOL_RESULT) == 40 and log[-1].type == RUN_END
        assert non_text_seqs(relayed) == non_text_seqs(response.events) == non_text_seqs(log)
        # Fan-out came back by itself: chunks reached B live again after the restart.
        assert live_chunks(relayed[restarted:]), "no live chunk reached B after Redis came back"
    finally:
        stop_all(group)
