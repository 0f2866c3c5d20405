"""A tail's mailbox: producers put, one consumer takes everything queued at once.

It replaces a ``queue.Queue`` on the per-crumb path: a put is a list append and, only when the
consumer may be asleep, an event set; the consumer pays for a wait (a timer under gevent) once
per batch rather than once per item; under gevent a consumer that waits with the same timeout
each time (a tail's heartbeat) re-arms one timer rather than making one per wait. Works the same
with real threads and with greenlets.

A stream's inbox is bounded: a client that stops reading stops its writer, and a run goes on
putting. Past its bound the inbox falls behind: it takes nothing more, its consumer finds
:data:`BEHIND` after what it holds, and the client's connection, when given, is shut, as a
writer blocked on it would never come back to take. The client catches up from the log.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

from ..greenlets import Alarm

#: What an inbox that fell behind holds last: its consumer ends there.
BEHIND = object()
#: ``_most`` once the inbox fell behind: every later put finds it full.
_FELL_BEHIND = -1


class Inbox:
    """``connection``: the socket of the client it feeds, shut when it falls behind; no bound
    until :meth:`bound`."""

    # One per open stream: slots, not a dict each.
    __slots__ = ("_alarm", "_connection", "_items", "_most", "_ready")

    def __init__(self, connection: socket.socket | None = None) -> None:
        # A list, not a deque: an empty one is 56 bytes where a deque is 600 (an idle stream's
        # memory), and a take moves its batch with one slice.
        self._items: list[Any] = []
        self._ready = threading.Event()
        self._alarm: Alarm | None = None
        self._most = sys.maxsize
        self._connection = connection

    def bound(self, most: int) -> None:
        """Hold at most ``most`` items more than it holds now (a reconnect's replay of what the
        transport keeps of its run is not counted: a bound below it would cut every reconnect)."""
        self._most = len(self._items) + most

    def put(self, item: Any) -> None:
        items = self._items
        if len(items) >= self._most:  # the one look a put pays for the bound
            self._fall_behind()
            return
        items.append(item)
        # The consumer clears the event before its last look at the deque, so an item appended
        # while the event still reads set is seen by that look: no wake-up is ever lost.
        if not self._ready.is_set():
            self._ready.set()

    def forget_connection(self) -> None:
        """The stream is over: its connection may serve the client's next request, never to be
        shut from here. A plain store, so a finalizer may call it."""
        self._connection = None

    def _fall_behind(self) -> None:
        """The first put past the bound: nothing more is taken, the consumer finds BEHIND after
        what it holds, and the connection is shut (a send blocked on it fails, so its writer
        ends its response). Every later put comes here and does nothing; none blocks."""
        if self._most == _FELL_BEHIND:
            return
        self._most = _FELL_BEHIND
        self._items.append(BEHIND)
        self._ready.set()
        connection, self._connection = self._connection, None
        if connection is not None:
            _shut(connection)

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


def _shut(connection: socket.socket) -> None:
    """Shut both ways the connection ``connection`` is a socket of, through a duplicate of it:
    gevent's own ``shutdown`` cancels the writer's wait with EBADF, which gunicorn logs as an
    error; shut underneath, the writer wakes to a send that fails with EPIPE, which gunicorn
    takes for a client gone. Either way the writer's response ends, and its connection closes."""
    try:
        with socket.socket(fileno=os.dup(connection.fileno())) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the client is gone already
