"""The duplex transport contract, over every duplex implementation.

A transport may hand live frames over on another thread (Redis does, from its reader), so the
tests wait for deliveries with a deadline, and prove that nothing more arrives through a
witness subscription that the same delivery passes.
"""

import subprocess
import sys
import threading
import uuid

import pytest

from bread_sync.crumbs import AGENT_RUN_END, Frame
from bread_sync.transports import can_subscribe, stream

from ..waiting import delivered

DELIVERY_SECONDS = 5.0

#: name -> (factory(fixture, retain), frames past ``retain`` a run may keep: Redis trims whole nodes).
DUPLEX = {
    "stream": (lambda fixture, retain: stream.transport(buffer_size=retain), 0),
    "redis": (lambda fixture, retain: _redis().transport(url=fixture("redis_url"), maxlen=retain), 100),
    "postgres": (lambda fixture, retain: _PostgresPair(fixture("postgres_url"), retain), 0),
}


def _redis():
    from bread_sync.transports import redis

    return redis


class _PostgresPair:
    """Two Postgres transports as two processes would have them: one publishes, the other
    subscribes, so every frame crosses LISTEN/NOTIFY. A subscription first waits until what was
    published is heard (``flush``), as a replay in Redis sees every XADD made before it."""

    capability = "duplex"

    def __init__(self, url, retain):
        from bread_sync.transports import postgres

        self.publisher = postgres.transport(url=url, buffer_size=retain)
        self.subscriber = postgres.transport(url=url, buffer_size=retain)
        assert self.subscriber.flush()  # listening, as a process is once it subscribed to any run
        self.publish = self.publisher.publish

    def subscribe(self, run_id, after_seq, handler):
        assert self.publisher.flush() and self.subscriber.flush()
        return self.subscriber.subscribe(run_id, after_seq, handler)

    def close(self):
        self.publisher.close()
        self.subscriber.close()


@pytest.fixture(params=sorted(DUPLEX))
def implementation(request):
    return request.param


@pytest.fixture
def make_transport(request, implementation):
    factory, _ = DUPLEX[implementation]
    made = []

    def make(retain=1024):
        transport = factory(request.getfixturevalue, retain)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        close = getattr(transport, "close", None)
        if close is not None:
            close()


@pytest.fixture
def r():
    """A run id of this test's own: a shared Redis or Postgres outlives every test."""
    return f"r-{uuid.uuid4().hex}"


def durable(run_id, seq):
    return Frame(run_id, seq, {"type": "tool:call", "runId": run_id, "seq_hint": seq})


def delta(run_id, watermark, text="x"):
    return Frame(run_id, watermark, {"type": "text:delta", "runId": run_id, "delta": text})


def keys(frames):
    return [(f.run_id, f.seq, f.type) for f in frames]


def test_it_is_duplex(make_transport):
    assert can_subscribe(make_transport())


def test_replay_gives_durables_after_and_deltas_at_the_watermark(make_transport, r):
    t = make_transport()
    frames = [
        durable(r, 1),
        delta(r, 1),
        durable(r, 2),
        delta(r, 2, "a"),
        delta(r, 2, "b"),
        durable(r, 4),
    ]
    for f in frames:
        t.publish(f)
    got = []
    t.subscribe(r, 2, got.append)
    assert keys(got) == [(r, 2, "text:delta"), (r, 2, "text:delta"), (r, 4, "tool:call")]


def test_live_frames_follow_the_replay_in_publish_order_per_run(make_transport, r):
    t = make_transport()
    other = f"other-{r}"
    t.publish(durable(r, 1))
    got = []
    sub = t.subscribe(r, 0, got.append)
    t.publish(durable(other, 1))
    t.publish(durable(r, 2))
    delivered(got, 2, DELIVERY_SECONDS)
    witness = []
    t.subscribe(r, 2, witness.append)
    sub.close()
    t.publish(durable(r, 3))
    delivered(witness, 1, DELIVERY_SECONDS)  # frame 3 was handed out: a closed subscription did not get it
    assert keys(got) == [(r, 1, "tool:call"), (r, 2, "tool:call")]
    assert keys(witness) == [(r, 3, "tool:call")]


def test_a_subscriber_joining_mid_stream_sees_every_seq_once_in_order(make_transport, r):
    t = make_transport(retain=10_000)
    total, quarter, joined, got = 2_000, threading.Event(), threading.Event(), []

    def publish_all():
        for seq in range(1, total + 1):
            t.publish(durable(r, seq))
            if seq == total // 4:
                quarter.set()
            if seq == total // 2:
                joined.wait(5)

    publisher = threading.Thread(target=publish_all)
    publisher.start()
    assert quarter.wait(5)
    t.subscribe(r, 0, got.append)
    joined.set()
    publisher.join(10)
    delivered(got, total, DELIVERY_SECONDS)
    assert [f.seq for f in got] == list(range(1, total + 1))


