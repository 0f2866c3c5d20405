"""What becomes of a run whose process died: it is interrupted, or its relay is taken over.

A running run's owner renews its lease (engine/lease.py); when the lease lapses, or the owner is
a process of this host that no longer exists (engine/owners.py), whoever notices first (the
start-up sweep, a tail, the session guard, a cancel) ends the run with ``agent:error``
``RUN_INTERRUPTED``, one conditional update deciding among processes that notice at once. A
remote agent's relay is not ended but taken over (:func:`adopt`): the remote run goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .. import crumbs as c
from ..errors import RUN_CANCELLED, RUN_INTERRUPTED, SEQ_CONFLICT, BreadError
from . import Runtime, owners
from .emitter import Emitter
from .execution import drain
from .lease import lease_end
from .loop_run import close_loops
from .opening import open_taken_over
from .relay import quietly

log = logging.getLogger("bread_sync")


def owner_gone(record: dict[str, Any]) -> bool:
    """Whether a running run's owner is gone: its lease lapsed, or it was a process of this
    host that no longer exists (known at once, see engine/owners.py)."""
    return record["leaseUntil"] < time.time() or owners.is_dead_local(record["owner"])


def sweep(runtime: Runtime) -> int:
    """Mark every running run whose owner is gone as interrupted; how many were."""
    running = runtime.store.list_runs(status="running")
    return sum(interrupt(runtime, record) for record in running if owner_gone(record))


def interrupt(runtime: Runtime, record: dict[str, Any]) -> bool:
    """End a run whose owner died with ``agent:error`` ``RUN_INTERRUPTED``; False when the
    record changed since it was read (another process marked it, or its owner renewed), or
    when it was a remote agent's relay, which this process took over instead (:func:`adopt`)."""
    if _relay_of_the_dead(runtime, record):
        adopt(runtime, record)
        return False
    if not runtime.store.update_run(record["id"], expect=_as_read(record), status="interrupted", owner=None):
        return False
    error = BreadError(RUN_INTERRUPTED, "the process running this run stopped")
    _append_final(runtime, record["id"], c.error_crumb(record["id"], error))
    close_loops(runtime.store, record["id"], "interrupted")
    return True


def adopt(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Take over the relay of a remote agent's run whose owner died: claim the run (one process
    wins), and go on relaying the remote run after the position its record holds, under the
    same run id and seqs, in a thread of this process. A remote run that is gone ends the local
    one with ``RUN_INTERRUPTED``. False when another process claimed it first."""
    run_id, store = record["id"], runtime.store
    if not store.update_run(run_id, expect=_as_read(record), owner=runtime.owner, leaseUntil=lease_end(runtime.config)):
        return False
    try:
        gone = runtime.remote_agents[record["agentId"]].run_status(record["remoteRunId"]) is None
    except BreadError:
        gone = False  # not answering now: the relay keeps trying for a while
    if gone:
        if (claimed := store.get_run(run_id)) is not None:
            interrupt(runtime, claimed)
        return True
    opened = open_taken_over(runtime, record)
    threading.Thread(target=drain, args=opened[:2], name=f"bread-relay-{run_id}", daemon=True).start()
    log.warning("run %s: its owner is gone; this process took over its relay", run_id)
    return True


def cancel_paused(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Cancel a run waiting for a human: its checkpoint voided (one process wins), the remote
    run of a relay cancelled, the run ended with ``RUN_CANCELLED``."""
    checkpoint_id = record["checkpointId"]
    if not checkpoint_id or not runtime.store.claim_checkpoint(checkpoint_id, status="void"):
        return False
    runtime.store.update_run(record["id"], status="cancelled", checkpointId=None)
    if record["agentId"] in runtime.remote_agents and record.get("remoteRunId"):
        quietly(runtime.remote_agents[record["agentId"]].cancel, record["remoteRunId"])
    error = BreadError(RUN_CANCELLED, "the run was cancelled while waiting for a human")
    _append_final(runtime, record["id"], c.error_crumb(record["id"], error))
    close_loops(runtime.store, record["id"], "cancelled")
    return True


def _as_read(record: dict[str, Any]) -> dict[str, Any]:
    """The conditions of an update that holds only if nobody changed the record since."""
    return {"status": "running", "owner": record["owner"], "leaseUntil": record["leaseUntil"]}


def _relay_of_the_dead(runtime: Runtime, record: dict[str, Any]) -> bool:
    return (
        record["agentId"] in runtime.remote_agents
        and bool(record.get("remoteRunId"))
        and record["owner"] != runtime.owner
        and owner_gone(record)
    )


def _append_final(runtime: Runtime, run_id: str, crumb: dict[str, Any]) -> None:
    """The terminal crumb of a run no process drives, through a choke point of its own."""
    try:
        Emitter(run_id, runtime.store, runtime.publish, next_seq=runtime.store.last_seq(run_id) + 1).emit(crumb)
    except BreadError as exc:
        if exc.code != SEQ_CONFLICT:
            raise
        log.warning("run %s: a late writer took the final seq; its log ends as that writer left it", run_id)
