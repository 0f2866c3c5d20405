"""What users of a queue expect, across real processes (issue 27 items 4 and 5): a web server
and two ``bread-sync worker`` processes on one SQLite store. Delayed runs wait queued, listed in
queue order, and none is claimed before its time; a schedule ticked by both workers at each of two
ticks opens one ordinary run per tick; with the queue on a Redis that goes away for a while, a
run request is refused at once with ``QUEUE_UNAVAILABLE`` (no hang; 503 off the streaming
routes) and no run queued before is lost.
In-process, the same rules one message at a time: tests/test_queue_order.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from bread_sync.executors import huey as huey_executor
from bread_sync.schedules import tick_run_id

from ..waiting import wait_for
from .client import RUN_END, RUN_START, assert_log, failure_of, log_of, new_client, open_stream, run
from .schedule_config import EVERY_FIVE_MINUTES
from .servers import Server, Worker
from .tcp_proxy import TCPProxy
from .test_faults import FAULT_ENV

ENV = {**FAULT_ENV, "BREAD_CONFIG": "tests.integration.schedule_config:config", "BREAD_EXECUTOR": "huey"}
SHORT = {"count": 1, "delayMs": 10}
ENDED_SECONDS = 30.0


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    return tmp_path_factory.mktemp("queue-order")


@pytest.fixture(scope="module")
def web(place):
    server = Server("web", place, place / "shared.db", "http-sse", env=ENV)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def workers(web, place):
    started = [Worker(name, place, place / "shared.db", env=ENV) for name in ("w1", "w2")]
    try:
        yield [worker.start() for worker in started]
    finally:
        for worker in started:
            worker.stop()


def _opened(client, base: str, body: dict) -> str:
    """Open a stepper run and leave once its start crumb is in: its id."""
    with open_stream(client, "POST", f"{base}/agents/stepper/run", "sse", body=body) as stream:
        stream.until(lambda e: e.type == RUN_START, "the run's start")
        return stream.run_id


def _completed(http, base: str, run_ids: list[str]) -> bool:
    return all(http.get(f"{base}/runs/{run_id}").json()["status"] == "completed" for run_id in run_ids)


def test_delayed_runs_wait_queued_in_queue_order_and_none_is_claimed_before_its_time(http, web, workers):
    after = datetime.now(UTC) + timedelta(seconds=3)
    with new_client() as client:
        delayed = [_opened(client, web.url, {"input": SHORT, "after": after.isoformat()}) for _ in range(3)]
    queued = http.get(f"{web.url}/runs", params={"status": "queued"}).json()
    assert [record["id"] for record in queued] == delayed  # oldest first
    assert all(abs(datetime.fromisoformat(r["notBefore"]) - after) < timedelta(milliseconds=1) for r in queued)
    wait_for(lambda: _completed(http, web.url, delayed), ENDED_SECONDS, "the delayed runs' ends")
    for run_id in delayed:
        log = log_of(http, web.url, run_id, "sse")
        assert_log(log, run_id)
        assert log[-1].type == RUN_END
        assert datetime.fromisoformat(http.get(f"{web.url}/runs/{run_id}").json()["updatedAt"]) >= after


def test_a_schedule_ticked_by_two_workers_twice_opens_one_run_per_tick(http, web, workers, place):
    queue = huey_executor.executor(path=place / "shared-queue.db")
    ticks = [datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC), datetime(2026, 12, 4, 12, 5, 10, tzinfo=UTC)]
    for tick in ticks:
        for _ in workers:  # each worker's Huey enqueues the tick once
            queue.enqueue_tick(tick)
    expected = [tick_run_id(EVERY_FIVE_MINUTES, tick) for tick in ticks]
    wait_for(lambda: queue.huey.pending_count() == 0, ENDED_SECONDS, "the ticks taken")
    wait_for(lambda: _completed(http, web.url, expected), ENDED_SECONDS, "the scheduled runs' ends")
    scheduled = [r for r in http.get(f"{web.url}/runs", params={"agent": "echo"}).json() if r["id"] in expected]
    assert len(scheduled) == 2 and scheduled[0]["sessionId"] != scheduled[1]["sessionId"]
    for run_id in expected:
        log = log_of(http, web.url, run_id, "sse")
        assert_log(log, run_id)
        assert log[0].data["input"] == "tick tock" and log[-1].type == RUN_END


def test_the_queue_unreachable_for_a_while_refuses_runs_at_once_and_loses_none(http, place, redis_url):
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TCPProxy(redis_port)
    env = {**ENV, "BREAD_QUEUE_URL": f"redis://127.0.0.1:{proxy.port}/5"}
    home = place / "outage"
    server = Server("web-outage", home, home / "outage.db", "http-sse", env=env)
    worker = Worker("w-outage", home, home / "outage.db", env=env)
    try:
        server.start(), worker.start()
        with new_client() as client:
            assert run(client, server.url, "stepper", {"input": SHORT}, "sse").types[-1] == RUN_END
            after = datetime.now(UTC) + timedelta(seconds=2)
            delayed = _opened(client, server.url, {"input": SHORT, "after": after.isoformat()})
            proxy.close()
            began = time.monotonic()
            refused = run(client, server.url, "stepper", {"input": SHORT}, "sse")
            assert failure_of(refused, "sse")["code"] == "QUEUE_UNAVAILABLE"  # a run route's failure: HTTP 200
            listed = client.get(f"{server.url}/runs", params={"agent": "stepper"}).json()
            assert len(listed) == 2  # nothing opened for it
            assert time.monotonic() - began < 10  # an answer, not a hang
            proxy.reopen()
            assert run(client, server.url, "stepper", {"input": SHORT}, "sse").types[-1] == RUN_END
        wait_for(lambda: _completed(http, server.url, [delayed]), ENDED_SECONDS, "the delayed run's end")
    finally:
        worker.stop()
        server.stop()
        proxy.close()
