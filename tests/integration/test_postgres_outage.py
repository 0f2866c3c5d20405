"""Postgres restarted mid-run under two replicas (gunicorn, gevent) that share it without Redis:
what a run, its response and a tail on the other replica do, and what the log keeps.

Measured here, written down in docs/deployment.md: a restart shorter than the store's wait for a
connection (10 s) holds the run's writes until Postgres is back, and the run goes on; nothing
acknowledged is lost, no durable crumb is missing or twice in the log, the response or the tail.
"""

from __future__ import annotations

import signal
import time

import pytest

from .. import postgres_server
from ..waiting import wait_for
from . import servers
from .client import RUN_END, Tail, assert_log, log_of, passive_url
from .test_replicas import WIRE, count, non_text_seqs, start_stepper, wait_for_run

TOOL_RESULT = "tool:result"
#: How long Postgres stays down: ten of the run's steps.
OUTAGE_SECONDS = 1.0
CONFIG = "tests.replica_config:config"


@pytest.fixture
def restartable_postgres():
    """A Postgres of this test's own, which it stops and starts again (same port and data)."""
    reason = postgres_server.unavailable()
    if reason:
        pytest.skip(reason)
    server = postgres_server.PostgresServer().start()
    yield server
    server.remove()


@pytest.mark.parametrize("stop", ["fast", "crash"])
def test_postgres_restarted_mid_run_holds_the_writes_and_loses_nothing(http, restartable_postgres, tmp_path, stop):
    url = postgres_server.create_database(restartable_postgres.url(), "outage")
    group = [servers.Server(f"pg-{name}", tmp_path, url, "http-sse", env={"BREAD_CONFIG": CONFIG}) for name in "ab"]
    try:
        for server in group:
            server.start()
        a, b = group
        runner = start_stepper(a.url, count=30, delay_ms=100)
        wait_for_run(http, b.url, runner.run_id)
        tail = Tail(passive_url(b.url, runner.run_id), WIRE)
        tail.start()
        wait_for(lambda: count(tail.events, TOOL_RESULT) >= 3, 10, "three steps, on B")

        restartable_postgres.stop(signal.SIGINT if stop == "fast" else signal.SIGQUIT)
        stopped_at = runner.count(TOOL_RESULT)
        time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for something
        restartable_postgres.start()

        response = runner.finish(30)
        relayed = tail.finish(30)
        log = log_of(http, b.url, runner.run_id, WIRE)
        assert_log(log, runner.run_id)
        assert count(log, TOOL_RESULT) == 30 and log[-1].type == RUN_END
        assert stopped_at < 30, "the run ended before Postgres stopped: nothing was left to check"
        assert non_text_seqs(response.events) == non_text_seqs(relayed) == non_text_seqs(log)
    finally:
        for server in group:
            server.terminate()
        for server in group:
            server.stop()
