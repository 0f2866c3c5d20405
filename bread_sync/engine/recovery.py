"""What becomes of a run whose process died: it is carried on, or its relay taken over, here.

A running run's owner renews its lease (engine/lease.py); when the lease lapses, or the owner is
a process of this host that no longer exists (engine/owners.py), or the owner handed it over as
it shut down, whoever notices first (the sweeps, a tail, the session guard, a cancel) claims
it, one conditional update deciding among processes that notice at once, and :func:`recover`
s it: the run goes on in this process, under its id, from its last durable crumb (its progress,
see execution.py), after an ``agent:run:continued`` crumb; a remote agent's relay goes on
relaying the remote run (:func:`adopt`). A run that cannot be carried on (its agent opts out,
a kind that cannot, or continued ``max_continuations`` times with no durable crumb between)
ends with ``agent:error`` ``RUN_INTERRUPTED`` (:func:`interrupt`); one whose cancel was recorded
ends ``RUN_CANCELLED`` (:func:`cancel_orphaned`). A process ends a run it does not drive only
after claiming it, and writes the record's end in its terminal crumb's transaction
(:func:`end_claimed`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from .. import crumbs as c
from ..errors import RUN_CANCELLED, RUN_INTERRUPTED, SEQ_CONFLICT, BreadError
from . import Runtime, owners
from .emitter import Emitter
from .execution import drain
from .lease import lease_end
from .loop_run import close_loops
from .opening import Opened, continuation_root, new_context, open_continued, open_taken_over
from .relay import quietly

log = logging.getLogger("bread_sync")

#: How often a claimed run's end is logged again after a live writer took its seq meanwhile.
END_ATTEMPTS = 3
_INTERRUPTED = BreadError(RUN_INTERRUPTED, "the process running this run stopped")


def owner_gone(record: dict[str, Any]) -> bool:
    """Whether a running run's owner is gone: its lease lapsed, or it was a process of this
    host that no longer exists (known at once, see engine/owners.py)."""
    return record["leaseUntil"] < time.time() or owners.is_dead_local(record["owner"])


def sweep(runtime: Runtime) -> int:
    """Recover every running run whose owner is gone; how many this process did."""
    running = runtime.store.list_runs(status="running")
    return sum(recover(runtime, record) for record in running if orphaned(runtime, record))


def orphaned(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Whether a running run's owner is gone, unless the owner is this very runtime driving it
    still (its lease may have lapsed while it was busy: it is not anybody's to take)."""
    driving = record["owner"] == runtime.owner and record["id"] in runtime.cancels
    return owner_gone(record) and not driving


