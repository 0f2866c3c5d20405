"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here. A C call that blocks
(SQLite's fsync) holds up every greenlet unless it runs in a thread of the OS, and a loop that
never blocks (a fast model's run, a response to a client that keeps up) holds them all until
it ends unless it gives way now and then (:class:`Pacer`).
"""

from __future__ import annotations

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
    """Gives way once SLICE_SECONDS have passed since it last did: call :meth:`pace` on each
    turn of a loop that may never block. The usual call costs a clock read."""

    __slots__ = ("_due",)

    def __init__(self) -> None:
        self._due = perf_counter() + SLICE_SECONDS

    def pace(self) -> None:
        if perf_counter() >= self._due:
            give_way()
            self._due = perf_counter() + SLICE_SECONDS
