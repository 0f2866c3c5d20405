"""A tail's mailbox: producers put, one consumer takes everything queued at once.

It replaces a ``queue.Queue`` on the per-crumb path: a put is a deque append and, only when the
consumer may be asleep, an event set; the consumer pays for a wait (a timer under gevent) once
per batch rather than once per item. Works the same with real threads and with greenlets.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any


class Inbox:
    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._ready = threading.Event()

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
        while not items:
            ready.clear()
            if items:
                break
            # A set left over from an item already taken wakes this early: look and wait again.
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            ready.wait(left)
        # As many as are there now: producers that keep putting cannot hold the consumer here;
        # with ``most``, a backlog of a fast run's frames is not moved all in one go either.
        count = len(items) if most is None else min(len(items), most)
        return [items.popleft() for _ in range(count)]