def recover(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Claim a run whose owner is gone and carry it on here, take its relay over, or end it
    ``RUN_INTERRUPTED`` (``RUN_CANCELLED`` when a cancel of it was recorded; see the module's
    doc); False when the record changed since it was read (another process claimed it, or its
    owner renewed), or when this process is shutting down (it hands runs over; it takes none)."""
    if not runtime.carries_on:
        return False
    if record["cancelRequested"]:  # its owner went before it honoured the cancel (or its canceller died)
        return cancel_orphaned(runtime, record)
    if _relay_of_the_dead(runtime, record):
        return adopt(runtime, record)
    run_id = record["id"]
    claimed = _claim(runtime, record)
    if claimed is None:
        return False
    reason = "shutdown" if record["owner"] is None else "owner-died"
    try:
        opened = open_continued(runtime, claimed, reason, runtime.config.max_continuations)
    except BreadError as exc:  # its agent or pipeline is no longer configured here
        log.warning("run %s cannot be carried on here (%s); interrupting it", run_id, exc.message)
        opened = None
    if opened is None:
        return end_claimed(runtime, run_id, "interrupted", _INTERRUPTED)
    _drive(opened, "continued")
    log.warning("run %s: its owner is gone (%s); this process carries it on", run_id, reason)
    return True


def can_carry_on(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Whether a run would be carried on (or its relay taken over) once its owner is gone."""
    if record["agentId"] in runtime.remote_agents and record.get("remoteRunId"):
        return True
    try:
        return continuation_root(new_context(runtime, record["id"], record["sessionId"])) is not None
    except BreadError:  # its agent or pipeline is no longer configured here
        return False


def interrupt(runtime: Runtime, record: dict[str, Any]) -> bool:
    """End a run whose owner died (or this process, shutting down) with ``agent:error``
    ``RUN_INTERRUPTED``: claimed first (one process wins), its record marked in the transaction
    of that crumb (see :func:`end_claimed`). False when the record changed since it was read
    (another process marked or claimed it, or its owner renewed), or the claim was lost before
    the end was logged."""
    claimed = _claim(runtime, record)
    return claimed is not None and end_claimed(runtime, record["id"], "interrupted", _INTERRUPTED)


def cancel_orphaned(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Cancel a running run whose owner is gone: ended ``RUN_CANCELLED`` here rather than
    carried on, the remote run of a relay cancelled. The claim (one process wins) records the
    cancel, so a sweep ends the run cancelled if this process dies before its end is logged.
    False when the record changed since it was read."""
    if _claim(runtime, record, cancelRequested=True) is None:
        return False
    _cancel_remote(runtime, record)
    error = BreadError(RUN_CANCELLED, "the run was cancelled after its owner stopped")
    end_claimed(runtime, record["id"], "cancelled", error)
    return True  # recorded: whoever ends the run if this process could not ends it cancelled


def adopt(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Take over the relay of a remote agent's run whose owner died: claim the run (one process
    wins), and go on relaying the remote run after the position its record holds, under the
    same run id and seqs, in a thread of this process. A remote run that is gone ends the local
    one with ``RUN_INTERRUPTED``. False when another process claimed it first."""
    claimed = _claim(runtime, record)
    if claimed is None:
        return False
    try:
        gone = runtime.remote_agents[record["agentId"]].run_status(record["remoteRunId"]) is None
    except BreadError:
        gone = False  # not answering now: the relay keeps trying for a while
    if gone:
        end_claimed(runtime, record["id"], "interrupted", _INTERRUPTED)
        return True
    _drive(open_taken_over(runtime, record), "relay")
    log.warning("run %s: its owner is gone; this process took over its relay", record["id"])
    return True


def cancel_paused(runtime: Runtime, record: dict[str, Any]) -> bool:
    """Cancel a run waiting for a human: its checkpoint voided (one process wins), the remote
    run of a relay cancelled, the run ended with ``RUN_CANCELLED``, its record marked in the
    transaction of that crumb: a tail of the paused run learns of its end from its log (on
    Postgres it hears appends only), so its record may not say it ended before its log does."""
    checkpoint_id, store = record["checkpointId"], runtime.store
    if not checkpoint_id:
        return False
    # Read before anything else: a paused run's log does not grow, so its end's seq is this + 1,
    # and a cancel racing this one for that seq loses it (see _left_unfinished).
    last_seq = store.last_seq(record["id"])
    if not store.claim_checkpoint(checkpoint_id, status="void") and not _left_unfinished(store, record, checkpoint_id):
        return False
    _cancel_remote(runtime, record)
    error = BreadError(RUN_CANCELLED, "the run was cancelled while waiting for a human")
    recorded = partial(store.update_run, record["id"], status="cancelled", checkpointId=None)
    _end_paused(runtime, record["id"], error, recorded, last_seq)
    return True


def _left_unfinished(store: Any, record: dict[str, Any], checkpoint_id: str) -> bool:
    """Whether an earlier cancel voided the run's checkpoint and stopped before its end was
    committed (its process died, its store refused): the record still paused on that checkpoint,
    which nothing else could end. A cancel still under way looks the same; the end's seq, read
    before this, settles it: that cancel's commit (the crumb and the record in one transaction)
    came after the read, and takes the seq first or refuses this one's."""
    checkpoint = store.get_checkpoint(checkpoint_id)
    if checkpoint is None or checkpoint["status"] != "void":
        return False
    current = store.get_run(record["id"])
    return current is not None and current["status"] == "paused" and current["checkpointId"] == checkpoint_id


def _cancel_remote(runtime: Runtime, record: dict[str, Any]) -> None:
    if record["agentId"] in runtime.remote_agents and record.get("remoteRunId"):
        quietly(runtime.remote_agents[record["agentId"]].cancel, record["remoteRunId"])


def end_claimed(runtime: Runtime, run_id: str, status: str, error: BreadError) -> bool:
    """End a run this process claimed (:func:`_claim`, or engine/queued.py's claims of a queued
    run) and does not drive: its terminal crumb, with the record's ``status`` written in that crumb's
    transaction while the claim holds, so no record says the run ended before its log does (a
    process dying in between leaves it running, claimed by a dead owner: the next sweep ends
    it). A writer that took the seq meanwhile (its owner was not gone after all) is followed:
    the end goes after its crumb. False when the claim was lost (another process claimed or
    ended the run), or that writer kept taking the seq."""
    store, claim = runtime.store, {"status": "running", "owner": runtime.owner}
    recorded = partial(_record_end, store, run_id, claim, status)
    crumb = c.error_crumb(run_id, error)
    for _ in range(END_ATTEMPTS):
        if _committed(runtime, run_id, crumb, recorded, store.last_seq(run_id)):
            close_loops(store, run_id, status)
            return True
        current = store.get_run(run_id)
        if current is None or any(current[key] != value for key, value in claim.items()):
            return False
    log.warning("run %s: a live writer kept taking its final seq; its claim lapses for a sweep to end it", run_id)
    return False


def _record_end(store: Any, run_id: str, claim: dict[str, Any], status: str) -> None:
    # In the terminal crumb's transaction: a claim lost meanwhile undoes the crumb, as a taken seq does.
    if not store.update_run(run_id, expect=claim, status=status, owner=None):
        raise BreadError(SEQ_CONFLICT, f"run {run_id} is no longer this process's to end")


def _claim(runtime: Runtime, record: dict[str, Any], **fields: Any) -> dict[str, Any] | None:
    """The run's record, made this process's under a fresh lease (with ``fields``) if nobody
    changed it since it was read (of several processes noticing at once, one wins); None for
    the others."""
    lease = lease_end(runtime.config)
    claimed = runtime.store.update_run(
        record["id"], expect=_as_read(record), owner=runtime.owner, leaseUntil=lease, **fields
    )
    if not claimed:
        return None
    return runtime.store.get_run(record["id"])  # a purge takes finished runs only: it is there


def _drive(opened: Opened, what: str) -> None:
    """Drive a run this process took on, in a thread of its own (a greenlet under gevent)."""
    name = f"bread-{what}-{opened.labels.run_id}"
    threading.Thread(target=drain, args=(opened.labels, opened.crumbs), name=name, daemon=True).start()


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


def _end_paused(runtime: Runtime, run_id: str, error: BreadError, recorded: Callable[[], Any], last_seq: int) -> None:
    """The terminal crumb of a cancelled paused run at ``last_seq + 1``, through a choke point of
    its own, with ``recorded`` (its record's end) in its transaction, or ``recorded`` alone when
    another cancel took that seq; and its unfinished loops' end."""
    if not _committed(runtime, run_id, c.error_crumb(run_id, error), recorded, last_seq):
        log.warning("run %s: a late writer took the final seq; its log ends as that writer left it", run_id)
        recorded()  # its log ended all the same: the record says so
    close_loops(runtime.store, run_id, "cancelled")


def _committed(runtime: Runtime, run_id: str, crumb: dict[str, Any], recorded: Callable[[], Any], after: int) -> bool:
    """Whether ``crumb`` was logged at seq ``after + 1``, with ``recorded`` in its transaction;
    False (nothing published) when another writer took the seq or ``recorded`` refused."""
    emitter = Emitter(run_id, runtime.store, runtime.publish, next_seq=after + 1)
    emitter.defer(recorded)
    try:
        emitter.emit(crumb)
    except BreadError as exc:
        if exc.code != SEQ_CONFLICT:
            raise
        return False
    return True
