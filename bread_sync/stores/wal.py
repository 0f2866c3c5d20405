"""Write-ahead log checkpoints off the path of a commit.

By default SQLite copies its write-ahead log back into the database file whenever the log
passes 1,000 pages, inside the commit that crosses the mark: that commit copies the pages and
waits for two fsyncs (10 to 25 ms on our 2-core VM), and under gevent it holds up every
greenlet of the worker meanwhile (a SQLite call does not yield). The store's connections leave
checkpoints to a :class:`Checkpointer` instead, which runs one every ``seconds`` in a thread
of the OS (under gevent, the hub's thread pool), so a request's commit only appends to the log.
Past ``BACKSTOP_PAGES`` a commit still checkpoints itself, should the checkpointer fall behind
or fail: the log stays bounded either way.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

from .. import greenlets

log = logging.getLogger("bread_sync")

SECONDS = 1.0
#: Where a connection's own checkpoint takes over (``PRAGMA wal_autocheckpoint``): ~40 MB of log.
BACKSTOP_PAGES = 10_000


class Checkpointer:
    def __init__(self, path: Path, seconds: float = SECONDS):
        self.path, self.seconds = path, seconds
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._pid: int | None = None

    def ensure_running(self) -> None:
        """Start checkpointing in this process, once: a forked worker starts its own, with its
        own connection (a SQLite connection must not cross a fork)."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid() and not self._stopped.is_set():
                name = f"bread-checkpoint {self.path}"
                threading.Thread(target=self._loop, name=name, daemon=True).start()
                self._pid = os.getpid()

    def stop(self) -> None:
        self._stopped.set()

    def _loop(self) -> None:
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            while not self._stopped.wait(self.seconds):
                try:
                    greenlets.in_os_thread(lambda: checkpoint(conn))
                except sqlite3.Error:  # the next one may well pass; meanwhile the backstop holds
                    log.exception("checkpointing %s failed", self.path)
        finally:
            conn.close()


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy what the log holds into the database file, as far as readers allow, without waiting
    for a lock (PASSIVE). With nothing new in the log it writes and syncs nothing."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
