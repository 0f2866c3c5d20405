"""Queued runs in-process (the huey executor on Huey's memory storage, never consumed unless a
test says so): a cancel ends a queued run before it starts, a queued run holds its session, a
lost enqueue is submitted again by the sweep, a queued run cancelled and a run a worker cannot
drive end with their record marked in their end's transaction, a queued run is traced and
counted where a worker drives it, ``start``/``worker`` say when text waits for the next durable
crumb and ``worker`` when its metrics reach no scrape. Across real processes:
tests/integration/test_queued_runs.py."""

from __future__ import annotations

import time

import pytest

from bread_sync import crumbs as c
from bread_sync.config import Config, apply_environment
from bread_sync.demo import config as demo_config
from bread_sync.engine.queued import drive_queued
from bread_sync.errors import RUN_CANCELLED, SESSION_BUSY, BreadError
from bread_sync.executors import huey as huey_executor
from bread_sync.protocols.a2a.translator import RUN_STATES
from bread_sync.server.worker import live_text_note, metrics_note
from bread_sync.transports import http_chunked, redis

from .dying import Died, failing_at_the_end

DEADLINE = 10


@pytest.fixture
def queue():
    return huey_executor.executor()


@pytest.fixture
def bread(make_bread, queue):
    return make_bread(executor=queue)


def _queued(bread, agent: str = "echo", **options) -> str:
    run = bread.run(agent, "hello there", **options)
    run.drain()  # its opening; the rest is a worker's
    assert bread.store.get_run(run.run_id)["status"] == "queued"
    return run.run_id


def test_a_queued_run_cancelled_never_starts_and_ends_once_after_its_start(bread, queue):
    run_id = _queued(bread)
    assert bread.cancel(run_id)
    assert [frame.type for frame in bread.store.get_crumbs(run_id)] == [c.AGENT_RUN_START, c.AGENT_ERROR]
    assert bread.store.get_crumbs(run_id)[-1].crumb["error"]["code"] == RUN_CANCELLED
    assert bread.store.get_run(run_id)["status"] == "cancelled"
    queue.consumer(bread, workers=1, worker_type="thread")
    queue.huey.execute(queue.huey.dequeue())  # the message comes too late: nothing is driven
    assert len(bread.store.get_crumbs(run_id)) == 2
    assert not bread.cancel(run_id)


def test_a_queued_runs_cancel_is_never_recorded_without_its_end_and_a_sweep_finishes_it(make_bread, queue, monkeypatch):
    bread = make_bread(executor=queue, lease_seconds=0.3)
    run_id = _queued(bread)
    failing_at_the_end(bread.store, monkeypatch)
    with pytest.raises(Died):
        bread.cancel(run_id)
    monkeypatch.undo()
    record = bread.store.get_run(run_id)
    assert (record["status"], record["cancelRequested"]) == ("running", True)  # claimed, its cancel recorded
    assert not drive_queued(bread, run_id)  # no worker takes it any more

    queue.consumer(bread, workers=1, worker_type="thread")  # a worker, whose sweeps end such runs
    deadline = time.monotonic() + DEADLINE
    while bread.sweep_interrupted() == 0:  # once the claim's lease lapses
        assert time.monotonic() < deadline, "no sweep ended the run"
        time.sleep(0.02)
    assert [frame.type for frame in bread.store.get_crumbs(run_id)] == [c.AGENT_RUN_START, c.AGENT_ERROR]
    assert bread.store.get_crumbs(run_id)[-1].crumb["error"]["code"] == RUN_CANCELLED
    assert bread.store.get_run(run_id)["status"] == "cancelled"


def test_a_queued_run_holds_its_session(bread):
    _queued(bread, session="ses_1")
    with pytest.raises(BreadError) as caught:
        bread.run("echo", "again", session="ses_1", session_policy="reject")
    assert caught.value.code == SESSION_BUSY


def test_a_run_queued_past_a_lease_is_submitted_again_by_the_sweep(make_bread, queue):
    bread = make_bread(executor=queue, lease_seconds=0.05)
    run_id = _queued(bread)
    queue.huey.flush()  # the enqueue lost
    deadline = time.monotonic() + DEADLINE
    while bread.sweep_interrupted() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert queue.huey.pending_count() == 1
    queue.consumer(bread, workers=1, worker_type="thread")
    queue.huey.execute(queue.huey.dequeue())
    assert bread.store.get_run(run_id)["status"] == "completed"
    assert [frame.type for frame in bread.store.get_crumbs(run_id)][-1] == c.AGENT_RUN_END


