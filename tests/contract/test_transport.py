"""The duplex transport contract, over every duplex implementation."""

import threading

import pytest

from bread_sync.crumbs import Frame
from bread_sync.transports import can_subscribe, stream

DUPLEX = {"stream": lambda **opts: stream.transport(**opts)}


@pytest.fixture(params=sorted(DUPLEX))
def make_transport(request):
    return DUPLEX[request.param]


def durable(run_id, seq):
    return Frame(run_id, seq, {"type": "tool:call", "runId": run_id, "seq_hint": seq})


def delta(run_id, watermark, text="x"):
    return Frame(run_id, watermark, {"type": "text:delta", "runId": run_id, "delta": text})


def keys(frames):
    return [(f.run_id, f.seq, f.type) for f in frames]


def test_it_is_duplex(make_transport):
    assert can_subscribe(make_transport())


def test_replay_gives_durables_after_and_deltas_at_the_watermark(make_transport):
    t = make_transport()
    frames = [
        durable("r", 1),
        delta("r", 1),
        durable("r", 2),
        delta("r", 2, "a"),
        delta("r", 2, "b"),
        durable("r", 4),
    ]
    for f in frames:
        t.publish(f)
    got = []
    t.subscribe("r", 2, got.append)
    assert keys(got) == [("r", 2, "text:delta"), ("r", 2, "text:delta"), ("r", 4, "tool:call")]


def test_live_frames_follow_the_replay_in_publish_order_per_run(make_transport):
    t = make_transport()
    t.publish(durable("r", 1))
    got = []
    sub = t.subscribe("r", 0, got.append)
    t.publish(durable("other", 1))
    t.publish(durable("r", 2))
    sub.close()
    t.publish(durable("r", 3))
    assert keys(got) == [("r", 1, "tool:call"), ("r", 2, "tool:call")]


def test_a_subscriber_joining_mid_stream_sees_every_seq_once_in_order(make_transport):
    t = make_transport(buffer_size=10_000)
    total, quarter, joined, got = 2_000, threading.Event(), threading.Event(), []

    def publish_all():
        for seq in range(1, total + 1):
            t.publish(durable("r", seq))
            if seq == total // 4:
                quarter.set()
            if seq == total // 2:
                joined.wait(5)

    publisher = threading.Thread(target=publish_all)
    publisher.start()
    assert quarter.wait(5)
    t.subscribe("r", 0, got.append)
    joined.set()
    publisher.join(10)
    assert [f.seq for f in got] == list(range(1, total + 1))


def test_retention_is_bounded_per_run(make_transport):
    t = make_transport(buffer_size=5)
    for seq in range(1, 21):
        t.publish(durable("r", seq))
    got = []
    t.subscribe("r", 0, got.append)
    assert [f.seq for f in got] == [16, 17, 18, 19, 20]


def test_retention_is_bounded_in_runs_but_spares_runs_with_subscribers(make_transport):
    t = make_transport(max_runs=3)
    watched = []
    t.subscribe("watched", 0, watched.append)
    for n in range(10):
        t.publish(durable(f"r{n}", 1))
    t.publish(durable("watched", 1))
    late = []
    t.subscribe("r0", 0, late.append)
    assert late == []  # evicted
    assert [f.seq for f in watched] == [1]
