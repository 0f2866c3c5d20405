"""The deferred clean-up that runs and tails dropped unclosed leave to a let go (bread_sync/deferred.py)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from functools import partial

from bread_sync.deferred import Deferred

#: A bound on the wait for a thread that defers inside a lock, not its pace.
DEFERRED_WITHIN_SECONDS = 5


def test_a_let_go_runs_each_piece_once_in_the_order_deferred():
    done = []
    deferred = Deferred("%s failed")
    for n in range(3):
        deferred.defer(partial(done.append, n), n)
    assert done == []  # deferring runs nothing
    deferred.let_go()
    deferred.let_go()
    assert done == [0, 1, 2]  # the second let go found nothing left to run


def test_a_piece_deferred_by_a_piece_runs_in_the_same_let_go():
    done = []
    deferred = Deferred("%s failed")
    deferred.defer(lambda: deferred.defer(partial(done.append, "second"), "second"), "first")
    deferred.let_go()
    assert done == ["second"]


class _Failing:
    def __call__(self):
        raise OSError("the transport failed to let go")


def test_a_failing_piece_is_said_with_its_subject_and_stops_neither_the_others_nor_the_caller(caplog):
    done = []
    deferred = Deferred("letting go of run %s failed")
    deferred.defer(partial(done.append, "before"), "r0")
    deferred.defer(_Failing(), "r1")
    deferred.defer(partial(done.append, "after"), "r2")
    with caplog.at_level(logging.ERROR, logger="bread_sync"):
        deferred.let_go()
    assert done == ["before", "after"]
    assert [record.getMessage() for record in caplog.records] == ["letting go of run r1 failed"]
    assert "the transport failed to let go" in caplog.text  # with its traceback


class _Finalized:
    """An object whose finalizer defers a clean-up that takes ``lock``."""

    def __init__(self, deferred: Deferred, lock: threading.Lock, done: list[str]):
        self.deferred, self.lock, self.done = deferred, lock, done

    def __del__(self):
        self.deferred.defer(self.clean_up, "the dropped object")

    def clean_up(self):
        with self.lock:
            self.done.append("cleaned up")


def test_a_finalizer_inside_the_lock_its_clean_up_takes_defers_it_and_a_let_go_runs_it():
    """A finalizer run where its last reference goes, inside a locked section of that thread,
    which its clean-up would wait on for good, were it run there. The thread is a daemon: were
    it to hang, the test would say so within the bound and move on."""
    deferred, lock, done = Deferred("%s failed"), threading.Lock(), []
    held = [_Finalized(deferred, lock, done)]
    dropped = threading.Event()

    def drop():
        with lock:
            held.clear()  # the finalizer runs here
        dropped.set()

    threading.Thread(target=drop, daemon=True).start()
    assert dropped.wait(DEFERRED_WITHIN_SECONDS), "the finalizer waited on the lock its thread holds"
    assert done == []
    deferred.let_go()
    assert done == ["cleaned up"]


class _TakenMeanwhile(deque):
    """What a look then a take would meet: another thread letting go too (a keeper's or a
    follower's pass, a run's or a tail's opening) takes the last piece between the two."""

    def __bool__(self):
        full = len(self) > 0
        self.clear()
        return full


def test_a_piece_another_let_go_took_meanwhile_is_no_failure():
    done = []
    deferred = Deferred("%s failed")
    deferred._pieces = taken = _TakenMeanwhile()
    deferred.defer(partial(done.append, "taken"), "taken")
    assert len(taken) == 1
    deferred.let_go()  # its look sees one, its take finds none
    assert len(taken) == 0 and done == []  # the other let go's to run
