"""Runs queued for workers (BREAD_EXECUTOR=huey, issue 27) on one SQLite store: two gunicorn web
servers and two ``bread-sync worker`` processes share the store and its Huey queue beside it.
A run through web A is driven by a worker and tailed on B; its resume, through A, by a worker;
a cancel from B reaches a run on any worker, and one still queued; a worker SIGKILLed mid-run
has its run carried on by the other. Live text between a worker and the web tier travels with
the next durable crumb here (SQLite alone): the streams' durable crumbs are asserted whole. The
smoke passes at the end: a Postgres store (its notifications the live channel), Redis as the queue
and the live channel."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from .client import (
    AGENT_ERROR,
    HUMAN_REQUIRED,
    HUMAN_RESUMED,
    RUN_END,
    RUN_START,
    Tail,
    assert_log,
    durable_seqs,
    log_of,
    new_client,
    open_stream,
    passive_url,
    resume,
    run,
    text_of,
)
from .servers import Server, Worker
from .test_faults import FAULT_ENV

#: The background runs' tests (test_background_runs.py) reuse these servers with a webhook on 127.0.0.1.
QUEUED_ENV = {**FAULT_ENV, "BREAD_EXECUTOR": "huey", "BREAD_ALLOW_PRIVATE_WEBHOOKS": "1"}
#: 30 steps of 100 ms, each a tool call: long enough to cancel or kill in the middle.
STEPPING = {"count": 30, "delayMs": 100}
ENDED_SECONDS = 30.0


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    return tmp_path_factory.mktemp("queued")


@pytest.fixture(scope="module")
def web(place):
    """Web servers A and B on one SQLite store, queueing their runs."""
    started = [Server(name, place, place / "shared.db", "http-sse", env=QUEUED_ENV) for name in ("web-a", "web-b")]
    try:
        yield [server.start() for server in started]
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def workers(web, place):
    started = [Worker(name, place, place / "shared.db", env=QUEUED_ENV) for name in ("w1", "w2")]
    try:
        yield [worker.start() for worker in started]
    finally:
        for worker in started:
            worker.stop()


def _owner_pid(http, base: str, run_id: str) -> int | None:
    owner = http.get(f"{base}/runs/{run_id}").json()["owner"]
    return int(owner.split(":")[1]) if owner else None


def test_a_run_still_queued_is_cancelled_before_it_starts(http, web):
    a, b = web  # no worker yet: the run stays queued
    with new_client() as client, open_stream(client, "POST", f"{a.url}/agents/stepper/run", "sse",
                                             body={"input": STEPPING}) as stream:  # fmt: skip
        stream.until(lambda e: e.type == RUN_START, "the run's start")
        assert http.get(f"{b.url}/runs/{stream.run_id}").json()["status"] == "queued"
        assert http.post(f"{b.url}/runs/{stream.run_id}/cancel").status_code == 200
        end = stream.until(lambda e: e.type in (RUN_END, AGENT_ERROR), "the run's end")
    assert end.data["error"]["code"] == "RUN_CANCELLED"
    log = log_of(http, a.url, stream.run_id, "sse")
    assert_log(log, stream.run_id)
    assert [e.type for e in log] == [RUN_START, AGENT_ERROR]
    assert http.get(f"{a.url}/runs/{stream.run_id}").json()["status"] == "cancelled"


def test_a_run_through_a_driven_by_a_worker_tailed_on_b_resumed_through_a_and_cancelled_from_b(http, web, workers):
    a, b = web
    with new_client() as client:
        first = run(client, a.url, "writer", {"input": {"topic": "bread"}}, "sse")
        assert first.status == 200 and first.types[0] == RUN_START and first.types[-1] == HUMAN_REQUIRED, first.types
        assert durable_seqs(first.events) == [1, 3, 4, 5, 6, 7]
        assert text_of(first.events) == "Drafting a post about bread."
        tail = Tail(passive_url(b.url, first.run_id), "sse", seconds=ENDED_SECONDS)
        tail.start()
        checkpoint_id = first.last_crumb.data["checkpointId"]
        second = resume(client, a.url, checkpoint_id, {"approved": True}, "sse")
        assert second.types[0] == HUMAN_RESUMED and second.types[-1] == RUN_END, second.types
        assert second.last_crumb.data["output"] == "Published."
        tailed = tail.finish(ENDED_SECONDS)
        log = log_of(http, b.url, first.run_id, "sse")
        assert_log(log, first.run_id)
        assert durable_seqs(tailed) == durable_seqs(log)

        with open_stream(client, "POST", f"{a.url}/agents/stepper/run", "sse", body={"input": STEPPING}) as stepping:
            stepping.until(lambda e: e.type == "tool:result", "the first step")
            assert _owner_pid(http, b.url, stepping.run_id) in {worker.pid for worker in workers}
            assert http.post(f"{b.url}/runs/{stepping.run_id}/cancel").status_code == 200
            end = stepping.until(lambda e: e.type in (RUN_END, AGENT_ERROR), "the run's end")
    assert end.data["error"]["code"] == "RUN_CANCELLED"
    assert http.get(f"{a.url}/runs/{stepping.run_id}").json()["status"] == "cancelled"


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_worker_stopped_mid_run_has_its_run_carried_on_by_the_other(http, web, workers, stop):
    a, b = web
    with new_client() as client, open_stream(client, "POST", f"{a.url}/agents/stepper/run", "sse",
                                             body={"input": STEPPING}, seconds=ENDED_SECONDS) as stepping:  # fmt: skip
        stepping.until(lambda e: e.type == "tool:result" and e.data["output"] == {"noted": 3}, "the third step")
        pid = _owner_pid(http, a.url, stepping.run_id)
        (victim,) = [worker for worker in workers if worker.pid == pid]
        if stop == "SIGTERM":
            assert victim.stop() == 0, victim.log()  # a warm shutdown: the run handed over
        else:
            victim.kill()
        stepping.until(lambda e: e.type in (RUN_END, AGENT_ERROR), "the run's end")
        victim.start()  # two workers again for the next test
    log = log_of(http, b.url, stepping.run_id, "sse")
    assert_log(log, stepping.run_id)
    types = [e.type for e in log]
    assert types[-1] == RUN_END and types.count("agent:run:continued") == 1, types
    (continued,) = [e for e in log if e.type == "agent:run:continued"]
    assert continued.data["reason"] == ("shutdown" if stop == "SIGTERM" else "owner-died")


# -- a smoke pass on the other queue storages -----------------------------------------------------


@pytest.fixture
def start_worker(tmp_path):
    started: list[Worker] = []

    def start(name: str, db, env: dict[str, str]) -> Worker:
        worker = Worker(name, tmp_path, db, env={**QUEUED_ENV, **env})
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()


def _walk(http, base: str, workers: list[Worker]) -> list:
    """A writer run to its pause and its resume through ``base``, driven by one of ``workers``;
    the first leg's events."""
    with new_client() as client:
        first = run(client, base, "writer", {"input": {"topic": "bread"}}, "sse")
        assert first.types[0] == RUN_START and first.types[-1] == HUMAN_REQUIRED, first.types
        second = resume(client, base, first.last_crumb.data["checkpointId"], {"approved": True}, "sse")
        assert second.types[-1] == RUN_END and second.last_crumb.data["output"] == "Published.", second.types
        with open_stream(client, "POST", f"{base}/agents/stepper/run", "sse", body={"input": STEPPING}) as stepping:
            stepping.until(lambda e: e.type == "tool:result", "the first step")
            assert _owner_pid(http, base, stepping.run_id) in {worker.pid for worker in workers}
            assert http.post(f"{base}/runs/{stepping.run_id}/cancel").status_code == 200
            stepping.until(lambda e: e.type == AGENT_ERROR, "the cancel")
    assert_log(log_of(http, base, first.run_id, "sse"), first.run_id)
    return first.events


