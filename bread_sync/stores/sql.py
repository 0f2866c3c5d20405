"""What the SQL stores (SQLite, Postgres) do alike, written once: the column names of the store
contract's records, which their tables spell the same, and the calls whose statements differ
only in the dialect's spelling (:class:`Dialect`). Each store keeps what is its own: appends,
claims, session tags, transactions, pools.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from ..clock import now_iso
from ..crumbs import Frame, dumps
from . import PUSH_SETTLED, RunRow, new_push_config

#: RunRecord keys and their columns, in the order every SELECT of runs lists them.
RUN_COLUMNS = {
    "id": "id",
    "agentId": "agent_id",
    "sessionId": "session_id",
    "status": "status",
    "checkpointId": "checkpoint_id",
    "owner": "owner",
    "leaseUntil": "lease_until",
    "cancelRequested": "cancel_requested",
    "usage": "usage",
    "createdAt": "created_at",
    "updatedAt": "updated_at",
    "remoteRunId": "remote_run_id",
    "remoteSeq": "remote_seq",
    "notBefore": "not_before",
    "trace": "trace",
}

#: A push subscription's keys (as the store contract spells them) and their columns.
PUSH_COLUMNS = {
    "taskId": "task_id",
    "id": "id",
    "mount": "mount",
    "url": "url",
    "token": "token",
    "authentication": "authentication",
    "delivered": "delivered",
    "attempts": "attempts",
    "nextAttemptAt": "next_attempt_at",
    "lastError": "last_error",
    "done": "done",
    "claimedBy": "claimed_by",
    "claimedUntil": "claimed_until",
    "createdAt": "created_at",
}

SELECT_RUNS = f"SELECT {', '.join(RUN_COLUMNS.values())} FROM runs"
INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS.values())}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})"
    " ON CONFLICT (id) DO NOTHING"
)
SELECT_PUSHES = f"SELECT {', '.join(PUSH_COLUMNS.values())} FROM push_configs"
UPSERT_PUSH = (
    f"INSERT INTO push_configs ({', '.join(PUSH_COLUMNS.values())}) VALUES ({', '.join('?' * len(PUSH_COLUMNS))})"
    " ON CONFLICT (task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token,"
    " authentication = excluded.authentication"
)
CLAIM_QUEUED = (
    "UPDATE runs SET status = 'running', owner = ?, lease_until = ?, updated_at = ?"
    " WHERE id = ? AND status = 'queued' AND (not_before IS NULL OR not_before <= ?)"
)
#: What :data:`CLAIM_QUEUED` adds for an agent with a cap on its running runs.
UNDER_CAP = (
    " AND (SELECT count(*) FROM runs AS other WHERE other.agent_id = runs.agent_id AND other.status = 'running') < ?"
)
SELECT_CRUMBS = "SELECT seq, crumb FROM crumbs WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"


#: Run record keys whose values a column keeps as JSON text.
JSON_RUN_KEYS = frozenset({"usage", "trace"})


def run_value(key: str, value: Any) -> Any:
    """A run record's value as its column keeps it."""
    return dumps(value) if key in JSON_RUN_KEYS and value is not None else value


def run_column(key: str) -> str:
    """The column of a run record's key; a TypeError naming the fields for any other key."""
    try:
        return RUN_COLUMNS[key]
    except KeyError:
        raise TypeError(f"a run record has no field {key!r}; its fields are {sorted(RUN_COLUMNS)}") from None


@dataclass(frozen=True)
class Dialect:
    """How one SQL database spells what the shared statements need."""

    #: A statement's parameter.
    mark: str
    #: An equality that holds for two NULLs too.
    same: str
    #: The column that keeps a table's rows in the order they were made.
    order: str
    #: A condition that always holds (a WHERE with no filter).
    true: str
    #: What ``LIMIT ?`` takes for no limit.
    no_limit: Any

    def sql(self, text: str) -> str:
        """``text``, written with ``?`` for each parameter, in this dialect."""
        return _spelled(text, self.mark)


@cache
def _spelled(text: str, mark: str) -> str:
    return text.replace("?", mark)


SQLITE = Dialect(mark="?", same="IS", order="rowid", true="1", no_limit=-1)
POSTGRES = Dialect(mark="%s", same="IS NOT DISTINCT FROM", order="position", true="true", no_limit=None)


