"""A tail's mailbox: producers put, one consumer takes everything queued at once.

It replaces a ``queue.Queue`` on the per-crumb path: a put is a deque append and, only when the
consumer may be asleep, an event set; the consumer pays for a wait (a timer under gevent) once
per batch rather than once per item. Works the same with real threads and with greenlets.
"""

from __future__ import annotations

import threading
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

    def take(self, timeout: float | None = None) -> list[Any]:
        """Everything queued, waiting up to ``timeout`` seconds for the first item; ``[]`` if
        none came."""
        items = self._items
        if not items:
            self._ready.clear()
            if not items:
                self._ready.wait(timeout)
        taken = []
        while items:
            taken.append(items.popleft())
        return taken
