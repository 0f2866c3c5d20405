"""Retention: deleting what finished long ago, as ``bread-sync gc`` does.

``Config.retention_days`` (``BREAD_RETENTION_DAYS``) says how long finished runs are kept. A
collection deletes from the store every finished run last updated before the cutoff, with its
crumb log, checkpoints, loops and task runs, and the MCP sessions opened before it (see
:meth:`bread_sync.stores.Retention.purge`), and
from the blob store the files stored before the cutoff, except those a running or paused run
announced or was given as input. A running or paused run is never touched. It may run beside a live server (cron):
the store deletes in short transactions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .clock import iso_days_ago
from .crumbs import AGENT_RUN_START, FILE_GENERATED
from .errors import NOT_SUPPORTED, BreadError
from .files import file_refs
from .stores import can_purge, has_crumb_log

if TYPE_CHECKING:
    from .runtime import Bread

SECONDS_PER_DAY = 86_400


def collect_garbage(bread: Bread, older_than_days: float, dry_run: bool = False) -> dict[str, Any]:
    """Delete what finished more than ``older_than_days`` ago (with ``dry_run``, only count it).

    Returns ``{"before": <ISO cutoff>, "dryRun": ..., "deleted": {kind: count}}``, the kinds
    being runs, crumbs, checkpoints, loops, taskRuns, mcpSessions and files."""
    if not older_than_days >= 0:  # also refuses nan
        raise ValueError(f"older_than_days must be 0 or more, not {older_than_days}")
    store = bread.store
    if not can_purge(store):
        raise BreadError(NOT_SUPPORTED, f"the store {type(store).__name__} has no purge(): it cannot expire runs")
    before = iso_days_ago(older_than_days)
    in_use = _files_in_use(bread)
    deleted = store.purge(before, dry_run=dry_run)
    deleted["files"] = _purge_files(bread, time.time() - older_than_days * SECONDS_PER_DAY, in_use, dry_run)
    return {"before": before, "dryRun": dry_run, "deleted": deleted}


def _files_in_use(bread: Bread) -> set[str]:
    store = bread.store
    if not has_crumb_log(store):
        return set()
    unfinished = store.list_runs(status="running") + store.list_runs(status="paused")
    return {uri for record in unfinished for frame in store.get_crumbs(record["id"]) for uri in _files_of(frame)}


def _files_of(frame: Any) -> list[str]:
    """The files a crumb names: a generated one, or those its run's input references."""
    if frame.type == FILE_GENERATED:
        return [frame.crumb["uri"]]
    if frame.type == AGENT_RUN_START:
        return [ref.get("uri") for ref in file_refs(frame.crumb.get("input"))]
    return []


def _purge_files(bread: Bread, before: float, in_use: set[str], dry_run: bool) -> int:
    purge = getattr(bread.blob_store, "purge", None)
    if purge is None:
        return 0  # no blob store, or one that keeps its files forever
    return purge(before, keep=in_use, dry_run=dry_run)
