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

from ... import greenlets

log = logging.getLogger("bread_sync")

SECONDS = 1.0
#: Where a connection's own checkpoint takes over (``PRAGMA wal_autocheckpoint``): ~40 MB of log.
BACKSTOP_PAGES = 10_000


class Checkpointer:
    def __init__(self, path: Path, seconds: float = SECONDS):
        self.path, self.seconds = path, seconds
        # The stop event of each process's loop, made in that process: a store built before a
        # fork (gunicorn's master) or before gevent patched ``threading`` hands its workers no
        # lock or event of the wrong kind, which under gevent would block the whole worker.
        self._loops: dict[int, threading.Event] = {}
        self._closed = False

    def ensure_running(self) -> None:
        """Start checkpointing in this process, once: a forked worker starts its own, with its
        own connection (a SQLite connection must not cross a fork)."""
        pid = os.getpid()
        if pid in self._loops or self._closed:
            return
        stop = threading.Event()
        if self._loops.setdefault(pid, stop) is not stop:  # atomic: one thread of this process wins
            return
        try:
            threading.Thread(target=self._loop, args=(stop,), name=f"bread-checkpoint {self.path}", daemon=True).start()
        except BaseException:
            del self._loops[pid]
            raise

    def stop(self) -> None:
        self._closed = True
        for stop in self._loops.values():
            stop.set()

    def _loop(self, stop: threading.Event) -> None:
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            while not stop.wait(self.seconds):
                try:
                    greenlets.in_os_thread(lambda: checkpoint(conn))
                except sqlite3.Error:  # the next one may well pass; meanwhile the backstop holds
                    log.exception("checkpointing %s failed", self.path)
        finally:
            conn.close()


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy what the log holds into the database file, as far as readers allow, without waiting
    for a lock (PASSIVE). With nothing new in the log it writes and syncs nothing."""
    with _checkpointing:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


#: Held while a checkpoint runs, and by a fork: a child must not start with SQLite's locks held
#: by a thread it does not have (``gunicorn --preload`` forks workers from a master whose store
#: has run, and its checkpointer with it).
_checkpointing = greenlets.os_rlock()
os.register_at_fork(
    before=_checkpointing.acquire, after_in_parent=_checkpointing.release, after_in_child=_checkpointing.release
)
