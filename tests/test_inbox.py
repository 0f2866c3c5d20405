"""The tail's inbox: every item once, in order, in batches; a waiting consumer is woken."""

import json
import subprocess
import sys
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from bread_sync.tails.inbox import Inbox


@given(st.lists(st.lists(st.integers(), max_size=5), max_size=10))
def test_takes_return_every_item_once_in_order(puts_between_takes):
    inbox, taken = Inbox(), []
    for items in puts_between_takes:
        for item in items:
            inbox.put(item)
        taken += inbox.take(0)
    assert taken == [item for items in puts_between_takes for item in items]


@given(st.lists(st.integers(), max_size=20), st.integers(min_value=1, max_value=8))
def test_takes_of_at_most_some_items_return_them_all_once_in_order(items, most):
    inbox, taken = Inbox(), []
    for item in items:
        inbox.put(item)
    while batch := inbox.take(0, most):
        assert len(batch) <= most
        taken += batch
    assert taken == items


def test_a_take_with_nothing_queued_waits_its_timeout_and_returns_nothing():
    inbox = Inbox()
    started = time.monotonic()
    assert inbox.take(0.05) == []
    assert time.monotonic() - started >= 0.04


def test_a_put_from_another_thread_wakes_a_waiting_take():
    inbox, taking = Inbox(), threading.Event()
    result = []

    def consumer():
        taking.set()
        result.extend(inbox.take(10))

    thread = threading.Thread(target=consumer)
    thread.start()
    taking.wait(5)
    inbox.put("frame")
    thread.join(5)
    assert not thread.is_alive() and result == ["frame"]


def test_concurrent_producers_lose_no_item():
    inbox, per_producer, producers = Inbox(), 2000, 4
    threads = [
        threading.Thread(target=lambda p=p: [inbox.put((p, i)) for i in range(per_producer)]) for p in range(producers)
    ]
    for thread in threads:
        thread.start()
    taken = []
    deadline = time.monotonic() + 10
    while len(taken) < per_producer * producers and time.monotonic() < deadline:
        taken += inbox.take(0.1)
    for thread in threads:
        thread.join(5)
    assert len(taken) == per_producer * producers
    for p in range(producers):  # each producer's items arrive in its order
        assert [i for q, i in taken if q == p] == list(range(per_producer))


def test_a_take_woken_by_a_set_meant_for_an_item_already_taken_keeps_waiting():
    inbox = Inbox()
    inbox.put("first")
    assert inbox.take(0) == ["first"]
    inbox._ready.set()  # what a producer that appended before that take may still do
    started = time.monotonic()
    assert inbox.take(0.05) == []
    assert time.monotonic() - started >= 0.04


UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, time
import gevent
from bread_sync.tails.inbox import Inbox

inbox, out = Inbox(), {}
started = time.monotonic()
out["idle"] = inbox.take(0.05)  # the alarm rings: nothing came
out["idle_for"] = time.monotonic() - started
gevent.spawn_later(0.01, inbox.put, "frame")
out["woken"] = inbox.take(0.05)  # a put wakes it before the alarm rings
inbox._ready.clear()  # the put's own set
gevent.sleep(0.1)  # a disarmed alarm sets nothing while nobody waits
out["set_meanwhile"] = inbox._ready.is_set()
out["again"] = inbox.take(0.05)  # the same alarm, re-armed
print(json.dumps(out))
"""


def test_under_gevent_a_take_waits_its_timeout_on_the_alarm_and_a_put_wakes_it():
    done = subprocess.run([sys.executable, "-c", UNDER_GEVENT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["idle"] == [] and out["idle_for"] >= 0.04
    assert out["woken"] == ["frame"]
    assert out["set_meanwhile"] is False
    assert out["again"] == []
