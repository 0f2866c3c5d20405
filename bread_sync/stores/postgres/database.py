"""The Postgres store: one database shared by replicas on several hosts.

Each call borrows a pooled connection (psycopg 3, autocommit) and gives it back, and is one
statement, or one short transaction where it must be several. Under gevent psycopg waits for
the server through gevent's ``select``, so a query holds up only its own greenlet; psycopg
picks that wait when it is imported after gevent patched (as in gunicorn's gevent worker).
What must hold across hosts is done in SQL: a run's appends take turns on an advisory lock,
claims are compare-and-set statements.
"""

from __future__ import annotations

import json
import logging
import os
import select
import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ... import greenlets
from ...clock import iso_days_ago, now_iso
from ...crumbs import Frame, dumps
from ...errors import SEQ_CONFLICT, STORE_UNAVAILABLE, BreadError
from ..sql import POSTGRES, PUSH_COLUMNS, SQLStore, push_row
from .listener import AppendListener, connect
from .migrations import migrate
from .purge import purge

log = logging.getLogger("bread_sync")

POOL_SIZE = 4
#: How long a call waits for a free pooled connection (or for Postgres to take a new one).
CONNECT_SECONDS = 10.0
#: Attempts of a session claim that found a holder who let go before it could be named.
CLAIM_ATTEMPTS = 3
#: Postgres unreachable: down, restarting, refusing connections, or the pool's wait over.
UNAVAILABLE = (psycopg.OperationalError, PoolTimeout)

# One statement: of senders on any host claiming at once, each locks a different due row
# (SKIP LOCKED) or finds none; the winner's claim hides the row from the next.
CLAIM_PUSH = f"""
    UPDATE push_configs SET claimed_by = %s, claimed_until = %s
    WHERE (task_id, id) = (
        SELECT task_id, id FROM push_configs WHERE NOT done AND next_attempt_at <= %s
            AND (claimed_until IS NULL OR claimed_until < %s)
        ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING {", ".join(PUSH_COLUMNS.values())}
"""
APPEND_CRUMBS = "SELECT bread_append_crumbs(%s, %s::bigint[], %s::text[], %s::text[])"
APPEND_CRUMB = "SELECT bread_append_crumb(%s, %s::bigint, %s, %s)"
# One max() subquery per run: an index seek each, where a GROUP BY reads every row.
LAST_SEQS = "SELECT ids.id, (SELECT max(seq) FROM crumbs WHERE run_id = ids.id) FROM unnest(%s::text[]) AS ids(id)"
SAVE_CHECKPOINT = """
    INSERT INTO checkpoints (id, run_id, status, created_at, data) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, status = excluded.status,
        created_at = excluded.created_at, data = excluded.data
"""
TOUCH_SESSION = """
    INSERT INTO sessions (id, tags, created_at, updated_at, state)
    VALUES (%(id)s, %(tags)s::jsonb, %(now)s, %(now)s, coalesce(%(state)s::text, '{}'))
    ON CONFLICT (id) DO UPDATE SET tags = sessions.tags || excluded.tags, updated_at = excluded.updated_at,
        state = coalesce(%(state)s::text, sessions.state)
"""
SELECT_SESSION = """
    SELECT s.id, s.tags, s.created_at, s.updated_at, s.state, m.message
    FROM sessions s LEFT JOIN session_messages m ON m.session_id = s.id
    WHERE s.id = %s ORDER BY m.position
"""
# The claim is one statement: it takes a free session, keeps its own, or replaces ``take_from``.
CLAIM_SESSION = """
    INSERT INTO session_claims (session_id, run_id) VALUES (%s, %s)
    ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id
    WHERE session_claims.run_id = excluded.run_id OR session_claims.run_id = %s
    RETURNING run_id
"""
SAVE_LOOP = """
    INSERT INTO loops (id, agent_id, session_id, status, run_id, data) VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, session_id = excluded.session_id,
        status = excluded.status, run_id = excluded.run_id, data = excluded.data
"""
SAVE_LOOP_ITERATION = """
    INSERT INTO loop_iterations (loop_id, idx, data) VALUES (%s, %s, %s)
    ON CONFLICT (loop_id, idx) DO UPDATE SET data = excluded.data
"""
SAVE_TASK_RUN = """
    INSERT INTO task_runs (id, task_id, session_id, agent_id, status, run_id, created_at, data)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET task_id = excluded.task_id, session_id = excluded.session_id,
        agent_id = excluded.agent_id, status = excluded.status, run_id = excluded.run_id,
        created_at = excluded.created_at, data = excluded.data
"""


