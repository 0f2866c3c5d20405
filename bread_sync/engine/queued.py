"""A queued run: claimed by one process, then driven from its opening crumb to its end or pause.

A queueing executor (executors/huey.py) leaves a run ``queued`` once its opening is logged
(execution.py): its start crumb, or a resume's ``human:resumed``, the last crumb of its log. The
process that takes the run from the queue claims it by compare-and-set (``queued`` to
``running``, with its owner and a lease): one winner, however often the message is delivered.
From then on the run is like any other: its lease renewed, its cancel heard, carried on if this
process dies (recovery.py). A run left queued past a lease (an enqueue lost) is submitted again
by :func:`requeue_stale`; a cancel ends a queued run before it starts (:func:`cancel_queued`).

A run waits in the queue, not in a process, for what it may not have yet: its time (a delayed
run's ``notBefore``), a place under its agent's ``max_concurrent_runs`` (both part of the
claim's compare-and-set) and its session (taken after the claim, by the first of the session's
waiting runs, so they go in the order they were queued). Without it the run goes back to
``queued`` and is submitted again for later (:func:`_later`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from .. import crumbs as c
from ..errors import RUN_CANCELLED, BreadError
from ..logs import RunLabels
from . import Runtime
from .execution import Execution, drain
from .lease import lease_end
from .opening import Opened, cap_of, new_context, observed, root_from_start
from .recovery import end_claimed

log = logging.getLogger("bread_sync")

#: How long a run waiting for its session or its agent's cap stays in the queue before its next try.
RETRY_SECONDS = 1.0


def drive_queued(runtime: Runtime, run_id: str) -> bool:
    """Claim the queued run ``run_id`` and drive it here to its end or pause; False when it is
    not queued any more (another process claimed it, or it was cancelled)."""
    opened = open_queued(runtime, run_id)
    if opened is None:
        return False
    drain(opened.labels, opened.crumbs)
    return True


def open_queued(runtime: Runtime, run_id: str) -> Opened | None:
    """Claim the queued run and open it from its opening crumb; None when another claimed it."""
    store = runtime.store
    record = store.get_run(run_id)
    if record is None or record["status"] != "queued":
        return None
    cap = cap_of(runtime, record["agentId"])
    if not store.claim_queued(run_id, runtime.owner, lease_end(runtime.config), time.time(), cap):
        _later(runtime, record)
        return None
    last = store.last_seq(run_id)
    (opening,) = store.get_crumbs(run_id, after=last - 1, limit=1)
    ctx = new_context(runtime, run_id, record["sessionId"], next_seq=last + 1)
    try:
        root, start, checkpoint = _driven_from(ctx, opening.crumb)
    except BreadError as exc:  # its agent or pipeline is no longer configured here
        _fail(runtime, run_id, exc)
        return None
    if root.claims_session and not _takes_session(runtime, record):
        _back_in_queue(runtime, record)
        return None
    # Traced and counted here, where it is driven: the web tier's driving ended when it queued it.
    crumbs = observed(ctx, root.definition_id, Execution(ctx, root), start, checkpoint)
    return Opened(RunLabels(run_id, record["sessionId"], root.definition_id, ctx.trace), crumbs, last + 1)


def _driven_from(ctx: Any, opening: dict[str, Any]) -> tuple[Any, Any, dict[str, Any] | None]:
    """The run's root activity, how its execution goes on after its opening crumb, and the
    checkpoint it resumes from (None for a run queued at its start)."""
    if opening["type"] == c.HUMAN_RESUMED:
        checkpoint = ctx.runtime.store.get_checkpoint(opening["checkpointId"])
        root = ctx.restore(checkpoint["stack"])
        resume = (checkpoint, opening["response"])
        return root, lambda execution: execution.start(resume=resume, resumed=True), checkpoint
    root = root_from_start(ctx, opening)
    return root, lambda execution: execution.start(carry_on=True), None  # not begun: it runs from its start


def _takes_session(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Whether the run holds its session now (held from its opening, or taken now), unless an
    older run of the session waits in the queue, due: that one goes first, and the session is let
    go for it."""
    session_id, run_id = record["sessionId"], record["id"]
    if not runtime.sessions.take(session_id, run_id):
        return False
    now = time.time()
    waiting = runtime.store.list_runs(status="queued", session=session_id)
    if any(r["createdAt"] < record["createdAt"] and (r.get("notBefore") or 0.0) <= now for r in waiting):
        runtime.sessions.release(session_id, run_id)
        return False
    return True


def _back_in_queue(runtime: Runtime, record: dict[str, Any]) -> None:
    """Give the claimed run back to the queue, for a later try."""
    mine = {"status": "running", "owner": runtime.owner}
    if runtime.store.update_run(record["id"], expect=mine, status="queued", owner=None, leaseUntil=0.0):
        runtime.executor.submit(runtime, record["id"], RETRY_SECONDS)


def _later(runtime: Runtime, record: dict[str, Any]) -> None:
    """Submit a run not claimed here again for when it may be: at its time, or after a wait for
    its agent's cap. Of the messages of one run that fail the claim at once, one does (by
    compare-and-set on the record as read), so they do not multiply; none when another process
    claimed or cancelled it."""
    as_read = {"status": "queued", "updatedAt": record["updatedAt"]}
    if not runtime.store.update_run(record["id"], expect=as_read, owner=None):
        return
    due = (record.get("notBefore") or 0.0) - time.time()
    runtime.executor.submit(runtime, record["id"], max(due, RETRY_SECONDS))


def _fail(runtime: Runtime, run_id: str, error: BreadError) -> None:
    log.warning("queued run %s cannot be driven here (%s); it fails", run_id, error.message)
    end_claimed(runtime, run_id, "failed", error)  # claimed by claim_queued, as a recovery claims


def cancel_queued(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Cancel a run no worker has claimed yet: it never starts. This process claims it as a
    worker would (one process wins against the workers' claim), with its cancel recorded, then
    ends it with ``RUN_CANCELLED`` after its opening, its record marked in that crumb's
    transaction (recovery.end_claimed): a process dying in between leaves it to a sweep, which
    ends it cancelled."""
    run_id, lease = record["id"], lease_end(runtime.config)
    claim = {"status": "running", "owner": runtime.owner, "leaseUntil": lease, "cancelRequested": True}
    if not runtime.store.update_run(run_id, expect={"status": "queued"}, **claim):
        return False
    end_claimed(runtime, run_id, "cancelled", BreadError(RUN_CANCELLED, "the run was cancelled before it started"))
    runtime.sessions.release(record["sessionId"], run_id)
    return True


def requeue_stale(runtime: Runtime) -> int:
    """Submit again each run queued for longer than a lease (its enqueue lost, or its message
    taken by a worker that stopped); how many. One sweeper wins each, by compare-and-set on the
    record's ``updatedAt``, which the submission moves on."""
    if not runtime.executor.queues:
        return 0
    bound = time.time() - runtime.config.lease_seconds
    stale = [r for r in runtime.store.list_runs(status="queued") if _waited_since(r) < bound]
    resubmitted = 0
    for record in stale:
        as_read = {"status": "queued", "updatedAt": record["updatedAt"]}
        if runtime.store.update_run(record["id"], expect=as_read, owner=None):
            runtime.executor.submit(runtime, record["id"])
            resubmitted += 1
    return resubmitted


def _waited_since(record: dict[str, Any]) -> float:
    """Since when a queued run waits for a worker: its last submission, or its time if later."""
    return max(datetime.fromisoformat(record["updatedAt"]).timestamp(), record.get("notBefore") or 0.0)