def test_a_queued_run_a_worker_cannot_drive_fails_with_its_record_marked_in_its_end(make_bread, queue, monkeypatch):
    web = make_bread(executor=queue)
    run_id = _queued(web)
    without_echo = [agent for agent in demo_config().agents if agent.id != "echo"]
    worker = make_bread(demo_config().model_copy(update={"agents": without_echo}), store=web.store, executor=queue)
    failing_at_the_end(web.store, monkeypatch)
    with pytest.raises(Died):
        drive_queued(worker, run_id)  # its agent is not configured there: it fails the run
    monkeypatch.undo()
    record = web.store.get_run(run_id)
    assert (record["status"], record["owner"]) == ("running", worker.owner)  # claimed, not recorded failed

    assert [frame.type for frame in web.store.get_crumbs(run_id)] == [c.AGENT_RUN_START]

    another = _queued(web)
    assert not drive_queued(worker, another)  # a worker that lives fails it: its end and record together
    assert [frame.type for frame in web.store.get_crumbs(another)] == [c.AGENT_RUN_START, c.AGENT_ERROR]
    assert (web.store.get_run(another)["status"], web.store.get_run(another)["owner"]) == ("failed", None)


def test_a2a_shows_a_queued_run_as_submitted():
    assert RUN_STATES["queued"] == "submitted"


def test_start_and_worker_say_when_text_waits_for_the_next_durable_crumb(make_bread):
    config = make_bread().config
    assert "next durable crumb" in live_text_note(config.model_copy(update={"executor": "huey"}))
    assert live_text_note(config) is None  # inline
    shared = http_chunked.transport(pubsub=redis.transport(url="redis://127.0.0.1:1/0"))
    assert live_text_note(config.model_copy(update={"executor": "huey", "transport": shared})).endswith("through redis")


def test_queued_runs_on_a_postgres_store_without_redis_take_its_notifications_as_live_channel(monkeypatch):
    from bread_sync.transports import postgres

    monkeypatch.setenv("BREAD_DB", "postgresql://bread@127.0.0.1:1/bread")
    monkeypatch.setenv("BREAD_EXECUTOR", "huey")
    config = apply_environment(Config())
    assert isinstance(config.transport.pubsub, postgres.PostgresTransport)
    assert "Postgres store's notifications" in live_text_note(config)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    assert isinstance(apply_environment(Config()).transport.pubsub, redis.RedisTransport)
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.setenv("BREAD_EXECUTOR", "inline")
    assert apply_environment(Config()).transport is None


def test_a_queued_run_is_traced_and_counted_where_a_worker_drives_it(make_bread, queue):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from bread_sync.config import ServerSettings
    from bread_sync.metrics import prometheus

    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread = make_bread(executor=queue, server=ServerSettings(metrics=True))
    bread.tracer = otel.tracer(spans)
    paused = {"agent": "writer", "status": "paused"}
    before = prometheus.metrics().registry.get_sample_value("bread_runs_finished_total", paused) or 0.0
    run_id = _queued(bread, "writer")
    queue.consumer(bread, workers=1, worker_type="thread")
    queue.huey.execute(queue.huey.dequeue())  # the worker's driving, to the writer's pause

    assert bread.store.get_run(run_id)["status"] == "paused"
    finished = exporter.get_finished_spans()
    runs = sorted((span for span in finished if span.name == "invoke_agent writer"), key=lambda span: span.start_time)
    queued, driven = runs  # the web tier's driving ends when it queues the run; the worker's is traced too
    assert [queued.attributes["bread.run.status"], driven.attributes["bread.run.status"]] == ["queued", "paused"]
    under = sorted((span for span in finished if span.parent == driven.context), key=lambda span: span.start_time)
    assert [span.name for span in under] == ["chat script", "execute_tool publish"]
    after = prometheus.metrics().registry.get_sample_value("bread_runs_finished_total", paused)
    assert after == before + 1


def test_a_worker_says_when_its_metrics_reach_no_scrape(make_bread, monkeypatch):
    config = make_bread().config
    metered = config.model_copy(update={"server": config.server.model_copy(update={"metrics": True})})
    for name in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
        monkeypatch.delenv(name, raising=False)
    assert metrics_note(metered) is not None
    assert metrics_note(config) is None  # metrics off
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/the/web/tiers/folder")
    assert metrics_note(metered) is None
