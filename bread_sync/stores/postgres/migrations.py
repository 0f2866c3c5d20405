"""The Postgres store's schema, as numbered migrations applied in order and recorded by name.

To change the schema, add a ``@migration`` function at the end named ``m<NNN>_<what>``; never
edit or reorder one that has shipped, since databases in the field recorded it as applied.
Every migration runs in the one transaction of :func:`migrate`, behind an advisory lock, so
processes starting together against a fresh database apply each one once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import Connection

from ...clock import now_iso

MIGRATIONS_TABLE = "bread_migrations"
#: The advisory lock key that serialises migrations (any fixed bigint: "bread" in ASCII).
MIGRATION_LOCK = 0x6272656164
MIGRATIONS: list[Callable[[Connection[Any]], None]] = []


def migration(fn: Callable[[Connection[Any]], None]) -> Callable[[Connection[Any]], None]:
    MIGRATIONS.append(fn)
    return fn


def migrate(conn: Connection[Any]) -> list[str]:
    """Apply the migrations the database of ``conn`` lacks, in order, in one transaction; the
    names applied. A second process migrating at the same time waits for the lock, then finds
    nothing left to do."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE}"
            " (position serial, name text PRIMARY KEY, applied_at text NOT NULL)"
        )
        done = set(applied(conn))
        pending = [fn for fn in MIGRATIONS if fn.__name__ not in done]
        for fn in pending:
            fn(conn)
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (%s, %s)", [fn.__name__, now_iso()])
    return [fn.__name__ for fn in pending]


