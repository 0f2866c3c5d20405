"""The SQLite store's purge (see :meth:`bread_sync.stores.Retention.purge`), in batches of runs,
each batch one short transaction, so a purge beside a live server never holds the lock long."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlite_utils import Database

from .. import FINISHED, PURGED
from .migrations import immediate

#: Finished runs, as a WHERE clause over ``runs`` and its parameters after the cutoff.
PURGEABLE_RUNS = f"status IN ({', '.join('?' * len(FINISHED))}) AND updated_at < ?"
#: Runs deleted per transaction: a purge never holds the write lock for long.
PURGE_BATCH = 200
#: A purged run and what goes with it: (kind counted, table, WHERE over the batch's ids), in
#: an order that deletes loop iterations while their loops still name the run.
BELONGINGS = (
    ("crumbs", "crumbs", "run_id IN ({ids})"),
    ("checkpoints", "checkpoints", "run_id IN ({ids}) AND status != 'pending'"),
    (None, "loop_iterations", "loop_id IN (SELECT id FROM loops WHERE json_extract(data, '$.runId') IN ({ids}))"),
    ("loops", "loops", "json_extract(data, '$.runId') IN ({ids})"),
    ("taskRuns", "task_runs", "json_extract(data, '$.runId') IN ({ids})"),
    ("runs", "runs", "id IN ({ids})"),
)
#: Used or void checkpoints created before the cutoff, but for those of purged runs (counted there).
SPENT_CHECKPOINTS = (
    "status != 'pending' AND json_extract(data, '$.createdAt') < ?"
    f" AND coalesce(run_id, '') NOT IN (SELECT id FROM runs WHERE {PURGEABLE_RUNS})"
)
ORPHAN_TASK_RUNS = "json_extract(data, '$.runId') IS NULL AND status != 'running' AND created_at < ?"


def purge(
    connection: Callable[[], AbstractContextManager[Database]], before: str, dry_run: bool = False
) -> dict[str, int]:
    """Purge through ``connection()``, the store's way to borrow a pooled connection."""
    counts = dict.fromkeys(PURGED, 0)
    with connection() as db:
        sql = f"SELECT id FROM runs WHERE {PURGEABLE_RUNS} ORDER BY rowid"
        run_ids = [run_id for (run_id,) in db.execute(sql, [*sorted(FINISHED), before])]
    for start in range(0, len(run_ids), PURGE_BATCH):
        with connection() as db, immediate(db):
            _purge_runs(db, run_ids[start : start + PURGE_BATCH], counts, dry_run)
    with connection() as db, immediate(db):
        spent = [before, *sorted(FINISHED), before]
        counts["checkpoints"] += _remove(db, "checkpoints", SPENT_CHECKPOINTS, spent, dry_run)
        counts["taskRuns"] += _remove(db, "task_runs", ORPHAN_TASK_RUNS, [before], dry_run)
        counts["mcpSessions"] += _remove(db, "mcp_sessions", "created_at < ?", [before], dry_run)
    return counts


def _purge_runs(db: Database, run_ids: list[str], counts: dict[str, int], dry_run: bool) -> None:
    marks = ", ".join("?" * len(run_ids))
    for kind, table, where in BELONGINGS:
        removed = _remove(db, table, where.format(ids=marks), run_ids, dry_run)
        if kind is not None:
            counts[kind] += removed


def _remove(db: Database, table: str, where: str, params: list[Any], dry_run: bool) -> int:
    """Delete the rows of ``table`` that match, or with ``dry_run`` count them."""
    if dry_run:
        return db.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
    return db.execute(f"DELETE FROM {table} WHERE {where}", params).rowcount