class PostgresStore(SQLStore):
    """A :class:`~bread_sync.stores.Store` in one Postgres database, migrated on open."""

    dialect = POSTGRES

    def __init__(self, url: str, pool_size: int = POOL_SIZE, connect_seconds: float = CONNECT_SECONDS):
        self.url, self.pool_size, self.connect_seconds = url, pool_size, connect_seconds
        with unavailable_as_error(), connect(url, connect_seconds) as conn:
            migrate(conn)
        # Opened on first use in each process: a store made before gunicorn forks hands its
        # workers no connection (a connection must not cross a fork) and no thread.
        self._pool: ConnectionPool | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self._closed = False
        # Per thread and per greenlet alike (each has its own context), whenever gevent patched.
        self._batch: ContextVar[Any] = ContextVar("bread_postgres_batch", default=None)

    def close(self) -> None:
        """Close the pooled connections; later calls fail."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None and self._pool_pid == os.getpid():
            pool.close()

    def connection(self) -> AbstractContextManager[Any]:
        """Borrow a pooled connection (autocommit) for one short piece of work; waits while all
        are in use. Inside a :meth:`batch`, the batch's connection."""
        return _Borrowed(self)

    def _pooled(self) -> ConnectionPool:
        if self._pool is None or self._pool_pid != os.getpid():
            with self._pool_lock:
                if self._closed:
                    raise RuntimeError("the Postgres store is closed")
                if self._pool is None or self._pool_pid != os.getpid():
                    _warn_if_blocking()
                    self._pool = ConnectionPool(
                        self.url,
                        min_size=1,
                        max_size=self.pool_size,
                        kwargs={"autocommit": True},
                        timeout=self.connect_seconds,
                        check=still_connected,
                        name="bread",
                        open=True,
                    )
                    self._pool_pid = os.getpid()
        return self._pool

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction for the store calls made inside, in this thread (or greenlet)."""
        if self._batch.get() is not None:
            yield
            return
        with self.connection() as conn, conn.transaction():
            token = self._batch.set(conn)
            try:
                yield
            finally:
                self._batch.reset(token)

    # crumb log
    def append_crumbs(self, run_id: str, frames: list[Frame]) -> None:
        if not frames:
            return
        seqs = [f.seq for f in frames]
        if any(later <= earlier for earlier, later in zip(seqs, seqs[1:], strict=False)):
            raise _conflict(run_id, seqs)
        if len(frames) == 1:
            sql, params = APPEND_CRUMB, [run_id, seqs[0], frames[0].type, frames[0].wire]
        else:
            sql = APPEND_CRUMBS
            params = [run_id, _array(map(str, seqs)), _array(f.type for f in frames), _array(f.wire for f in frames)]
        try:
            with self.connection() as conn:
                conn.execute(sql, params)
        except psycopg.errors.UniqueViolation as exc:
            raise _conflict(run_id, seqs) from exc

    def last_seqs(self, run_ids: list[str]) -> dict[str, int]:
        if not run_ids:
            return {}
        with self.connection() as conn:
            return {run_id: seq for run_id, seq in conn.execute(LAST_SEQS, [run_ids]) if seq is not None}

    def listen(self) -> AppendListener:
        """A listener on the appends of every process (LISTEN/NOTIFY), with a connection of its own."""
        return AppendListener(self.url, self.connect_seconds)

    # checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        values = [
            checkpoint["id"],
            checkpoint.get("runId"),
            checkpoint["status"],
            checkpoint.get("createdAt"),
            dumps(checkpoint),
        ]
        with self.connection() as conn:
            conn.execute(SAVE_CHECKPOINT, values)

    # runs
    def claim_queued(
        self, run_id: str, owner: str, lease_until: float, now: float, most_running: int | None = None
    ) -> bool:
        if most_running is None:
            return super().claim_queued(run_id, owner, lease_until, now)
        # Read committed counts what others have committed: claims of one agent take turns.
        lock = "SELECT pg_advisory_xact_lock(hashtext('bread:claim:' || agent_id)) FROM runs WHERE id = %s"
        with self.connection() as conn, conn.transaction():
            conn.execute(lock, [run_id])
            return self._claim_queued(conn, run_id, owner, lease_until, now, most_running)

    # sessions
    def touch_session(
        self, session_id: str, tags: dict[str, str] | None = None, state: dict[str, Any] | None = None
    ) -> None:
        given = None if state is None else dumps(state)  # None: the session keeps its state
        with self.connection() as conn:
            conn.execute(TOUCH_SESSION, {"id": session_id, "tags": dumps(tags or {}), "now": now_iso(), "state": given})

    def append_messages(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        touch = "UPDATE sessions SET updated_at = %s WHERE id = %s"
        insert = "INSERT INTO session_messages (session_id, message) VALUES (%s, %s)"
        with self.connection() as conn, conn.transaction():
            if conn.execute(touch, [now_iso(), session_id]).rowcount:
                conn.cursor().executemany(insert, [(session_id, dumps(message)) for message in messages])

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            rows = conn.execute(SELECT_SESSION, [session_id]).fetchall()
        if not rows:
            return None
        messages = [json.loads(row[5]) for row in rows if row[5] is not None]
        return {**_session(rows[0][:4]), "state": json.loads(rows[0][4]), "messages": messages}

    def list_sessions(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        sql = "SELECT id, tags, created_at, updated_at FROM sessions WHERE tags @> %s::jsonb ORDER BY position"
        with self.connection() as conn:
            return [_session(row) for row in conn.execute(sql, [dumps(tags or {})])]

    def delete_session(self, session_id: str) -> bool:
        with self.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM session_messages WHERE session_id = %s", [session_id])
            return conn.execute("DELETE FROM sessions WHERE id = %s", [session_id]).rowcount == 1

    def cleanup_sessions(self, older_than_days: float | None = None, tags: dict[str, str] | None = None) -> int:
        cutoff = None if older_than_days is None else iso_days_ago(older_than_days)
        sql = """
            WITH doomed AS (
                DELETE FROM sessions WHERE tags @> %s::jsonb AND (%s::text IS NULL OR updated_at < %s) RETURNING id
            ), messages AS (DELETE FROM session_messages WHERE session_id IN (SELECT id FROM doomed))
            SELECT count(*) FROM doomed
        """
        with self.connection() as conn:
            return conn.execute(sql, [dumps(tags or {}), cutoff, cutoff]).fetchone()[0]

    # session claims
    def claim_session(self, session_id: str, run_id: str, take_from: str | None = None) -> str | None:
        holder_sql = "SELECT run_id FROM session_claims WHERE session_id = %s"
        with self.connection() as conn:
            for _ in range(CLAIM_ATTEMPTS):
                if conn.execute(CLAIM_SESSION, [session_id, run_id, take_from]).fetchone() is not None:
                    return None
                holder = conn.execute(holder_sql, [session_id]).fetchone()
                if holder is not None:
                    return holder[0]
                # The holder let go between the two statements: try again for the free session.
        raise BreadError(STORE_UNAVAILABLE, f"session {session_id}: its claim kept changing hands; retry later")

    # loops
    def save_loop(self, record: dict[str, Any]) -> None:
        keys = ("id", "agentId", "sessionId", "status")
        with self.connection() as conn:
            conn.execute(SAVE_LOOP, [*(record[k] for k in keys), record.get("runId"), dumps(record)])

    def save_loop_iteration(self, loop_id: str, iteration: dict[str, Any]) -> None:
        with self.connection() as conn:
            conn.execute(SAVE_LOOP_ITERATION, [loop_id, iteration["index"], dumps(iteration)])

    # task runs
    def save_task_run(self, record: dict[str, Any]) -> None:
        keys = ("id", "taskId", "sessionId", "agentId", "status")
        with self.connection() as conn:
            conn.execute(
                SAVE_TASK_RUN, [*(record[k] for k in keys), record.get("runId"), record["createdAt"], dumps(record)]
            )

    # push subscriptions
    def claim_push(self, owner: str, now: float, until: float) -> dict[str, Any] | None:
        with self.connection() as conn:
            row = conn.execute(CLAIM_PUSH, [owner, until, now, now]).fetchone()
        return None if row is None else push_row(row)

    # retention
    def purge(self, before: str, dry_run: bool = False) -> dict[str, int]:
        return purge(self.connection, before, dry_run)


def _warn_if_blocking() -> None:
    """psycopg picks how it waits for the server when it is imported: imported before gevent
    patched (``gunicorn --preload``), its queries block every greenlet of the worker."""
    from psycopg import waiting

    if greenlets.patched() and waiting.wait is getattr(waiting, "wait_c", None):
        log.warning(
            "psycopg was imported before gevent patched: each Postgres query blocks the whole worker "
            "(do not preload the app; import the Postgres store after gevent's monkey.patch_all())"
        )


def still_connected(conn: Any) -> None:
    """The pool's check of a connection it is about to lend, without a round trip: an idle
    connection has nothing to read unless the server said goodbye (Postgres restarting sends
    "terminating connection", then closes). The pool then lends another instead, waiting up to
    ``connect_seconds`` for Postgres to be back."""
    poller = _OS_POLL()  # not select(), which refuses a descriptor past 1023
    poller.register(conn.pgconn.socket, select.POLLIN)
    if poller.poll(0) or conn.pgconn.status != psycopg.pq.ConnStatus.OK:
        conn.close()  # closed, the pool drops it rather than lend it again
        raise psycopg.OperationalError("the server closed the connection")


def _os_poll() -> Any:
    """The OS's poll even where gevent patched it: a poll that does not wait blocks no
    greenlet, and gevent's costs a watcher on its loop each time. Taken once: before gevent
    patched, ``select.poll`` is the OS's."""
    if greenlets.patched():
        from gevent.monkey import get_original

        return get_original("select", "poll")
    return select.poll


