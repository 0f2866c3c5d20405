"""The Redis transport on a real Redis: what it writes, one reader per process, the cancel
channel, degradation while Redis is down, and how the environment turns it on."""

from __future__ import annotations

import sys
import threading
import time
import uuid

import pytest

from bread_sync import BreadError
from bread_sync.config import apply_environment
from bread_sync.crumbs import TEXT_DELTA, Frame
from bread_sync.demo import config as demo_config
from bread_sync.errors import RUN_CANCELLED
from bread_sync.loading import resolve
from bread_sync.stores import memory
from bread_sync.transports import TRANSPORTS, cancel_channel, is_healthy
from bread_sync.transports import redis as redis_transport
from bread_sync.transports.http import HTTPTransport
from bread_sync.wire.frames import encode_frame

from . import replica_config
from .waiting import wait_for

DEADLINE = 5.0


def new_run_id(label="run"):
    return f"{label}-{uuid.uuid4().hex}"


def durable(run_id, seq, kind="tool:call"):
    return Frame(run_id, seq, {"type": kind, "runId": run_id})


@pytest.fixture
def raw(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def reader_threads():
    return [t for t in threading.enumerate() if t.name == "bread-redis-reader"]


# -- what it writes ------------------------------------------------------------------------------


def test_a_frame_is_one_stream_entry_holding_the_crumb_frame_json(make_redis_transport, raw):
    t = make_redis_transport()
    run_id = new_run_id()
    frame = Frame(run_id, 3, {"type": "tool:call", "runId": run_id, "input": {"ü": [1, 2]}})
    t.publish(frame)
    [(_, fields)] = raw.xrange(f"bread:run:{{{run_id}}}")
    assert fields == {"frame": encode_frame(frame)}


def test_an_unfinished_run_stream_expires_when_idle_and_a_finished_one_soon(make_redis_transport, raw):
    t = make_redis_transport(retention=30, idle_retention=3600)
    run_id = new_run_id()
    key = redis_transport.RUN_KEY % run_id
    t.publish(durable(run_id, 1))
    assert 3500 < raw.ttl(key) <= 3600
    t.publish(Frame(run_id, 2, {"type": "agent:error", "runId": run_id, "error": BreadError(RUN_CANCELLED, "x")}))
    assert 0 < raw.ttl(key) <= 30


def test_errors_travel_flat_and_come_back_live(make_redis_transport):
    t = make_redis_transport()
    run_id = new_run_id()
    t.publish(Frame(run_id, 1, {"type": "agent:error", "runId": run_id, "error": BreadError(RUN_CANCELLED, "stop")}))
    got = []
    t.subscribe(run_id, 0, got.append)
    error = got[0].crumb["error"]
    assert isinstance(error, BreadError) and (error.code, error.message) == (RUN_CANCELLED, "stop")


# -- one reader per process ----------------------------------------------------------------------


def test_many_subscriptions_share_one_reader_thread_and_connection(make_redis_transport, raw):
    t = make_redis_transport()
    runs = [new_run_id("shared") for _ in range(60)]
    inboxes = {run_id: [] for run_id in runs}
    subscribers = [threading.Thread(target=t.subscribe, args=(r, 0, inboxes[r].append)) for r in runs]
    for thread in subscribers:
        thread.start()
    for thread in subscribers:
        thread.join(DEADLINE)
    for run_id in runs:
        t.publish(durable(run_id, 1))
    wait_for(lambda: all(inboxes.values()), DEADLINE, what="every subscriber's frame")
    assert all(len(inbox) == 1 for inbox in inboxes.values())

    names = [client["name"] for client in raw.client_list()]
    assert names.count(f"{t.name}-reader") == 1
    assert 1 <= names.count(t.name) <= redis_transport.POOL_SIZE
    assert len(reader_threads()) == 1


def test_the_reader_stops_when_nothing_is_left_to_read(make_redis_transport):
    t = make_redis_transport()
    subscription = t.subscribe(new_run_id(), 0, lambda frame: None)
    stop_hearing = t.on_cancel(lambda run_id: None)
    assert len(reader_threads()) == 1
    subscription.close()
    stop_hearing()
    t.subscribe(new_run_id(), 0, lambda frame: None).close()  # wakes the reader: it finds nothing to do
    wait_for(lambda: not reader_threads(), DEADLINE, what="the reader to stop")


def test_a_failing_handler_does_not_stop_the_others(make_redis_transport):
    t = make_redis_transport()
    run_id = new_run_id()

    def broken(frame):
        raise RuntimeError("boom")

    got = []
    t.subscribe(run_id, 0, broken)
    t.subscribe(run_id, 0, got.append)
    t.publish(durable(run_id, 1))
    t.publish(durable(run_id, 2))
    wait_for(lambda: len(got) == 2, DEADLINE, what="both frames")


# -- the cancel channel ---------------------------------------------------------------------------


def test_a_cancel_request_reaches_every_listening_process(make_redis_transport):
    first, second, sender = make_redis_transport(), make_redis_transport(), make_redis_transport()
    heard_first, heard_second = [], []
    first.on_cancel(heard_first.append)
    stop_second = second.on_cancel(heard_second.append)
    assert sender.request_cancel("run-a")
    wait_for(lambda: heard_first and heard_second, DEADLINE, what="both listeners")
    stop_second()
    assert sender.request_cancel("run-b")
    wait_for(lambda: len(heard_first) == 2, DEADLINE, what="the second cancel")
    assert heard_first == ["run-a", "run-b"] and heard_second == ["run-a"]


def test_cancels_sent_before_a_process_listened_are_not_replayed(make_redis_transport):
    sender, late = make_redis_transport(), make_redis_transport()
    assert sender.request_cancel("old-run")
    heard = []
    late.on_cancel(heard.append)
    assert sender.request_cancel("new-run")
    wait_for(lambda: heard, DEADLINE, what="the new cancel")
    assert heard == ["new-run"]


def test_an_owner_cancels_its_run_when_the_channel_says_so(make_bread, make_redis_transport):
    # The store is polled only every minute here: only the channel can stop the run quickly.
    owner = make_bread(transport=make_redis_transport(), cancel_poll_seconds=60, lease_seconds=600)
    run_id = new_run_id()
    run = owner.run("slow", {"count": 5, "delayMs": 30_000}, run_id=run_id)
    crumbs = [next(run), next(run)]  # started, first tick; the second tick waits 30 s
    driver = threading.Thread(target=lambda: crumbs.extend(run))
    driver.start()
    started = time.monotonic()
    assert make_redis_transport().request_cancel(run_id)
    driver.join(DEADLINE)
    assert not driver.is_alive() and time.monotonic() - started < 2
    assert crumbs[-1]["error"].code == RUN_CANCELLED


def test_bread_cancel_of_a_run_owned_elsewhere_records_it_and_sends_it(make_bread, make_redis_transport):
    store = memory.store()
    listener = make_redis_transport()
    heard = []
    listener.on_cancel(heard.append)
    sender = make_bread(store=store, transport=make_redis_transport())
    run_id = new_run_id()
    record = {
        "id": run_id, "agentId": "slow", "sessionId": "s", "status": "running", "checkpointId": None,
        "owner": "another-host:1:abc", "leaseUntil": time.time() + 60, "cancelRequested": False,
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
    }  # fmt: skip
    store.create_run(record)
    assert sender.cancel(run_id)
    assert store.get_run(run_id)["cancelRequested"]  # the fallback, should the channel be down
    wait_for(lambda: heard == [run_id], DEADLINE, what="the cancel on the channel")


def test_the_helpers_find_the_channel_inside_an_http_transport(make_redis_transport, bread):
    t = make_redis_transport()
    assert cancel_channel(HTTPTransport(None, pubsub=t)) is t
    assert cancel_channel(t) is t
    assert cancel_channel(bread.transport) is None  # the embedded stream has none
    assert is_healthy(bread.transport)


# -- degradation ----------------------------------------------------------------------------------


def test_publishing_while_redis_is_down_does_not_block_and_fan_out_resumes(make_redis_transport, redis_server):
    t = make_redis_transport(url=redis_server.url)
    run_id = new_run_id()
    got = []
    t.subscribe(run_id, 0, got.append)
    t.publish(durable(run_id, 1))
    wait_for(lambda: got, DEADLINE, what="the first frame")
    assert t.healthy

    redis_server.stop()
    slowest = 0.0
    for seq in range(2, 42):
        began = time.monotonic()
        t.publish(durable(run_id, seq))
        slowest = max(slowest, time.monotonic() - began)
    assert slowest < redis_transport.SOCKET_TIMEOUT_SECONDS + 0.25
    assert not t.healthy

    redis_server.start()
    seq = 100

    def delivered_after_recovery():
        nonlocal seq
        seq += 1
        t.publish(durable(run_id, seq))
        return any(frame.seq > 100 for frame in got)

    wait_for(delivered_after_recovery, 3 * redis_transport.RETRY_SECONDS + DEADLINE, what="fan-out")
    assert t.healthy
    assert got[0].seq == 1 and all(frame.seq > 100 for frame in got[1:])


def test_a_tail_of_a_local_run_reads_the_store_while_redis_is_down(make_bread, make_redis_transport, redis_server):
    t = make_redis_transport(url=redis_server.url)
    bread = make_bread(replica_config.config(), transport=t)
    redis_server.stop()
    run_id = new_run_id()
    run = bread.run("stepper", {"count": 20, "delayMs": 100}, run_id=run_id)
    own = bread.tail(run_id, 0, replay=False)  # what the run route does, before the first crumb
    driver = threading.Thread(target=lambda: list(run))
    driver.start()
    frames = []
    collector = threading.Thread(target=lambda: frames.extend(own))
    collector.start()
    # Durable progress reaches the tail while the run still executes here, from the store.
    wait_for(lambda: sum(f.type == "tool:result" for f in list(frames)) >= 2, DEADLINE, what="two steps")
    assert driver.is_alive() and not is_healthy(bread.transport)
    collector.join(DEADLINE)
    driver.join(DEADLINE)
    assert not collector.is_alive(), "the tail never ended"
    log = bread.store.get_crumbs(run_id)
    assert [f.seq for f in frames if f.type != TEXT_DELTA] == [f.seq for f in log if f.type != TEXT_DELTA]
    assert "".join(f.crumb["delta"] for f in frames if f.type == TEXT_DELTA) == "".join(
        f.crumb["delta"] for f in log if f.type == TEXT_DELTA
    )


# -- configuration --------------------------------------------------------------------------------


def test_redis_url_wraps_the_http_transport_in_redis_fan_out(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    transport = apply_environment(demo_config()).transport
    assert isinstance(transport, HTTPTransport) and transport.wire.name == "ndjson"
    assert isinstance(transport.pubsub, redis_transport.RedisTransport)
    assert transport.pubsub.url == "redis://127.0.0.1:1/0"
    transport.pubsub.close()

    monkeypatch.setenv("BREAD_TRANSPORT", "http-sse")
    transport = apply_environment(demo_config()).transport
    assert transport.wire.name == "sse" and isinstance(transport.pubsub, redis_transport.RedisTransport)
    transport.pubsub.close()

    monkeypatch.setenv("BREAD_TRANSPORT", "stdout")
    with pytest.raises(ValueError, match="REDIS_URL"):
        apply_environment(demo_config())


def test_without_redis_url_nothing_changes():
    assert apply_environment(demo_config()).transport is None


def test_a_missing_redis_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r'pip install "bread-sync\[redis\]"'):
        resolve("redis", TRANSPORTS, "transport")