def test_retention_is_bounded_per_run(make_transport, implementation, r):
    retain, slack = 5, DUPLEX[implementation][1]
    t = make_transport(retain=retain)
    for seq in range(1, 301):
        t.publish(durable(r, seq))
    got = []
    t.subscribe(r, 0, got.append)
    seqs = [f.seq for f in got]
    assert retain <= len(seqs) <= retain + slack
    assert seqs == list(range(301 - len(seqs), 301))


def test_retention_is_bounded_in_runs_but_spares_runs_with_subscribers(implementation):
    if implementation != "stream":
        pytest.skip("Redis bounds its runs in time; Postgres keeps them in an embedded stream, tested here")
    t = stream.transport(max_runs=3)
    watched = []
    t.subscribe("watched", 0, watched.append)
    for n in range(10):
        t.publish(durable(f"r{n}", 1))
    t.publish(durable("watched", 1))
    late = []
    t.subscribe("r0", 0, late.append)
    assert late == []  # evicted
    assert [f.seq for f in watched] == [1]


def test_retention_is_bounded_in_frames_across_runs_once_they_end(implementation):
    if implementation != "stream":
        pytest.skip("Redis bounds its runs in time; Postgres keeps them in an embedded stream, tested here")
    t = stream.transport(buffer_size=100, max_frames=250)
    for n in range(5):  # five runs of 100 frames each, the last one a terminal crumb
        for seq in range(1, 100):
            t.publish(durable(f"r{n}", seq))
        t.publish(Frame(f"r{n}", 100, {"type": AGENT_RUN_END, "runId": f"r{n}", "output": None}))
    kept = {f"r{n}": len(t.retained(f"r{n}")) for n in range(5)}
    assert kept == {"r0": 0, "r1": 0, "r2": 0, "r3": 100, "r4": 100}  # the least recently published went first


GEVENT_ORDER_CHECK = """
from gevent import monkey; monkey.patch_all()
import gevent
from bread_sync.crumbs import Frame
from bread_sync.transports import stream

t = stream.transport()
native = type(monkey.get_original("_thread", "RLock")())
assert type(t._lock) is native, t._lock  # not gevent's patched lock, a cost on every publish
got = {n: [] for n in range(20)}

def publisher():
    for seq in range(1, 201):
        t.publish(Frame("r", seq, {"type": "tool:call", "runId": "r"}))
        if seq % 10 == 0:
            gevent.sleep(0)

def subscriber(n):
    gevent.sleep(0.001 * n)
    t.subscribe("r", 0, got[n].append)

gevent.joinall([gevent.spawn(publisher), *[gevent.spawn(subscriber, n) for n in range(20)]])
for frames in got.values():
    assert [f.seq for f in frames] == list(range(1, 201)), [f.seq for f in frames][:5]
print("ok")
"""


def test_under_gevent_the_embedded_transport_takes_an_os_lock_and_keeps_each_subscriber_in_order(implementation):
    if implementation != "stream":
        pytest.skip("the lock choice is the embedded transport's")
    done = subprocess.run([sys.executable, "-c", GEVENT_ORDER_CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_without_gevent_the_embedded_transport_locks_its_state(implementation):
    if implementation != "stream":
        pytest.skip("the lock choice is the embedded transport's")
    assert type(stream.transport()._lock) is type(threading.RLock())


GEVENT_REENTRY_CHECK = """
from gevent import monkey; monkey.patch_all()
from bread_sync.crumbs import Frame
from bread_sync.transports import stream

t = stream.transport()
got = []
subscription = None

def handler(frame):
    # A subscriber that lets go of its subscription from its handler, inside the publish:
    # it takes the transport's lock again on the same OS thread.
    got.append(frame.seq)
    subscription.close()

subscription = t.subscribe("r", 0, handler)
t.publish(Frame("r", 1, {"type": "tool:call", "runId": "r"}))
t.publish(Frame("r", 2, {"type": "tool:call", "runId": "r"}))
print(got)
"""


def test_under_gevent_a_subscriber_let_go_inside_a_publish_does_not_hang_the_worker(implementation):
    if implementation != "stream":
        pytest.skip("the lock choice is the embedded transport's")
    done = subprocess.run([sys.executable, "-c", GEVENT_REENTRY_CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[1]", done.stderr[-2000:]
