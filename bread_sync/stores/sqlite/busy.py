"""Waiting for a SQLite file another process locked, without stalling a gevent worker.

SQLite's busy handler sleeps in C, which under gevent blocks every greenlet of the worker, so
the store (and Huey's SQLite queue, executors/sqlite_queue.py) connects with no busy timeout
and a statement refused with SQLITE_BUSY is tried again
here, between sleeps gevent can switch around. Past ``busy_seconds`` it fails with
``STORE_BUSY`` (503): the lock was held by another process (a write, a ``BEGIN EXCLUSIVE``, a
backup) for longer than a request should wait.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Self, TypeVar

from ... import greenlets
from ...errors import STORE_BUSY, BreadError

BUSY_TIMEOUT_SECONDS = 5.0
#: The pauses between attempts on a locked file: three short ones, then SQLite's own busy
#: handler's, then its longest. A store's write transaction holds the lock for 0.3 ms on average
#: (most under 1 ms), so SQLite's first pause of 1 ms mostly waited for nothing: two workers
#: draining short runs waited about half as long for each other's locks with these.
BUSY_PAUSES = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.025, 0.025, 0.05, 0.05, 0.1)
SQLITE_BUSY = 5
T = TypeVar("T")


class PatientConnection(sqlite3.Connection):
    """A connection whose statements, its cursors' included, wait for a locked file in Python
    (see the module's doc).

    A statement refused with SQLITE_BUSY changed nothing, so trying it again is safe: writes
    take the lock with their first statement (``BEGIN IMMEDIATE``, or an autocommit write)."""

    busy_seconds = BUSY_TIMEOUT_SECONDS
    #: The sleep between attempts; None: ``time.sleep``, gevent's where it patched it.
    os_sleep: Callable[[float], None] | None = None

    def cursor(self, factory: Any = None) -> sqlite3.Cursor:  # type: ignore[override]
        # Huey's storage runs its statements on cursors.
        return sqlite3.Connection.cursor(self, factory or PatientCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.patiently(partial(sqlite3.Connection.execute, self, sql, parameters))

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        rows = _replayable(seq_of_parameters)
        return self.patiently(partial(sqlite3.Connection.executemany, self, sql, rows))

    def patiently(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, tried again between pauses while the file is locked, for up to
        ``busy_seconds``; then ``STORE_BUSY``."""
        try:  # the first attempt costs no more than a plain connection's
            return attempt()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
        deadline = time.monotonic() + self.busy_seconds
        for pause in _pauses():
            if time.monotonic() + pause > deadline:
                raise BreadError(STORE_BUSY, "the store is locked by another process; retry later")
            (self.os_sleep or time.sleep)(pause)  # gevent's: the worker serves others meanwhile
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
        raise AssertionError("unreachable")


class PatientCursor(sqlite3.Cursor):
    """A cursor of a :class:`PatientConnection`, whose statements wait as the connection's do."""

    connection: PatientConnection

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        return self.connection.patiently(partial(sqlite3.Cursor.execute, self, sql, parameters))

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Self:
        rows = _replayable(seq_of_parameters)
        return self.connection.patiently(partial(sqlite3.Cursor.executemany, self, sql, rows))


def _replayable(seq_of_parameters: Any) -> Any:
    # A list, so that a refused attempt does not spend an iterator.
    return seq_of_parameters if isinstance(seq_of_parameters, list | tuple) else list(seq_of_parameters)


@contextmanager
def os_sleeping(conn: PatientConnection) -> Iterator[None]:
    """For work on ``conn`` in a thread of the OS under gevent (the store's writer): a locked
    file is waited for with the OS's sleep, as gevent's must not be called from such a thread."""
    conn.os_sleep = greenlets.os_sleep()
    try:
        yield
    finally:
        conn.os_sleep = None


def _pauses() -> Iterator[float]:
    yield from BUSY_PAUSES
    while True:
        yield BUSY_PAUSES[-1]


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (code & 0xFF) == SQLITE_BUSY if code is not None else "locked" in str(exc)
