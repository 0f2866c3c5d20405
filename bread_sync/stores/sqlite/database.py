"""The SQLite store: the default, one file shared by every thread and process (gunicorn workers).

WAL mode lets readers work beside the one writer. Each call borrows a pooled connection and
gives it back, holds no Python lock while SQLite works, and is one statement or one short
transaction: under gevent a blocked SQLite call stalls the whole worker. For the same reason a
statement that finds the file locked waits in Python, not in SQLite (see busy.py).
"""

from __future__ import annotations

import json
import os
import queue
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, cast

from sqlite_utils import Database

from ... import greenlets
from ...clock import iso_days_ago, now_iso
from ...crumbs import Frame, dumps
from ...errors import SEQ_CONFLICT, BreadError
from .. import tags_match
from ..sql import PUSH_COLUMNS, SQLITE, SQLStore, push_row
from . import wal
from .busy import BUSY_TIMEOUT_SECONDS, PatientConnection, os_sleeping
from .listener import AppendListener
from .migrations import immediate, migrate
from .purge import purge

POOL_SIZE = 4
#: Run ids per statement of ``last_seqs``, well under SQLite's limit on bound parameters.
LAST_SEQS_CHUNK = 500
LAST_SEQ = "SELECT max(seq) FROM crumbs WHERE run_id = ids.id"

#: Whether a subscription is due: read first, so that a sender with nothing to do takes no write lock.
DUE_PUSH = """
SELECT 1 FROM push_configs WHERE done = 0 AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)
LIMIT 1
"""
CLAIM_PUSH = f"""
UPDATE push_configs SET claimed_by = ?, claimed_until = ?
WHERE rowid = (SELECT rowid FROM push_configs WHERE done = 0 AND next_attempt_at <= ?
               AND (claimed_until IS NULL OR claimed_until < ?) ORDER BY next_attempt_at LIMIT 1)
RETURNING {", ".join(PUSH_COLUMNS.values())}
"""
INSERT_CRUMB = "INSERT INTO crumbs (run_id, seq, type, crumb) VALUES (?, ?, ?, ?)"
TOUCH_SESSION = """
    INSERT INTO sessions (id, tags, created_at, updated_at, state) VALUES (?1, ?2, ?3, ?3, coalesce(?4, '{}'))
    ON CONFLICT (id) DO UPDATE SET
        tags = json_patch(sessions.tags, excluded.tags), updated_at = excluded.updated_at,
        state = coalesce(?4, sessions.state)
"""
#: A session's claim for ``?2``: taken when free, kept when ``?2`` holds it, taken over from ``?3``.
CLAIM_SESSION = """
    INSERT INTO session_claims (session_id, run_id) VALUES (?1, ?2)
    ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id WHERE session_claims.run_id IN (?2, ?3)
"""
HOLDER = "SELECT run_id FROM session_claims WHERE session_id = ?"
SELECT_SESSION = """
    SELECT s.id, s.tags, s.created_at, s.updated_at, s.state, m.message
    FROM sessions s LEFT JOIN session_messages m ON m.session_id = s.id
    WHERE s.id = ? ORDER BY m.position
"""