def test_a_postgres_store_queues_its_runs_in_its_own_database(http, postgres_url, start_server, start_worker):
    web = start_server("web-pg", db=postgres_url, env=QUEUED_ENV)
    worker = start_worker("w-pg", postgres_url, {})
    events = _walk(http, web.url, [worker])  # each run claimed and driven by the worker

    assert events[-1].type == HUMAN_REQUIRED
    with psycopg.connect(postgres_url) as conn:  # Huey's tables are in the store's database
        tables = {row[0] for row in conn.execute("SELECT table_name FROM information_schema.tables")}
    assert any(name.endswith("_task") for name in tables) and "runs" in tables, sorted(tables)
    assert not list(Path(web.home).rglob("*queue.db")), "a SQLite queue was made beside a Postgres store"


def test_with_redis_as_the_queue_and_the_live_channel_text_streams_live(
    http, start_server, start_worker, tmp_path, redis_url
):
    env = {**QUEUED_ENV, "BREAD_QUEUE_URL": redis_url, "REDIS_URL": redis_url}
    web = start_server("web-redis", db=tmp_path / "redis.db", env=env)
    worker = start_worker("w-redis", tmp_path / "redis.db", env)
    events = _walk(http, web.url, [worker])
    assert [e.type for e in events].count("text:delta") > 1  # deltas as the worker streamed them
    assert not (tmp_path / "redis-queue.db").exists()


def test_on_postgres_without_redis_text_reaches_the_web_tier_before_the_next_durable_crumb(
    http, postgres_url, start_server, start_worker
):
    web = start_server("web-pg-live", db=postgres_url, env=QUEUED_ENV)
    worker = start_worker("w-pg-live", postgres_url, {})
    # One step: "step 1 ", a second's pause, "done ", then the tool call, its next durable crumb.
    body, url = {"input": {"count": 1, "delayMs": 1000}}, f"{web.url}/agents/stepper/run"
    with new_client() as client, open_stream(client, "POST", url, "sse", body=body) as stepping:
        first = stepping.until(lambda e: e.type == "text:delta", "the first text")
        # Read from the log, the text would come whole with the tool call: "step 1 done ".
        assert first.data["delta"] == "step 1 ", stepping.types
        stepping.until(lambda e: e.type == RUN_END, "the run's end")
    assert text_of(stepping.events).startswith("step 1 done ")
    assert _owner_pid(http, web.url, stepping.run_id) in (worker.pid, None)
    assert "the Postgres store's notifications" in worker.log()
