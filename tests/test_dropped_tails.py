"""A tail dropped unclosed: its finalizer runs wherever a garbage collection happens, inside a
locked section of the log follower or of a transport too, so it takes no lock; what it held
(its watch, its subscription) is still let go, soon after."""

from __future__ import annotations

import gc
import logging

import pytest

from bread_sync.server.lifecycle import Lifecycle
from bread_sync.server.runner import Runner
from bread_sync.transports import stream

from .dropping import outcome_of
from .waiting import wait_for

#: A bound on the wait for the worker's pass, not its pace (it passes every 0.05 s here).
LET_GO_WITHIN_SECONDS = 10

#: Drops a following tail inside the lock named, in a thread (a greenlet under gevent): in a cycle
#: that a collection made there frees ("collected"), or its last reference let go there
#: ("released"); then waits for the follower and the transport to let go of it. In a process of
#: its own: a finalizer that hangs holds that lock, and the garbage collector's, for good.
DROP = """
import sys
if sys.argv[1] == "gevent":
    from gevent import monkey; monkey.patch_all()
import gc, json, os, time
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.transports import redis, stream
from tests.dropping import drop_inside

_, _, batched, where, how, url = sys.argv
transport = stream.transport() if where == "follower" else redis.transport(url=url)
bread = create_bread(config().model_copy(update={"store": "memory", "transport": transport}))
bread.follower.interval = 0.01
run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
gc.disable()  # no collection but the test's
frames = bread.tail(run_id, heartbeat=0.05, batched=batched == "batched")
while next(frames) is not None:  # the replay, up to the pause, then a heartbeat: watched
    pass
held = [frames]
del frames
lock = bread.follower._lock if where == "follower" else transport._reader._lock
dropped = drop_inside(lock, how, held)

def subscribed():
    return bool(transport._runs[run_id].handlers if where == "follower" else transport._reader._subscriptions)

dropped.wait(5)
deadline = time.monotonic() + 5
while time.monotonic() < deadline and (run_id in bread.follower._watching or subscribed()):
    time.sleep(0.005)
outcome = {"dropped": dropped.is_set(), "watched": run_id in bread.follower._watching, "subscribed": subscribed()}
print(json.dumps(outcome), flush=True)
os._exit(0)  # a finalizer that hung holds locks an orderly exit could wait on
"""

CASES = [
    ("threads", "batched", "follower", "collected"),
    ("threads", "one-by-one", "follower", "collected"),
    ("threads", "one-by-one", "follower", "released"),
    ("gevent", "batched", "follower", "collected"),
    ("gevent", "one-by-one", "follower", "released"),
    ("threads", "batched", "redis", "collected"),
    ("gevent", "batched", "redis", "collected"),
]


@pytest.mark.parametrize(("threads", "batched", "where", "how"), CASES, ids=["-".join(case) for case in CASES])
def test_a_tail_dropped_unclosed_inside_a_lock_it_held_takes_none_and_is_still_let_go(
    request, threads, batched, where, how
):
    url = request.getfixturevalue("redis_url") if where == "redis" else ""
    outcome = outcome_of(DROP, threads, batched, where, how, url)
    assert outcome["dropped"], "the finalizer waited on a lock its caller holds"
    assert outcome == {"dropped": True, "watched": False, "subscribed": False}, "the dropped tail was kept"


def dropped_unread(bread, run_id: str) -> None:
    """A tail of ``run_id`` subscribed, never read (so not watched: the follower's thread is not
    running for it), dropped in a cycle and collected."""
    was_enabled = gc.isenabled()
    gc.disable()  # the tail is collected here, below
    try:
        cycle = [bread.tail(run_id, heartbeat=0.05)]
        cycle.append(cycle)
        del cycle
        gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    assert len(bread.transport._runs[run_id].handlers) == 1  # its finalizer left it to be let go


def test_a_tail_dropped_before_it_followed_the_log_is_let_go_when_the_next_tail_opens(bread):
    run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
    dropped_unread(bread, run_id)
    bread.tail(run_id, heartbeat=0.05, batched=True).close()
    assert bread.transport._runs[run_id].handlers == ()


def test_a_tail_dropped_before_it_followed_the_log_is_let_go_by_the_workers_next_sweep(make_bread):
    """Where no tail opens after it, the worker's periodic pass lets go of its subscription."""
    bread = make_bread(sweep_seconds=0.05)
    run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
    dropped_unread(bread, run_id)
    life = Lifecycle(bread, Runner(max_runs=1, timeout=None), graceful_timeout=1.0)
    life.sweep_later()
    try:
        wait_for(lambda: bread.transport._runs[run_id].handlers == (), LET_GO_WITHIN_SECONDS, "its subscription let go")
    finally:
        life.stop(1.0)
    assert bread.transport._runs[run_id].handlers == ()  # and it stays let go


def test_a_tail_dropped_before_it_followed_the_log_is_let_go_when_its_bread_closes(bread):
    run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
    dropped_unread(bread, run_id)
    bread.close()
    assert bread.transport._runs[run_id].handlers == ()


def test_a_tail_closed_lets_go_at_once(bread):
    run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
    frames = bread.tail(run_id, heartbeat=0.05, batched=True)
    while next(frames) is not None:  # watched
        pass
    frames.close()
    assert run_id not in bread.follower._watching
    assert bread.transport._runs[run_id].handlers == ()


class _RefusingClose:
    def __init__(self, subscription):
        self._subscription = subscription

    def close(self):
        self._subscription.close()
        raise OSError("the transport failed to let go")


def test_a_dropped_tails_subscription_that_fails_to_close_is_said_and_stops_nothing(make_bread, caplog):
    """A transport of a third party whose subscription fails to close: the tail that opens next
    (or the follower's pass) that lets go of a dropped one goes on."""
    transport = stream.transport()
    subscribe = transport.subscribe
    transport.subscribe = lambda *args: _RefusingClose(subscribe(*args))
    bread = make_bread(transport=transport)
    run_id = bread.run("writer", {"topic": "bread"}, mode="sync").run_id
    bread.tail(run_id, heartbeat=0.05)  # dropped at once, never read
    gc.collect()  # its replay, not begun, holds it in a cycle
    transport.subscribe = subscribe
    logger = logging.getLogger("bread_sync")  # which says it itself, not through the root's
    logger.addHandler(caplog.handler)
    try:
        frames = bread.tail(run_id, heartbeat=0.05, batched=True)
    finally:
        logger.removeHandler(caplog.handler)
    assert "a tail dropped unclosed failed" in caplog.text
    assert next(frames) is not None  # its replay
    frames.close()
    assert transport._runs[run_id].handlers == ()