class SQLStore:
    """The store calls both SQL stores make alike. A subclass names its :attr:`dialect` and lends
    connections (:meth:`connection`), whose ``execute(sql, params)`` returns a cursor."""

    dialect: ClassVar[Dialect]
    connection: Callable[[], AbstractContextManager[Any]]

    def _execute(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> int:
        """One statement; the rows it changed."""
        with self.connection() as conn:
            return conn.execute(self.dialect.sql(sql), params).rowcount

    def _rows(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.connection() as conn:
            return conn.execute(self.dialect.sql(sql), params).fetchall()

    def _records(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        return [json.loads(text) for (text,) in self._rows(sql, params)]

    def _filters(self, **wanted: Any) -> tuple[str, list[Any]]:
        """A WHERE clause over the given columns whose value is not None."""
        wanted = {column: value for column, value in wanted.items() if value is not None}
        return " AND ".join(f"{column} = ?" for column in wanted) or self.dialect.true, list(wanted.values())

    # crumb log
    def get_crumbs(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Frame]:
        rows = self._rows(SELECT_CRUMBS, [run_id, after, self.dialect.no_limit if limit is None else limit])
        return [Frame(run_id, seq, json.loads(text), wire=text) for seq, text in rows]

    def last_seq(self, run_id: str) -> int:
        return self._rows("SELECT coalesce(max(seq), 0) FROM crumbs WHERE run_id = ?", [run_id])[0][0]

    # runs
    def create_run(self, record: RunRow) -> bool:
        return self._execute(INSERT_RUN, [run_value(key, record.get(key)) for key in RUN_COLUMNS]) == 1

    def get_run(self, run_id: str) -> RunRow | None:
        found = self._runs(f"{SELECT_RUNS} WHERE id = ?", [run_id])
        return found[0] if found else None

    def update_run(self, run_id: str, expect: dict[str, Any] | None = None, **fields: Any) -> bool:
        fields["updatedAt"] = now_iso()
        expect = expect or {}
        sets = ", ".join(f"{run_column(key)} = ?" for key in fields)
        # Not =, so that expecting None (no owner) matches a NULL column.
        checks = "".join(f" AND {run_column(key)} {self.dialect.same} ?" for key in expect)
        sql = f"UPDATE runs SET {sets} WHERE id = ?{checks}"
        values = [run_value(key, value) for key, value in fields.items()]
        return self._execute(sql, [*values, run_id, *expect.values()]) == 1

    def claim_queued(
        self, run_id: str, owner: str, lease_until: float, now: float, most_running: int | None = None
    ) -> bool:
        with self.connection() as conn:
            return self._claim_queued(conn, run_id, owner, lease_until, now, most_running)

    def _claim_queued(
        self, conn: Any, run_id: str, owner: str, lease_until: float, now: float, most_running: int | None
    ) -> bool:
        sql, params = CLAIM_QUEUED, [owner, lease_until, now_iso(), run_id, now]
        if most_running is not None:
            sql, params = sql + UNDER_CAP, [*params, most_running]
        return conn.execute(self.dialect.sql(sql), params).rowcount == 1

    def list_runs(
        self, status: str | None = None, agent: str | None = None, session: str | None = None
    ) -> list[RunRow]:
        where, params = self._filters(status=status, agent_id=agent, session_id=session)
        return self._runs(f"{SELECT_RUNS} WHERE {where} ORDER BY {self.dialect.order}", params)

    def page_runs(
        self,
        agent: str,
        session: str | None = None,
        statuses: list[str] | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[RunRow]:
        if statuses is not None and not statuses:
            return []
        where, params = self._filters(agent_id=agent, session_id=session)
        if statuses is not None:
            where += f" AND status IN ({', '.join('?' * len(statuses))})"
            params += statuses
        if after is not None:
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [after[0], *after]
        return self._runs(f"{SELECT_RUNS} WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?", [*params, limit])

    def cancel_requested(self, owner: str) -> list[str]:
        sql = "SELECT id FROM runs WHERE status = 'running' AND owner = ? AND cancel_requested"
        sql += f" ORDER BY {self.dialect.order}"
        return [run_id for (run_id,) in self._rows(sql, [owner])]

    def _runs(self, sql: str, params: list[Any]) -> list[RunRow]:
        return [_run(row) for row in self._rows(sql, params)]

    # checkpoints
    def get_checkpoint(self, checkpoint_id: str) -> dict[str, Any] | None:
        found = self._rows("SELECT status, data FROM checkpoints WHERE id = ?", [checkpoint_id])
        return {**json.loads(found[0][1]), "status": found[0][0]} if found else None

    def claim_checkpoint(self, checkpoint_id: str, status: str = "resumed") -> bool:
        # One statement: of processes claiming at once, the database lets one update the row.
        sql = "UPDATE checkpoints SET status = ? WHERE id = ? AND status = 'pending'"
        return self._execute(sql, [status, checkpoint_id]) == 1

    # session claims
    def release_session(self, session_id: str, run_id: str) -> None:
        self._execute("DELETE FROM session_claims WHERE session_id = ? AND run_id = ?", [session_id, run_id])

    # loops
    def list_loops(
        self, session: str | None = None, agent: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        where, params = self._filters(session_id=session, agent_id=agent, status=status)
        return self._records(f"SELECT data FROM loops WHERE {where} ORDER BY {self.dialect.order}", params)

    def get_loop(self, loop_id: str) -> dict[str, Any] | None:
        loops = self._records("SELECT data FROM loops WHERE id = ?", [loop_id])
        if not loops:
            return None
        iterations = self._records("SELECT data FROM loop_iterations WHERE loop_id = ? ORDER BY idx", [loop_id])
        return {"loop": loops[0], "iterations": iterations}

    # task runs
    def list_task_runs(
        self,
        task: str | None = None,
        session: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        where, params = self._filters(task_id=task, session_id=session, agent_id=agent, status=status)
        order = f"created_at DESC, {self.dialect.order} DESC"
        sql = f"SELECT data FROM task_runs WHERE {where} ORDER BY {order} LIMIT ?"
        return self._records(sql, [*params, self.dialect.no_limit if limit is None else limit])

    def get_task_run(self, task_run_id: str) -> dict[str, Any] | None:
        found = self._records("SELECT data FROM task_runs WHERE id = ?", [task_run_id])
        return found[0] if found else None

    # MCP sessions
    def create_mcp_session(self, record: dict[str, Any]) -> bool:
        sql = (
            "INSERT INTO mcp_sessions (id, created_at, owner, used_at, data) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING"
        )
        values = [record["id"], record["createdAt"], record["owner"], record["usedAt"], dumps(record)]
        return self._execute(sql, values) == 1

    def get_mcp_session(self, session_id: str) -> dict[str, Any] | None:
        found = self._rows("SELECT data, owner, used_at FROM mcp_sessions WHERE id = ?", [session_id])
        # The columns are the truth: usedAt moves on, and a session older than owners has none.
        return {**json.loads(found[0][0]), "owner": found[0][1], "usedAt": found[0][2]} if found else None

    def delete_mcp_session(self, session_id: str) -> bool:
        return self._execute("DELETE FROM mcp_sessions WHERE id = ?", [session_id]) == 1

    def touch_mcp_session(self, session_id: str, used_at: str) -> bool:
        return self._execute("UPDATE mcp_sessions SET used_at = ? WHERE id = ?", [used_at, session_id]) == 1

    def evict_mcp_sessions(self, owner: str, keep: int) -> int:
        order = self.dialect.order
        newest = f"SELECT id FROM mcp_sessions WHERE owner = ? ORDER BY {order} DESC LIMIT ?"
        return self._execute(f"DELETE FROM mcp_sessions WHERE owner = ? AND id NOT IN ({newest})", [owner, owner, keep])

    def expire_mcp_sessions(self, used_before: str) -> int:
        return self._execute("DELETE FROM mcp_sessions WHERE used_at < ?", [used_before])

    # push subscriptions
    def save_push_config(self, config: dict[str, Any]) -> None:
        row = new_push_config(config, time.time())
        row["authentication"] = None if row["authentication"] is None else dumps(row["authentication"])
        self._execute(UPSERT_PUSH, [row[key] for key in PUSH_COLUMNS])

    def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        sql = f"{SELECT_PUSHES} WHERE task_id = ? ORDER BY {self.dialect.order}"
        return [push_row(row) for row in self._rows(sql, [task_id])]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return self._execute("DELETE FROM push_configs WHERE task_id = ? AND id = ?", [task_id, config_id]) == 1

    def settle_push(self, task_id: str, config_id: str, owner: str, **fields: Any) -> bool:
        unknown = set(fields) - PUSH_SETTLED
        if unknown:
            raise ValueError(f"settle_push cannot set {sorted(unknown)}")
        sets = "".join(f"{PUSH_COLUMNS[key]} = ?, " for key in fields)
        sql = (
            f"UPDATE push_configs SET {sets}claimed_by = NULL, claimed_until = NULL"
            " WHERE task_id = ? AND id = ? AND claimed_by = ?"
        )
        return self._execute(sql, [*fields.values(), task_id, config_id, owner]) == 1

    def hasten_push(self, task_id: str, now: float) -> bool:
        sql = (
            "UPDATE push_configs SET next_attempt_at = ? WHERE task_id = ? AND NOT done AND attempts = 0"
            " AND claimed_by IS NULL AND next_attempt_at > ?"
        )
        return self._execute(sql, [now, task_id, now]) > 0


def _run(row: tuple[Any, ...]) -> RunRow:
    record = dict(zip(RUN_COLUMNS, row, strict=True))
    record["cancelRequested"] = bool(record["cancelRequested"])  # SQLite keeps an integer
    for key in JSON_RUN_KEYS:
        if record[key] is not None:
            record[key] = json.loads(record[key])
    if record["remoteRunId"] is None:  # not a relay: its record has no relay fields, as it was made
        del record["remoteRunId"], record["remoteSeq"]
    if record["notBefore"] is None:  # not delayed: as it was made
        del record["notBefore"]
    if record["trace"] is None:  # not traced (stores.TRACE_FIELD)
        del record["trace"]
    return record


def push_row(row: tuple[Any, ...]) -> dict[str, Any]:
    config = dict(zip(PUSH_COLUMNS, row, strict=True))
    config["done"] = bool(config["done"])  # SQLite keeps an integer
    config["authentication"] = None if config["authentication"] is None else json.loads(config["authentication"])
    return config
