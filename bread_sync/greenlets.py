"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here. A C call that blocks
(SQLite's fsync) holds up every greenlet unless it runs in a thread of the OS, and a loop that
never blocks (a fast model's run, a response to a client that keeps up) holds them all until
it ends unless it gives way now and then (:class:`Pacer`).
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any, TypeVar

T = TypeVar("T")

#: How long a loop that never blocks keeps the worker before it gives way (:class:`Pacer`): a
#: request that comes meanwhile waits a few of these, one per busy loop and turn of the hub.
SLICE_SECONDS = 0.002


def patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def os_rlock() -> Any:
    """A reentrant lock of the OS thread, even where gevent patched ``threading``: taken and
    released in C. Only for state no greenlet can switch away from while holding it (nothing
    inside blocks); reentrant because a garbage collection inside can run a finalizer that takes
    it again (an abandoned tail unsubscribing), which must not wait on itself."""
    if patched():
        from gevent.monkey import get_original

        return get_original("_thread", "RLock")()
    return threading.RLock()


def in_os_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of the OS under gevent, whose blocking C calls (a SQLite checkpoint's
    fsyncs) then hold up no greenlet while the caller waits for it; else ``fn()`` here."""
    if not patched():
        return fn()
    from gevent import get_hub

    return get_hub().threadpool.apply(fn)


def give_way() -> None:
    """Under gevent, let every other greenlet run before this one goes on: one pass of the event
    loop, where a timer that is due at once makes it poll for I/O without blocking, run what is
    ready, then come back here. ``sleep(0)`` is not enough: it only queues this greenlet behind
    the others ready to run, and gevent polls for I/O (or fires a timer) only after 50 such
    turns in a row, so two busy loops taking turns that way keep a new request waiting 50 turns
    (100 ms at 2 ms a turn). Threads of the OS need nothing: the interpreter hands the GIL to a
    waiting one every few milliseconds on its own (and ``time.sleep(0)`` costs 0.1 ms there)."""
    if not patched():
        return
    from gevent import get_hub

    hub = get_hub()
    with hub.loop.timer(0) as due_now:
        hub.wait(due_now)


class Pacer:
    """Under gevent, makes sure the event loop turns at least every SLICE_SECONDS while a loop
    that may never block runs: call :meth:`pace` on each of its turns. The usual call costs a
    clock read; once a slice is over it gives way, unless the event loop turned meanwhile (this
    greenlet was away, or another one gave way), which starts a new slice instead: under load a
    loop that keeps being switched out adds no turns of its own. Outside gevent it does nothing."""

    __slots__ = ("_due", "_loop", "_turned")

    def __init__(self) -> None:
        self._loop = _gevent_loop()
        self._due = perf_counter() + SLICE_SECONDS if self._loop is not None else math.inf
        self._turned = self._loop.now() if self._loop is not None else 0.0

    def pace(self) -> None:
        if perf_counter() < self._due:
            return
        if self._loop.now() == self._turned:  # the loop's clock moves only when the loop turns
            give_way()
        self._turned = self._loop.now()
        self._due = perf_counter() + SLICE_SECONDS


def _gevent_loop() -> Any:
    if not patched():
        return None
    from gevent import get_hub

    return get_hub().loop
