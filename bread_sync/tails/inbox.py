"""A tail's mailbox: producers put, one consumer takes everything queued at once.

It replaces a ``queue.Queue`` on the per-crumb path: a put is a list append and, only when the
consumer may be asleep, an event set; the consumer pays for a wait (a timer under gevent) once
per batch rather than once per item; under gevent a consumer that waits with the same timeout
each time (a tail's heartbeat) re-arms one timer rather than making one per wait. Works the same
with real threads and with greenlets.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..greenlets import Alarm


class Inbox:
    __slots__ = ("_alarm", "_items", "_ready")  # one per open stream: no dict each

    def __init__(self) -> None:
        # A list, not a deque: an empty one is 56 bytes where a deque is 600 (an idle stream's
        # memory), and a take moves its batch with one slice.
        self._items: list[Any] = []
        self._ready = threading.Event()
        self._alarm: Alarm | None = None

    def put(self, item: Any) -> None:
        self._items.append(item)
        # The consumer clears the event before its last look at the deque, so an item appended
        # while the event still reads set is seen by that look: no wake-up is ever lost.
        if not self._ready.is_set():
            self._ready.set()

    def take(self, timeout: float | None = None, most: int | None = None) -> list[Any]:
        """Everything queued (or its first ``most`` items), waiting up to ``timeout`` seconds for
        the first item; ``[]`` only once the timeout has passed with none."""
        items, ready = self._items, self._ready
        deadline = None if timeout is None else time.monotonic() + timeout
        first = True
        while not items:
            ready.clear()
            if items:
                break
            # A set left over from an item already taken wakes this early: look and wait again.
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            if first and timeout is not None:
                self._wait_out(timeout)
            else:  # forever, or the rare second wait of a take
                ready.wait(left)
            first = False
        # As many as are there now: producers that keep putting cannot hold the consumer here;
        # with ``most``, a backlog of a fast run's frames is not moved all in one go either.
        count = len(items) if most is None else min(len(items), most)
        batch = items[:count]
        del items[:count]  # a put meanwhile (a thread of the OS) appends past them
        return batch

    def _wait_out(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a put: on the inbox's alarm for that timeout where
        there is one (it may ring a little early, by the event loop's clock: the take then waits
        the rest the usual way)."""
        alarm = self._alarm
        if alarm is None or alarm.seconds != timeout:
            alarm = self._alarm = Alarm(self._ready, timeout)
        if not alarm.usable:
            self._ready.wait(timeout)
            return
        alarm.arm()
        try:
            self._ready.wait()
        finally:
            alarm.disarm()
