"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here. A C call that blocks
(SQLite's fsync) holds up every greenlet unless it runs in a thread of the OS, and a loop that
never blocks (a fast model's run, a response to a client that keeps up) holds them all until
it ends unless it gives way now and then (:class:`Pacer`).
"""

from __future__ import annotations

import _queue
import collections
import math
import os
import sys
import threading
import time
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
    inside blocks); reentrant because what runs inside may take it again on the same thread,
    which must not wait on itself: a subscriber's handler letting go of its subscription in a
    publish, or a finalizer a garbage collection runs there (a run dropped unfinished
    unregistering its cancel token). A tail dropped unclosed takes no lock (LogFollower.drop)."""
    if patched():
        from gevent.monkey import get_original

        return get_original("_thread", "RLock")()
    return threading.RLock()


def os_sleep() -> Callable[[float], None]:
    """``time.sleep`` as the OS has it, for a thread of the OS where gevent patched it."""
    if patched():
        from gevent.monkey import get_original

        return get_original("time", "sleep")
    return time.sleep


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


def wait_event(event: Any, seconds: float | None) -> bool:
    """``event.wait(seconds)``: True once ``event`` is set, False when ``seconds`` passed first.

    Under gevent, without the ``Timeout`` its ``Event.wait`` makes for every timed wait (an
    object, and an exception thrown into the greenlet when the time is up): a model that sleeps
    between deltas waits on its run's cancel token each time, and that cost three times the CPU
    of a ``sleep``. Here one timer of the event loop and one link of the event wake a waiter,
    whichever comes first, as ``gevent.sleep`` does."""
    if seconds is None or not patched() or event.is_set():
        return event.wait(seconds)
    from gevent import get_hub
    from gevent.hub import Waiter

    hub = get_hub()
    if getattr(event, "hub", None) not in (None, hub):  # linked in another thread's loop
        return event.wait(seconds)
    waiter = Waiter(hub)
    wake = waiter.switch
    timer = hub.loop.timer(max(seconds, 0.0))
    timer.start(wake, None)
    event.rawlink(wake)
    try:
        waiter.get()
    finally:
        timer.close()
        event.unlink(wake)
    return event.is_set()


def call_later(seconds: float, fn: Callable[[], Any], spawn: bool = True) -> Callable[[], None]:
    """Call ``fn()`` ``seconds`` from now, unless the returned cancel is called first: in a
    thread (a greenlet) of its own, or with ``spawn=False`` in the event loop's own greenlet (a
    call that must not block, such as a socket's shutdown).

    Under gevent a timer of the event loop that runs ``fn`` only if it fires: a patched
    ``threading.Timer`` is a greenlet made and started at once, waiting on an event (220 us of
    CPU against 2 us), which a run's time limit or a request body's deadline would pay for every
    run or request."""
    loop = _gevent_loop()
    if loop is None:
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        timer.start()
        return timer.cancel
    watcher = loop.timer(max(seconds, 0.0))
    if spawn:
        from gevent import spawn as spawn_greenlet

        watcher.start(spawn_greenlet, fn)
    else:
        watcher.start(fn)
    return watcher.close


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


class Alarm:
    """Sets ``event`` ``seconds`` after each :meth:`arm`, under gevent: one timer of the event loop
    re-armed in place (a C call), for a greenlet that waits on ``event`` over and over with the
    same timeout (a tail's heartbeat). ``event.wait(seconds)`` makes a gevent ``Timeout`` each
    time instead (an object, a watcher and a context manager: 3 us, a third of a stream's wake-up
    in its inbox). :meth:`disarm` after each wait: a stopped timer keeps neither the loop alive
    nor an event it no longer wakes. Outside gevent ``usable`` is False: wait with a timeout."""

    __slots__ = ("_set", "_timer", "seconds")

    def __init__(self, event: Any, seconds: float):
        loop = _gevent_loop()
        self.seconds = seconds
        self._set = event.set
        self._timer = loop.timer(seconds, seconds) if loop is not None else None

    @property
    def usable(self) -> bool:
        return self._timer is not None

    def arm(self) -> None:
        self._timer.again(self._set)  # (re)starts it from now, ``seconds`` ahead

    def disarm(self) -> None:
        self._timer.stop()


def _gevent_loop() -> Any:
    if not patched():
        return None
    from gevent import get_hub

    return get_hub().loop


class OSThread:
    """One thread of the OS that runs calls for the greenlets of this process, one at a time and
    in order, each while its caller waits: under gevent the event loop serves other greenlets
    meanwhile, as far as the call lets go of the GIL (SQLite does while it works). Lighter than
    the hub's thread pool per call: a queue in C, and one watcher of the loop for every answer.
    Outside gevent (or from a thread of its own hub) :meth:`call` runs the call in the caller's
    thread. Nothing the call does may use a gevent primitive (a patched lock, queue or sleep)."""

    def __init__(self) -> None:
        self._state: _Served | None = None
        self._stopped = False

    def call(self, fn: Callable[[], T], then: Callable[[], Any] | None = None) -> T:
        """``fn()`` in the thread; ``then()`` (when given) afterwards in the loop's thread, even
        if the caller was killed meanwhile: what ``fn`` borrowed from greenlets goes back there."""
        served = self._served()
        if served is None:
            try:
                return fn()
            finally:
                if then is not None:
                    then()
        return served.call(fn, then)

    def stop(self) -> None:
        """End the thread; later calls run in their caller's thread."""
        self._stopped = True
        if self._state is not None:
            self._state.jobs.put(None)
            self._state = None

    def _served(self) -> _Served | None:
        if self._stopped or not patched():
            return None
        from gevent import get_hub

        hub, state = get_hub(), self._state
        if state is None or state.pid != os.getpid():  # first use in this process (or a fork's)
            state = self._state = _Served(hub)
        return state if state.hub is hub else None  # another thread's hub: run it there


class _Served:
    def __init__(self, hub: Any):
        from gevent.monkey import get_original

        self.hub, self.pid = hub, os.getpid()
        self.jobs: Any = _queue.SimpleQueue()  # in C: gevent does not patch it
        self.done: collections.deque[list[Any]] = collections.deque()
        self.pending = 0
        self.answers = hub.loop.async_()
        self.answers.ref = False  # an idle thread keeps no loop alive
        self.answers.start(self._answer)
        start_thread = get_original("_thread", "start_new_thread")
        start_thread(_serve, (self.jobs, self.done, self.answers))

    def call(self, fn: Callable[[], T], then: Callable[[], Any] | None) -> T:
        from gevent.hub import Waiter

        waiter = Waiter(self.hub)
        self.pending += 1
        self.answers.ref = True  # while a caller waits, the loop must wait for the answer
        self.jobs.put([fn, then, waiter, False, None])
        ok, value = waiter.get()
        if not ok:
            raise value
        return value

    def _answer(self) -> None:
        # One answer a turn of the event loop, the next one on the next turn: calls that finish
        # while the loop is busy would otherwise resume all their callers here in a row, holding
        # every socket and timer of the worker (other runs' deltas) behind those callers' work
        # (each run's end: its publish, its response's end). What each finished call holds
        # (a pooled connection) is given back at once, though: then() is cheap.
        for i in range(len(self.done)):  # by index: the thread of the OS may append meanwhile
            _settle(self.done[i])
        if self.done:
            _, _, waiter, ok, value = self.done.popleft()
            self.pending -= 1
            waiter.switch((ok, value))
        if self.done:
            self.answers.send()
        elif not self.pending:
            self.answers.ref = False


def _settle(job: list[Any]) -> None:
    """Run a finished job's ``then()`` once; a failing one fails a call that succeeded."""
    then, job[1] = job[1], None
    if then is None:
        return
    try:
        then()
    except Exception as exc:  # the call's own failure wins; a failing then() is still said
        if job[3]:
            job[3], job[4] = False, exc


def _serve(jobs: Any, done: collections.deque[list[Any]], answers: Any) -> None:
    while (job := jobs.get()) is not None:
        try:
            job[4], job[3] = job[0](), True
        except BaseException as exc:
            job[4] = exc
        done.append(job)
        answers.send()