_OS_POLL = _os_poll()


class _Borrowed:
    """:meth:`PostgresStore.connection`: a class, not a generator, since it is on every append's
    path. It borrows with getconn/putconn rather than the pool's connection(), whose ``with conn``
    commits on the way out, a call into psycopg's wait even in autocommit. Nothing is left open
    either way: autocommit, transaction() blocks end their own, and the pool rolls back a
    connection returned inside one."""

    __slots__ = ("store", "pool", "conn")

    def __init__(self, store: PostgresStore):
        self.store = store
        self.pool: ConnectionPool | None = None
        self.conn: Any = None

    def __enter__(self) -> Any:
        self.conn = self.store._batch.get()
        if self.conn is None:
            with unavailable_as_error():
                self.pool = self.store._pooled()
                self.conn = self.pool.getconn(timeout=self.store.connect_seconds)
        return self.conn

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self.pool is not None:
            self.pool.putconn(self.conn)
        if isinstance(exc, UNAVAILABLE):
            raise _unavailable() from exc


@contextmanager
def unavailable_as_error() -> Iterator[None]:
    """Postgres unreachable (down, restarting, refusing connections, the pool's wait over):
    ``STORE_UNAVAILABLE``, with nothing of the call written."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise _unavailable() from exc


def _unavailable() -> BreadError:
    # The message reaches clients, so it names no host; the cause stays chained for the server's log.
    return BreadError(STORE_UNAVAILABLE, "the Postgres store does not answer; retry later")


def _array(texts: Iterable[str]) -> str:
    """An array literal of ``texts``, each quoted: psycopg's own dumping of a list costs more
    than the rest of an append's Python (it inspects every element), this two replaces."""
    return "{" + ",".join('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"' for text in texts) + "}"


def _conflict(run_id: str, seqs: list[int]) -> BreadError:
    return BreadError(SEQ_CONFLICT, f"run {run_id}: a seq in {seqs} is already written")


def _session(row: tuple[Any, ...]) -> dict[str, Any]:
    session_id, tags, created_at, updated_at = row
    return {"id": session_id, "tags": tags, "createdAt": created_at, "updatedAt": updated_at}


def store(url: str, pool_size: int = POOL_SIZE, connect_seconds: float = CONNECT_SECONDS) -> PostgresStore:
    """A Postgres store in the database at ``url`` (``postgresql://user@host/db``), migrated on
    open, with up to ``pool_size`` connections per process. A call that cannot reach Postgres
    within ``connect_seconds`` fails with ``STORE_UNAVAILABLE``."""
    return PostgresStore(url, pool_size, connect_seconds)
