"""The tail's inbox: every item once, in order, in batches; a waiting consumer is woken."""

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
