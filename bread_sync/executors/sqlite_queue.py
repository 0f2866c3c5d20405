"""Huey's SQLite queue with one poller per process, handing a task to each idle greenlet.

Huey's consumer has each of its workers poll a queue that cannot wake it (SQLite), each with its
own back-off: a worker of 64 greenlets read the file 64 times per pause while idle, and when a
burst of runs arrived its greenlets woke one by one over the longest pause (a quarter of a
second), each to take one task. Here the storage says it blocks, as Redis's does, so Huey's
workers call :meth:`HandoutSqliteStorage.dequeue` again at once rather than sleep: one of them
polls the file, with a short back-off, while the others wait in memory; when tasks are there it
takes one for itself and one for each waiting worker in one transaction and wakes them. A task
is taken only for a worker already waiting for it, so none waits in this process's memory for a
worker: a process that dies holds no more runs than it was driving (their records are the truth
either way, engine/queued.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from huey import SqliteHuey
from huey.constants import EmptyData
from huey.storage import SqliteStorage

from ..stores.sqlite.busy import PatientConnection

#: The poller's pauses between reads of an empty queue: doubling from the first to the longest.
POLL_SECONDS = (0.01, 0.1)
#: How long a worker waits for a task before it returns to Huey's loop (which checks its stop
#: flag), as Huey's Redis storage's blocking read does.
WAIT_SECONDS = 1.0


class Handout:
    """Tasks from ``take(n)`` (up to ``n`` at once, possibly none) for the workers of one
    process: :meth:`next` returns a task or, after ``wait_seconds``, None."""

    def __init__(self, take: Callable[[int], list[bytes]], wait_seconds: float = WAIT_SECONDS):
        self.take = take
        self.wait_seconds = wait_seconds
        self._ready = threading.Condition()
        self._tasks: deque[bytes] = deque()
        self._polling = False
        self._waiting = 0

    def next(self) -> bytes | None:
        with self._ready:
            if self._tasks:
                return self._tasks.popleft()
            if self._polling:
                return self._wait_for_poller()
            self._polling = True
        try:
            return self._poll()
        finally:
            with self._ready:
                self._polling = False
                self._ready.notify()  # a waiting worker returns, and polls next

    def _wait_for_poller(self) -> bytes | None:
        self._waiting += 1
        try:
            self._ready.wait(self.wait_seconds)
        finally:
            self._waiting -= 1
        return self._tasks.popleft() if self._tasks else None

    def _poll(self) -> bytes | None:
        pause, most = POLL_SECONDS
        deadline = time.monotonic() + self.wait_seconds
        while True:
            tasks = self.take(self._waiting + 1)
            if tasks:
                self._hand_out(tasks[1:])
                return tasks[0]
            if time.monotonic() + pause > deadline:
                return None
            time.sleep(pause)  # gevent's in a worker: the greenlets run meanwhile
            pause = min(pause * 2, most)

    def _hand_out(self, tasks: list[bytes]) -> None:
        if tasks:
            with self._ready:
                self._tasks.extend(tasks)
                self._ready.notify(len(tasks))


class HandoutSqliteStorage(SqliteStorage):
    """Huey's SQLite storage whose ``dequeue`` goes through one :class:`Handout` per process, and
    whose statements wait for a locked file and whose commits wait for no fsync, as the store's
    do."""

    blocking = True  # Huey's worker calls dequeue again at once: the wait is in the handout

    def __init__(self, *args, timeout: float = 5, **kwargs):
        # No busy timeout: SQLite's handler sleeps in C, stalling every greenlet of the worker
        # while another process holds the file; the store's connection waits in Python instead,
        # for Huey's ``timeout`` seconds.
        self.busy_seconds = timeout  # before Huey's init, which connects
        super().__init__(*args, **{**kwargs, "timeout": 0, "factory": PatientConnection})
        self.handout = Handout(self.take)

    def _create_connection(self):
        # In WAL mode NORMAL survives a crash of the process, not of the machine; a task lost
        # with the machine leaves its run queued, which a sweep submits again (engine/queued.py).
        # FULL (Huey's default) syncs every enqueue, inside the web tier's request, whose other
        # greenlets it holds up.
        conn = super()._create_connection()
        conn.busy_seconds = self.busy_seconds
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def dequeue(self) -> bytes | None:
        return self.handout.next()

    def take(self, most: int) -> list[bytes]:
        """Up to ``most`` tasks in queue order, removed in one transaction."""
        if not self.sql("select 1 from task where queue = ? limit 1", (self.name,), results=True):
            return []  # an empty queue is read without the write lock, as Huey's dequeue does
        with self.db(commit=True) as curs:
            curs.execute(
                "select id, data from task where queue = ? order by priority desc, id limit ?", (self.name, most)
            )
            rows = curs.fetchall()
            curs.executemany("delete from task where id = ?", [(tid,) for tid, _ in rows])
        return [data for _, data in rows]

    def pop_data(self, key: bytes | str) -> bytes | object:
        """The value at ``key``, removed; ``EmptyData`` when there is none, read without the
        write lock. Huey pops each task's revoke flag once the task has run, and bread_sync
        revokes none (a cancel goes through the run's record): Huey's own pop took the queue
        file's write lock for every run, and waited for it when another worker held it."""
        found = "select 1 from kv where queue = ? and key = ? limit 1"
        if not self.sql(found, (self.name, key), results=True):
            return EmptyData
        return super().pop_data(key)


class HandoutSqliteHuey(SqliteHuey):
    storage_class = HandoutSqliteStorage
