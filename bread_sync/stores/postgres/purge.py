"""The Postgres store's purge (see :meth:`bread_sync.stores.Retention.purge`), in batches of
runs, each batch one short transaction, so a purge beside live servers holds no lock for long."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .. import FINISHED, PURGED

#: Finished runs last updated before the cutoff, as a WHERE clause over ``runs``.
PURGEABLE_RUNS = "status = ANY(%(finished)s) AND updated_at < %(before)s"
#: Runs deleted per transaction.
PURGE_BATCH = 200
#: A purged run and what goes with it: (kind counted, table, WHERE over the batch's ``ids``),
#: loop iterations while their loops still name the run.
BELONGINGS = (
    ("crumbs", "crumbs", "run_id = ANY(%(ids)s)"),
    ("checkpoints", "checkpoints", "run_id = ANY(%(ids)s) AND status != 'pending'"),
    (None, "loop_iterations", "loop_id IN (SELECT id FROM loops WHERE run_id = ANY(%(ids)s))"),
    ("loops", "loops", "run_id = ANY(%(ids)s)"),
    ("taskRuns", "task_runs", "run_id = ANY(%(ids)s)"),
    ("runs", "runs", "id = ANY(%(ids)s)"),
)
#: Used or void checkpoints created before the cutoff, but for those of purged runs (counted there).
SPENT_CHECKPOINTS = (
    "status != 'pending' AND created_at < %(before)s"
    f" AND coalesce(run_id, '') NOT IN (SELECT id FROM runs WHERE {PURGEABLE_RUNS})"
)
ORPHAN_TASK_RUNS = "run_id IS NULL AND status != 'running' AND created_at < %(before)s"


def purge(connection: Callable[[], AbstractContextManager[Any]], before: str, dry_run: bool = False) -> dict[str, int]:
    """Purge through ``connection()``, the store's way to borrow a pooled connection."""
    counts = dict.fromkeys(PURGED, 0)
    params: dict[str, Any] = {"finished": sorted(FINISHED), "before": before}
    with connection() as conn:
        sql = f"SELECT id FROM runs WHERE {PURGEABLE_RUNS} ORDER BY position"
        run_ids = [run_id for (run_id,) in conn.execute(sql, params)]
    for start in range(0, len(run_ids), PURGE_BATCH):
        with connection() as conn, conn.transaction():
            ids = {**params, "ids": run_ids[start : start + PURGE_BATCH]}
            for kind, table, where in BELONGINGS:
                removed = _remove(conn, table, where, ids, dry_run)
                if kind is not None:
                    counts[kind] += removed
    with connection() as conn, conn.transaction():
        counts["checkpoints"] += _remove(conn, "checkpoints", SPENT_CHECKPOINTS, params, dry_run)
        counts["taskRuns"] += _remove(conn, "task_runs", ORPHAN_TASK_RUNS, params, dry_run)
        counts["mcpSessions"] += _remove(conn, "mcp_sessions", "created_at < %(before)s", params, dry_run)
    return counts


def _remove(conn: Any, table: str, where: str, params: dict[str, Any], dry_run: bool) -> int:
    """Delete the rows of ``table`` that match, or with ``dry_run`` count them."""
    if dry_run:
        return conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
    return conn.execute(f"DELETE FROM {table} WHERE {where}", params).rowcount
