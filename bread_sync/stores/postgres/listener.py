"""Waking on appends: every append notifies the channel ``bread_crumbs`` with its run id (see
the append function in migrations.py), and a :class:`AppendListener` waits on that channel,
so a log follower in another process reads a run's log when it grew instead of polling it.

A notification is lost while no connection listens (before the first wait, while Postgres
restarts), so a wait that had to connect answers None: the caller cannot know what changed
meanwhile and reads every log it follows, once, as a poll would.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

log = logging.getLogger("bread_sync")

CHANNEL = "bread_crumbs"
#: After the first notification, how long a wait goes on gathering the ones right behind it,
#: so a busy run wakes its follower once per burst, not once per append.
GATHER_SECONDS = 0.005


class AppendListener:
    """The run ids appended to, by any process, since the last :meth:`wait`. One connection of
    its own (not the pool's), opened on the first wait: use it from one thread."""

    def __init__(self, url: str, connect_seconds: float):
        self.url, self.connect_seconds = url, connect_seconds
        self._conn: Any = None

    def wait(self, timeout: float) -> set[str] | None:
        """Wait up to ``timeout`` seconds for appends; the runs appended to (empty if none), or
        None when appends may have gone unheard (the listener had to connect)."""
        if self._conn is None:
            self._connect(timeout)
            return None
        try:
            heard = {n.payload for n in self._conn.notifies(timeout=timeout, stop_after=1)}
            if heard:
                heard.update(n.payload for n in self._conn.notifies(timeout=GATHER_SECONDS))
            return heard
        except psycopg.Error as exc:
            log.warning("the Postgres append listener lost its connection (%s): reconnecting", exc)
            self.close()
            return None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self, timeout: float) -> None:
        try:
            self._conn = connect(self.url, self.connect_seconds)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            self.close()
            time.sleep(timeout)  # Postgres is away: a caller polling meanwhile waits as long as it asked
        return None


def connect(url: str, connect_seconds: float) -> psycopg.Connection[Any]:
    """An autocommit connection to ``url``, waiting ``connect_seconds`` at most for Postgres."""
    # libpq's connect_timeout is whole seconds: psycopg truncates a float the same way.
    return psycopg.connect(url, autocommit=True, connect_timeout=int(connect_seconds))