def applied(conn: Connection[Any]) -> list[str]:
    table = conn.execute("SELECT to_regclass(%s)", [MIGRATIONS_TABLE]).fetchone()  # one row, None: no table
    if table is None or table[0] is None:
        return []
    return [name for (name,) in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY position")]


@migration
def m001_initial(conn: Connection[Any]) -> None:
    # Each table keeps the order rows were first written in (``position``), as list calls return it.
    conn.execute(
        """
        CREATE TABLE crumbs (
            run_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, crumb text NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE runs (
            position bigint GENERATED ALWAYS AS IDENTITY, id text PRIMARY KEY, agent_id text,
            session_id text, status text NOT NULL, checkpoint_id text, owner text,
            lease_until double precision, cancel_requested boolean NOT NULL DEFAULT false,
            created_at text, updated_at text
        );
        CREATE INDEX idx_runs_status_updated ON runs (status, updated_at);
        CREATE INDEX idx_runs_session ON runs (session_id);
        CREATE INDEX idx_runs_owner ON runs (owner) WHERE cancel_requested;
        CREATE TABLE checkpoints (
            id text PRIMARY KEY, run_id text, status text NOT NULL, created_at text, data text NOT NULL
        );
        CREATE INDEX idx_checkpoints_run ON checkpoints (run_id);
        CREATE TABLE sessions (
            position bigint GENERATED ALWAYS AS IDENTITY, id text PRIMARY KEY,
            tags jsonb NOT NULL DEFAULT '{}', created_at text NOT NULL, updated_at text NOT NULL
        );
        CREATE TABLE session_messages (
            position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL, message text NOT NULL
        );
        CREATE INDEX idx_session_messages_session ON session_messages (session_id, position);
        CREATE TABLE session_claims (session_id text PRIMARY KEY, run_id text NOT NULL);
        CREATE TABLE loops (
            position bigint GENERATED ALWAYS AS IDENTITY, id text PRIMARY KEY, agent_id text,
            session_id text, status text, run_id text, data text NOT NULL
        );
        CREATE INDEX idx_loops_run ON loops (run_id);
        CREATE TABLE loop_iterations (
            loop_id text NOT NULL, idx integer NOT NULL, data text NOT NULL, PRIMARY KEY (loop_id, idx)
        );
        CREATE TABLE task_runs (
            position bigint GENERATED ALWAYS AS IDENTITY, id text PRIMARY KEY, task_id text,
            session_id text, agent_id text, status text, run_id text, created_at text, data text NOT NULL
        );
        CREATE INDEX idx_task_runs_created ON task_runs (created_at);
        CREATE INDEX idx_task_runs_run ON task_runs (run_id);
        """
    )
    # The one way crumbs are written: a run's appends take turns on an advisory lock, so the
    # check that a batch starts after the run's last seq and its insert are one step. The log
    # is append-only, as the other stores have it: a seq at or below the last is refused even
    # when free, so no writer can fill a gap late (a tail that read past it would never see it).
    # Each append notifies ``bread_crumbs`` with its run id, for followers in other processes.
    conn.execute(
        """
        CREATE FUNCTION bread_append_crumbs(p_run text, p_seqs bigint[], p_types text[], p_crumbs text[])
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended(p_run, 0));
            -- A statement of its own, after the lock: it sees what the run's last writer committed.
            INSERT INTO crumbs (run_id, seq, type, crumb)
                SELECT p_run, s, t, c FROM unnest(p_seqs, p_types, p_crumbs) AS u(s, t, c)
                WHERE NOT EXISTS (SELECT FROM crumbs WHERE run_id = p_run AND seq >= p_seqs[1]);
            IF NOT FOUND THEN
                RAISE EXCEPTION 'run %: seq % is at or below the last one written', p_run, p_seqs[1]
                    USING ERRCODE = 'unique_violation';
            END IF;
            PERFORM pg_notify('bread_crumbs', p_run);
        END
        $$
        """
    )


@migration
def m002_session_state(conn: Connection[Any]) -> None:
    # What a run's caller gave as the session's state (Bread.run(state=...)), as its JSON text.
    conn.execute("ALTER TABLE sessions ADD COLUMN state text NOT NULL DEFAULT '{}'")


@migration
def m003_mcp_sessions(conn: Connection[Any]) -> None:
    # The MCP bridge's Mcp-Session-Id, known to every process on the database.
    conn.execute("CREATE TABLE mcp_sessions (id text PRIMARY KEY, created_at text NOT NULL, data text NOT NULL)")


@migration
def m004_push_configs(conn: Connection[Any]) -> None:
    # The A2A bridge's push subscriptions: one row per (task, config), its deliveries counted in
    # `delivered`; a sender claims a due row (`claimed_by` until `claimed_until`, epoch seconds).
    conn.execute(
        """
        CREATE TABLE push_configs (
            position bigint GENERATED ALWAYS AS IDENTITY, task_id text NOT NULL, id text NOT NULL, mount text,
            url text NOT NULL, token text, authentication text, delivered integer NOT NULL,
            attempts integer NOT NULL, next_attempt_at double precision NOT NULL, last_error text,
            done boolean NOT NULL, claimed_by text, claimed_until double precision, created_at text,
            PRIMARY KEY (task_id, id)
        );
        CREATE INDEX idx_push_configs_due ON push_configs (next_attempt_at) WHERE NOT done;
        """
    )


@migration
def m005_relay_position(conn: Connection[Any]) -> None:
    # Where a remote agent's relay stands (engine/relay.py), written with each relayed crumb.
    conn.execute("ALTER TABLE runs ADD COLUMN remote_run_id text, ADD COLUMN remote_seq bigint")


@migration
def m006_append_one_crumb(conn: Connection[Any]) -> None:
    # bread_append_crumbs for the common append of one crumb: scalars, not arrays, so Postgres
    # parses no array literals and unnests nothing (about 10 us of its CPU per append). The same
    # lock, guard and notification as bread_append_crumbs.
    conn.execute(
        """
        CREATE FUNCTION bread_append_crumb(p_run text, p_seq bigint, p_type text, p_crumb text)
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended(p_run, 0));
            INSERT INTO crumbs (run_id, seq, type, crumb)
                SELECT p_run, p_seq, p_type, p_crumb
                WHERE NOT EXISTS (SELECT FROM crumbs WHERE run_id = p_run AND seq >= p_seq);
            IF NOT FOUND THEN
                RAISE EXCEPTION 'run %: seq % is at or below the last one written', p_run, p_seq
                    USING ERRCODE = 'unique_violation';
            END IF;
            PERFORM pg_notify('bread_crumbs', p_run);
        END
        $$
        """
    )


@migration
def m007_mcp_sessions_created(conn: Connection[Any]) -> None:
    # What `purge` deletes MCP sessions by, in its short transaction, however many there are.
    conn.execute("CREATE INDEX idx_mcp_sessions_created ON mcp_sessions (created_at)")


@migration
def m008_mcp_session_owners(conn: Connection[Any]) -> None:
    # Each MCP session's identity (a key of it) and when it last served: an identity's sessions
    # are capped, oldest (position) first, and an idle one expires. One opened before has no
    # owner, so no caller's: its client opens another.
    conn.execute(
        """
        ALTER TABLE mcp_sessions ADD COLUMN position bigint GENERATED ALWAYS AS IDENTITY,
            ADD COLUMN owner text, ADD COLUMN used_at text;
        UPDATE mcp_sessions SET used_at = created_at;
        CREATE INDEX idx_mcp_sessions_owner ON mcp_sessions (owner, position);
        CREATE INDEX idx_mcp_sessions_used ON mcp_sessions (used_at);
        """
    )


@migration
def m009_runs_by_agent_updated(conn: Connection[Any]) -> None:
    # An agent's runs, the last updated first, a page at a time (A2A ListTasks).
    conn.execute("CREATE INDEX idx_runs_agent_updated ON runs (agent_id, updated_at, id)")


@migration
def m010_run_usage(conn: Connection[Any]) -> None:
    # The tokens a run's models used (JSON: bread_sync/usage.py), written as it pauses or ends.
    conn.execute("ALTER TABLE runs ADD COLUMN usage text")


@migration
def m011_run_not_before(conn: Connection[Any]) -> None:
    # A delayed run's time (epoch seconds): no worker claims it before (engine/queued.py).
    conn.execute("ALTER TABLE runs ADD COLUMN not_before double precision")


@migration
def m012_run_trace(conn: Connection[Any]) -> None:
    # A traced run's span headers (JSON), written as each driving starts: its webhooks carry them.
    conn.execute("ALTER TABLE runs ADD COLUMN trace text")