class SQLiteStore(SQLStore):
    """A :class:`~bread_sync.stores.Store` in one SQLite file, migrated on open."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | os.PathLike[str],
        pool_size: int = POOL_SIZE,
        busy_seconds: float = BUSY_TIMEOUT_SECONDS,
        checkpoint_seconds: float | None = wal.SECONDS,
        writes_in_thread: bool = True,
    ):
        if str(path) == ":memory:":
            raise ValueError("an in-memory SQLite database is private to one connection: use the memory store")
        self.path = Path(path)
        self.busy_seconds = busy_seconds
        #: Whether, under gevent, :meth:`write_batch` commits in the store's thread of the OS (a
        #: web server: its other streams go on meanwhile) or in the caller's greenlet
        #: (``bread-sync worker``'s store: see server/worker.py).
        self.writes_in_thread = writes_in_thread
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._checkpointer = wal.Checkpointer(self.path, checkpoint_seconds) if checkpoint_seconds else None
        with self._open() as db:
            db.enable_wal()
            migrate(db)
        # Free slots open their connection on first use, so a store made before gunicorn forks
        # hands no open connection to the workers unless it was used.
        # Last in, first out: one writer keeps reusing its warm connection (page cache intact)
        # instead of cycling through connections that other commits made stale.
        self._pool: queue.Queue[Database | None] = queue.LifoQueue()
        for _ in range(pool_size):
            self._pool.put(None)
        # One thread for the transactions of write_batch: two in threads at once would wait for
        # each other's write lock in busy waits, a millisecond at least.
        self._writer = greenlets.OSThread()
        self._finalizer = weakref.finalize(self, _close, self._pool, self._checkpointer, self._writer)
        # Per thread and per greenlet alike (each has its own context), whenever gevent patched.
        self._batch: ContextVar[Database | None] = ContextVar("bread_sqlite_batch", default=None)

    def close(self) -> None:
        """Close the pooled connections."""
        self._finalizer()

    def connection(self) -> _Borrowed:
        """Borrow a pooled connection for one short piece of work; waits while all are in use.
        Inside a :meth:`batch`, the batch's connection."""
        return _Borrowed(self)

    def _take(self) -> Database:
        db = self._pool.get()
        try:
            if db is None:
                if not self._finalizer.alive:
                    raise RuntimeError(f"the SQLite store at {self.path} is closed")
                db = self._open()
            if self._checkpointer is not None:  # started on first use in each process
                self._checkpointer.ensure_running()
        except BaseException:
            self._pool.put(db)
            raise
        return db

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction for the store calls made inside, in this thread (or greenlet):
        each call's own ``immediate`` joins it."""
        if self._batch.get() is not None:
            yield
            return
        with self.connection() as db, immediate(db):
            token = self._batch.set(db)
            try:
                yield
            finally:
                self._batch.reset(token)

    def write_batch(self, writes: list[Callable[[], Any]]) -> None:
        """``writes`` (calls of this store) as one :meth:`batch`. Under gevent the transaction
        runs in a thread of the OS while the calling greenlet waits for its commit: SQLite lets
        go of the GIL, so the event loop serves other greenlets meanwhile instead of standing
        still for every statement. The caller still goes on only once it is committed."""
        if not self.writes_in_thread or not greenlets.patched() or self._batch.get() is not None:
            with self.batch():
                for write in writes:
                    write()
            return
        db = self._take()  # here, not in the thread: the pool's queue is gevent's
        self._writer.call(lambda: self._write_in_os_thread(db, writes), then=lambda: self._pool.put(db))

    def _write_in_os_thread(self, db: Database, writes: list[Callable[[], Any]]) -> None:
        # No gevent primitive may run here: the store's calls inside find the batch's connection
        # (no pool), and a locked file is waited for with the OS's sleep, not gevent's.
        with os_sleeping(cast(PatientConnection, db.conn)):  # opened with factory=PatientConnection
            token = self._batch.set(db)
            try:
                with immediate(db):
                    for write in writes:
                        write()
            finally:
                self._batch.reset(token)

    def _open(self) -> Database:
        conn = sqlite3.connect(
            self.path, timeout=0, isolation_level=None, check_same_thread=False, factory=PatientConnection
        )
        conn.busy_seconds = self.busy_seconds
        conn.execute("PRAGMA synchronous=NORMAL")
        if self._checkpointer is not None:  # checkpoints are its work, see wal.py
            conn.execute(f"PRAGMA wal_autocheckpoint={wal.BACKSTOP_PAGES}")
        return Database(conn, recursive_triggers=False, execute_plugins=False)

    def listen(self) -> AppendListener:
        """Whether anything was committed (by any connection) since the last wait, not which runs:
        the follower skips its reads while nothing was."""
        # timeout=0: a locked file answers at once (under gevent a wait in SQLite stalls the worker)
        return AppendListener(lambda: sqlite3.connect(self.path, timeout=0, isolation_level=None))

    # crumb log
    def append_crumbs(self, run_id: str, frames: list[Frame]) -> None:
        rows = [(run_id, f.seq, f.type, f.wire) for f in frames]
        if not rows:
            return
        with self.connection() as db, immediate(db), _seq_conflict(run_id, [row[1] for row in rows]):
            db.conn.executemany(INSERT_CRUMB, rows)

    def last_seqs(self, run_ids: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self.connection() as db:
            for start in range(0, len(run_ids), LAST_SEQS_CHUNK):
                chunk = run_ids[start : start + LAST_SEQS_CHUNK]
                values = ",".join(["(?)"] * len(chunk))
                # One max() subquery per run: an index seek each, where a GROUP BY reads every row.
                sql = f"WITH ids(id) AS (VALUES {values}) SELECT id, ({LAST_SEQ}) FROM ids"
                found.update((run_id, seq) for run_id, seq in db.execute(sql, chunk) if seq is not None)
        return found

    # checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        values = (checkpoint["id"], checkpoint.get("runId"), checkpoint["status"], dumps(checkpoint))
        with self.connection() as db:
            # Straight to the connection, not through sqlite-utils: a run's progress is saved
            # with many of its crumbs (engine/execution.py).
            db.conn.execute("INSERT OR REPLACE INTO checkpoints (id, run_id, status, data) VALUES (?, ?, ?, ?)", values)

    # sessions
    def touch_session(
        self, session_id: str, tags: dict[str, str] | None = None, state: dict[str, Any] | None = None
    ) -> None:
        given = None if state is None else dumps(state)
        with self.connection() as db:
            db.execute(TOUCH_SESSION, (session_id, dumps(tags or {}), now_iso(), given))

    def append_messages(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        rows = [(session_id, dumps(message)) for message in messages]
        touch = "UPDATE sessions SET updated_at = ? WHERE id = ?"
        with self.connection() as db, immediate(db):
            if db.execute(touch, (now_iso(), session_id)).rowcount:
                db.conn.executemany("INSERT INTO session_messages (session_id, message) VALUES (?, ?)", rows)

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        with self.connection() as db:
            rows = db.execute(SELECT_SESSION, (session_id,)).fetchall()
        if not rows:
            return None
        messages = [json.loads(row[5]) for row in rows if row[5] is not None]
        return {**_session(rows[0][:4]), "state": json.loads(rows[0][4]), "messages": messages}

    def list_sessions(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        sql = "SELECT id, tags, created_at, updated_at FROM sessions ORDER BY rowid"
        with self.connection() as db:
            rows = db.execute(sql).fetchall()
        return [session for session in map(_session, rows) if tags_match(session["tags"], tags)]

    def delete_session(self, session_id: str) -> bool:
        with self.connection() as db, immediate(db):
            db.execute("DELETE FROM session_messages WHERE session_id = ?", (session_id,))
            return db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 1

    def cleanup_sessions(self, older_than_days: float | None = None, tags: dict[str, str] | None = None) -> int:
        cutoff = None if older_than_days is None else iso_days_ago(older_than_days)
        sql = "SELECT id, tags FROM sessions WHERE ? IS NULL OR updated_at < ?"
        with self.connection() as db, immediate(db):
            rows = db.execute(sql, (cutoff, cutoff)).fetchall()
            doomed = [(session_id,) for session_id, text in rows if tags_match(json.loads(text), tags)]
            db.conn.executemany("DELETE FROM session_messages WHERE session_id = ?", doomed)
            db.conn.executemany("DELETE FROM sessions WHERE id = ?", doomed)
        return len(doomed)

    # session claims
    def claim_session(self, session_id: str, run_id: str, take_from: str | None = None) -> str | None:
        # One statement claims a free session (a run's opening, most often); the holder is read
        # only when it did not, under the write lock, so that it cannot let go in between.
        claim = (session_id, run_id, take_from)
        with self.connection() as db:
            if db.conn.execute(CLAIM_SESSION, claim).rowcount == 1:
                return None
            with immediate(db):
                if db.conn.execute(CLAIM_SESSION, claim).rowcount == 1:
                    return None
                return db.conn.execute(HOLDER, (session_id,)).fetchone()[0]

    # loops
    def save_loop(self, record: dict[str, Any]) -> None:
        values = (record["id"], record["agentId"], record["sessionId"], record["status"], dumps(record))
        sql = "INSERT OR REPLACE INTO loops (id, agent_id, session_id, status, data) VALUES (?, ?, ?, ?, ?)"
        with self.connection() as db:
            db.execute(sql, values)

    def save_loop_iteration(self, loop_id: str, iteration: dict[str, Any]) -> None:
        sql = "INSERT OR REPLACE INTO loop_iterations (loop_id, idx, data) VALUES (?, ?, ?)"
        with self.connection() as db:
            db.execute(sql, (loop_id, iteration["index"], dumps(iteration)))

    # task runs
    def save_task_run(self, record: dict[str, Any]) -> None:
        keys = ("id", "taskId", "sessionId", "agentId", "status", "createdAt")
        sql = (
            "INSERT OR REPLACE INTO task_runs (id, task_id, session_id, agent_id, status, created_at, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        with self.connection() as db:
            db.execute(sql, [*(record[k] for k in keys), dumps(record)])

    # push subscriptions
    def claim_push(self, owner: str, now: float, until: float) -> dict[str, Any] | None:
        with self.connection() as db:
            if db.execute(DUE_PUSH, (now, now)).fetchone() is None:
                return None
            with immediate(db):
                row = db.execute(CLAIM_PUSH, (owner, until, now, now)).fetchone()
        return None if row is None else push_row(row)

    def purge(self, before: str, dry_run: bool = False) -> dict[str, int]:
        return purge(self.connection, before, dry_run)


class _Borrowed:
    """``with store.connection() as db``: a class, not a generator, as every store call opens
    one (a durable crumb's commit, several)."""

    __slots__ = ("store", "db")

    def __init__(self, store: SQLiteStore):
        self.store = store
        self.db: Database | None = None

    def __enter__(self) -> Database:
        held = self.store._batch.get()
        if held is not None:
            return held
        self.db = self.store._take()
        return self.db

    def __exit__(self, *exc: Any) -> None:
        if self.db is not None:
            self.store._pool.put(self.db)


@contextmanager
def _seq_conflict(run_id: str, seqs: list[int]) -> Iterator[None]:
    """The unique index and the append-only trigger refuse a taken seq; say so in our terms."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise BreadError(SEQ_CONFLICT, f"run {run_id}: a seq in {seqs} is already written") from exc


def _session(row: tuple[Any, ...]) -> dict[str, Any]:
    session_id, tags, created_at, updated_at = row
    return {"id": session_id, "tags": json.loads(tags), "createdAt": created_at, "updatedAt": updated_at}


def _close(
    pool: queue.Queue[Database | None], checkpointer: wal.Checkpointer | None, writer: greenlets.OSThread
) -> None:
    writer.stop()
    if checkpointer is not None:
        checkpointer.stop()
    # Closed connections go back in, so a call after close() fails instead of waiting forever.
    slots = []
    while not pool.empty():
        slots.append(pool.get_nowait())
    for db in slots:
        if db is not None:
            db.close()
        pool.put(db)


def store(
    path: str | os.PathLike[str],
    pool_size: int = POOL_SIZE,
    busy_seconds: float = BUSY_TIMEOUT_SECONDS,
    checkpoint_seconds: float | None = wal.SECONDS,
    writes_in_thread: bool = True,
) -> SQLiteStore:
    """A SQLite store in the file ``path`` (its folder is created if missing). A statement waits
    up to ``busy_seconds`` for a file another process locked, then fails with ``STORE_BUSY``.
    The write-ahead log is checkpointed every ``checkpoint_seconds`` off the path of commits;
    ``None`` (or 0) leaves that to SQLite's commits (see wal.py). Under gevent a run's end is
    committed in a thread of the OS of the store's own unless ``writes_in_thread`` is False."""
    return SQLiteStore(path, pool_size, busy_seconds, checkpoint_seconds, writes_in_thread)
