"""The SQLite store's schema, as numbered migrations applied in order and recorded by name.

To change the schema, add a ``@migration`` function at the end named ``m<NNN>_<what>``; never
edit or reorder one that has shipped, since databases in the field recorded it as applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlite_utils import Database

from ...clock import now_iso

MIGRATIONS_TABLE = "_bread_migrations"
MIGRATIONS: list[Callable[[Database], None]] = []


def migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    MIGRATIONS.append(fn)
    return fn


def migrate(db: Database) -> list[str]:
    """Apply the migrations ``db`` lacks, in order, in one transaction; the names applied."""
    if not _pending(db):
        return []
    # A second process opening the same fresh file waits here, then finds nothing left to do.
    with immediate(db):
        db.table(MIGRATIONS_TABLE).create({"name": str, "applied_at": str}, pk="name", if_not_exists=True)
        pending = _pending(db)
        for fn in pending:
            fn(db)
            db.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)", (fn.__name__, now_iso()))
    return [fn.__name__ for fn in pending]


def applied(db: Database) -> list[str]:
    if not db.table(MIGRATIONS_TABLE).exists():
        return []
    return [name for (name,) in db.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid")]


def _pending(db: Database) -> list[Callable[[Database], None]]:
    done = set(applied(db))
    return [fn for fn in MIGRATIONS if fn.__name__ not in done]


class immediate:  # noqa: N801 - used as a function: ``with immediate(db):``
    """A write transaction that takes the write lock up front: a deferred one that read first
    could fail midway with SQLITE_BUSY, without waiting, when another process wrote meanwhile.
    (A class, not a generator: it wraps every write of the store, a few times per commit.)"""

    __slots__ = ("db", "owned")

    def __init__(self, db: Database):
        self.db = db
        self.owned = False

    def __enter__(self) -> Database:
        conn = self.db.conn
        if not conn.in_transaction:  # else inside a store batch, which commits (or rolls back) for all
            # Straight to the connection: sqlite-utils' execute re-parses each statement, per commit.
            conn.execute("BEGIN IMMEDIATE")
            self.owned = True
        return self.db

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        if not self.owned:
            return
        if kind is not None:
            self._roll_back()
            return
        try:
            self.db.conn.execute("COMMIT")
        except BaseException:  # the file stayed locked past the wait: nothing of it is kept
            self._roll_back()
            raise

    def _roll_back(self) -> None:
        if self.db.conn.in_transaction:
            self.db.conn.execute("ROLLBACK")


@migration
def m001_initial(db: Database) -> None:
    db.table("crumbs").create(
        {"run_id": str, "seq": int, "type": str, "crumb": str},
        not_null={"run_id", "seq", "type", "crumb"},
    )
    db.table("crumbs").create_index(["run_id", "seq"], index_name="idx_crumbs_run_seq", unique=True)
    # The log is append-only, as the in-memory store and Redis streams have it: a seq at or
    # below the run's last one is refused even when free, so no writer can fill a gap late.
    db.execute(
        """
        CREATE TRIGGER crumbs_append_only BEFORE INSERT ON crumbs
        WHEN NEW.seq <= (SELECT max(seq) FROM crumbs WHERE run_id = NEW.run_id)
        BEGIN SELECT RAISE(ABORT, 'seq already written'); END
        """
    )
    db.table("runs").create(
        {
            "id": str,
            "agent_id": str,
            "session_id": str,
            "status": str,
            "checkpoint_id": str,
            "owner": str,
            "lease_until": float,
            "cancel_requested": int,
            "created_at": str,
            "updated_at": str,
        },
        pk="id",
        not_null={"status"},
    )
    db.table("runs").create_index(["status"], index_name="idx_runs_status")
    db.table("checkpoints").create({"id": str, "run_id": str, "status": str, "data": str}, pk="id")
    db.table("sessions").create({"id": str, "tags": str, "created_at": str, "updated_at": str}, pk="id")
    db.table("session_messages").create(
        {"position": int, "session_id": str, "message": str}, pk="position", not_null={"session_id"}
    )
    db.table("session_messages").create_index(["session_id", "position"], index_name="idx_session_messages_session")


@migration
def m002_claims_loops_task_runs(db: Database) -> None:
    db.table("runs").create_index(["session_id"], index_name="idx_runs_session")
    db.table("session_claims").create({"session_id": str, "run_id": str}, pk="session_id", not_null={"run_id"})
    db.table("loops").create(
        {"id": str, "agent_id": str, "session_id": str, "status": str, "data": str}, pk="id", not_null={"data"}
    )
    db.table("loop_iterations").create({"loop_id": str, "idx": int, "data": str}, pk=("loop_id", "idx"))
    db.table("task_runs").create(
        {"id": str, "task_id": str, "session_id": str, "agent_id": str, "status": str, "created_at": str, "data": str},
        pk="id",
        not_null={"data"},
    )
    db.table("task_runs").create_index(["created_at"], index_name="idx_task_runs_created")


@migration
def m003_retention_indexes(db: Database) -> None:
    # What `purge` looks runs' belongings up by; loops and task runs keep their run id in JSON.
    db.table("runs").create_index(["status", "updated_at"], index_name="idx_runs_status_updated")
    db.table("checkpoints").create_index(["run_id"], index_name="idx_checkpoints_run")
    db.execute("CREATE INDEX idx_loops_run ON loops (json_extract(data, '$.runId'))")
    db.execute("CREATE INDEX idx_task_runs_run ON task_runs (json_extract(data, '$.runId'))")


@migration
def m004_session_state(db: Database) -> None:
    # What a run's caller gave as the session's state (Bread.run(state=...)); read by later runs.
    db.table("sessions").add_column("state", str, not_null_default="{}")


@migration
def m005_mcp_sessions(db: Database) -> None:
    # The MCP bridge's Mcp-Session-Id, known to every process on the file; created_at for a purge.
    db.table("mcp_sessions").create(
        {"id": str, "created_at": str, "data": str}, pk="id", not_null={"created_at", "data"}
    )


@migration
def m006_push_configs(db: Database) -> None:
    # The A2A bridge's push subscriptions: one row per (task, config), its deliveries counted in
    # `delivered`; a sender claims a due row (`claimed_by` until `claimed_until`, epoch seconds).
    db.table("push_configs").create(
        {
            "task_id": str,
            "id": str,
            "mount": str,
            "url": str,
            "token": str,
            "authentication": str,
            "delivered": int,
            "attempts": int,
            "next_attempt_at": float,
            "last_error": str,
            "done": int,
            "claimed_by": str,
            "claimed_until": float,
            "created_at": str,
        },
        pk=("task_id", "id"),
        not_null={"url", "delivered", "attempts", "next_attempt_at", "done"},
    )
    db.table("push_configs").create_index(["done", "next_attempt_at"], index_name="idx_push_configs_due")


@migration
def m007_relay_position(db: Database) -> None:
    # Where a remote agent's relay stands (engine/relay.py), written with each relayed crumb.
    db.table("runs").add_column("remote_run_id", str)
    db.table("runs").add_column("remote_seq", int)


@migration
def m008_mcp_sessions_created(db: Database) -> None:
    # What `purge` deletes MCP sessions by, in its short transaction, however many there are.
    db.table("mcp_sessions").create_index(["created_at"], index_name="idx_mcp_sessions_created")


@migration
def m009_mcp_session_owners(db: Database) -> None:
    # Each MCP session's identity (a key of it) and when it last served: an identity's sessions
    # are capped, oldest (rowid) first, and an idle one expires. One opened before has no owner,
    # so no caller's: its client opens another.
    db.table("mcp_sessions").add_column("owner", str)
    db.table("mcp_sessions").add_column("used_at", str)
    db.execute("UPDATE mcp_sessions SET used_at = created_at")
    db.table("mcp_sessions").create_index(["owner"], index_name="idx_mcp_sessions_owner")
    db.table("mcp_sessions").create_index(["used_at"], index_name="idx_mcp_sessions_used")


@migration
def m010_runs_by_agent_updated(db: Database) -> None:
    # An agent's runs, the last updated first, a page at a time (A2A ListTasks).
    db.table("runs").create_index(["agent_id", "updated_at", "id"], index_name="idx_runs_agent_updated")


@migration
def m011_run_usage(db: Database) -> None:
    # The tokens a run's models used (JSON: bread_sync/usage.py), written as it pauses or ends.
    db.table("runs").add_column("usage", str)


@migration
def m012_run_not_before(db: Database) -> None:
    # A delayed run's time (epoch seconds): no worker claims it before (engine/queued.py).
    db.table("runs").add_column("not_before", float)


@migration
def m013_run_trace(db: Database) -> None:
    # A traced run's span headers (JSON), written as each driving starts: its webhooks carry them.
    db.table("runs").add_column("trace", str)


@migration
def m014_fewer_pages_per_run(db: Database) -> None:
    # A commit writes each page its rows touched, in every index of the row: fewer b-trees, fewer
    # pages and syscalls per run (a run's record and its session's claim are made by every start).
    # idx_runs_status_updated begins with status, so it serves every lookup idx_runs_status did.
    db.execute("DROP INDEX idx_runs_status")
    # A claim in one b-tree keyed by its session (WITHOUT ROWID), not a table and its key's index.
    db.execute(
        "CREATE TABLE session_claims_keyed (session_id TEXT NOT NULL PRIMARY KEY, run_id TEXT NOT NULL) WITHOUT ROWID"
    )
    db.execute("INSERT INTO session_claims_keyed (session_id, run_id) SELECT session_id, run_id FROM session_claims")
    db.execute("DROP TABLE session_claims")
    db.execute("ALTER TABLE session_claims_keyed RENAME TO session_claims")
