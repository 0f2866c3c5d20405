"""What the log follower hears of a SQLite file: whether anything was committed since its last
look. SQLite has no notifications and cannot say which runs grew; ``PRAGMA data_version``, a
counter in the file's header that moves when any other connection commits, says whether anything
did, so a follower of thousands of idle runs (paused, waiting for a human) costs one pragma a
pass instead of a read of every run's log.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable


class AppendListener:
    """An empty set while nothing was committed since the last :meth:`wait`; None once something
    was (some log may have grown: the follower reads every log it follows, as a poll would).
    One connection of its own that never writes (its own commits would not move the counter)."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]):
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._version: int | None = None

    def wait(self, timeout: float) -> set[str] | None:
        time.sleep(timeout)  # cooperative under gevent, like the poll it replaces
        if self._conn is None:
            self._conn = self._connect()
        try:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.OperationalError:  # locked right now: cannot tell, so anything may have
            self._version = None
            return None
        unchanged = version == self._version
        self._version = version
        return set() if unchanged else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
