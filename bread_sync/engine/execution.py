"""One run's execution: the driver that takes a run from its first crumb to its end or pause.

The driver pulls crumbs from the run's root activity (an agent's run, a loop's, a pipeline's or a relay; see
:mod:`bread_sync.engine`), passes each through the choke point and on to the caller, checks
the cancel token between them, turns a :class:`~bread_sync.engine.Pause` into a checkpoint
and a ``human:required`` crumb, and makes sure the run ends with exactly one terminal crumb.
"""

from __future__ import annotations

import logging
import marshal
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextvars import ContextVar
from functools import partial
from inspect import GEN_CREATED, getgeneratorstate
from typing import Any

from .. import crumbs as c
from ..clock import now_iso
from ..errors import RUN_CANCELLED, RUN_INTERRUPTED, RUN_TIMEOUT, SEQ_CONFLICT, BreadError, internal_error
from ..greenlets import Pacer
from ..logs import RunLabels, run_context
from . import Pause, Steps
from .context import RunContext

log = logging.getLogger("bread_sync")

CHECKPOINT_VERSION = 1
#: Crumbs logged without the run's progress (a run that cannot be carried on logs none): text
#: (logged later, aggregated, in the next durable crumb's transaction), its start (a
#: continuation goes on from the start crumb itself), a streamed tool input's deltas (nothing
#: changed since its start), a continuation's own crumb (nothing changed since the progress it
#: went on from), a tool call's progress (nothing changed since its ``tool:call``), and the ends
#: and pauses (nothing goes on from those, or their checkpoint does).
WITHOUT_PROGRESS = (
    frozenset({c.AGENT_RUN_START, c.TOOL_INPUT_DELTA, c.AGENT_RUN_CONTINUED, c.TOOL_PROGRESS})
    | c.STREAM_END
    | c.NOT_DURABLE
)
STATUS_OF_ERROR = {RUN_CANCELLED: "cancelled", RUN_TIMEOUT: "cancelled", RUN_INTERRUPTED: "interrupted"}
#: What the steps of a run to be queued yield once its opening crumb is logged (see Execution).
QUEUE_HERE = object()
#: The id of the run whose crumbs :func:`close_driven` is closing before their first: its driver,
#: started for that alone, ends it at once. By id, so no other run opened meanwhile (by a
#: listener of the abandon's crumb, say) is ended with it.
_CLOSED_UNSTARTED: ContextVar[str | None] = ContextVar("bread_closed_unstarted", default=None)


class Execution:
    """Drives one run (or one continuation of it) through the choke point. With ``queue`` it
    drives only the run's opening (its start crumb, or a resume's ``human:resumed``), then
    writes the run ``queued`` and submits it to the runtime's executor, whose worker drives the
    rest (engine/queued.py): what can fail before a run exists fails here, as inline.
    ``unrecorded``: the run's record is written with its first crumb (engine/opening.py's
    ``opening_at_once``), so until that commits there is no run to end: a failure then is raised
    to its opener, as any failure to open a run is, and nothing of it is left."""

    def __init__(
        self, ctx: RunContext, root: Any, opening: Steps | None = None, queue: bool = False, unrecorded: bool = False
    ):
        self.ctx = ctx
        self.root = root
        self.opening = opening
        self.queue = queue
        self.unrecorded = unrecorded
        self.runtime = ctx.runtime
        self.store = ctx.runtime.store
        self.emitter = ctx.emitter
        self._final: str | None = None
        #: The run's progress as last saved, packed (:func:`packed`; None: none, or it cannot be gone on from).
        self._progress: bytes | str = packed(None)
        #: Told how this driving ended, once it has (see :meth:`when_ended`).
        self._when_ended: list[Callable[[str | None], None]] = []

    @property
    def status(self) -> str | None:
        """How this driving of the run ended (``completed``, ``paused``, ``failed``, ...), None until it did."""
        return self._final

    def when_ended(self, ended: Callable[[str | None], None]) -> None:
        """Call ``ended(status)`` once this driving has ended, however it ended (its status settled,
        as :attr:`status` says). What only needs the end (a run's span) is told here, not by a
        generator around the run's crumbs, which would cost a pass per crumb."""
        self._when_ended.append(ended)

    def start(
        self, resume: tuple[dict[str, Any], Any] | None = None, carry_on: bool = False, resumed: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The run's crumbs, each yielded once the choke point has logged it; pulling drives the
        run. With ``resume`` (the checkpoint and the human's response) the root continues from
        its pause (``resumed``: its ``human:resumed`` is logged already, by the process that
        queued it); with ``carry_on``, from its progress after its process died. Ends with
        exactly one terminal crumb (or a pause), and a caller that stops pulling early leaves
        the run interrupted, so no run is left running without a driver, as does one that
        closes the crumbs before their first (:func:`close_driven`)."""
        run_id = self.ctx.run_id
        if _CLOSED_UNSTARTED.get() == run_id:
            self._end_unstarted()
            return
        self.runtime.cancels.register(run_id, self.ctx.token)
        self.runtime.leases.watch(run_id)
        steps = self._steps(resume, carry_on, resumed)
        if resume is not None or carry_on:
            self._progress = b""  # it may have saved some before: the first crumb saves what holds now
        emit, token = self.emitter.emit, self.ctx.token
        # A model that never blocks (echo, a fast provider's buffered stream) would otherwise keep
        # a gevent worker from everyone else until the run ends, whoever pulls the crumbs.
        pace = Pacer().pace
        try:
            for item in steps:
                if item is QUEUE_HERE:
                    self._queue()
                    return
                if isinstance(item, Pause):
                    crumb, final = self._pause(item), "paused"
                elif item["type"] == c.AGENT_RUN_END:
                    crumb, final = item, "completed"
                    self._end_with_next_crumb(final)
                else:
                    crumb, final = item, None
                    if crumb["type"] not in WITHOUT_PROGRESS:
                        self._note_progress(crumb["type"])
                emit(crumb)
                if final is not None:
                    self._settled(final)
                yield crumb
                if final is not None:
                    return
                pace()
                token.raise_if_cancelled()
        except BreadError as exc:
            if exc.code == SEQ_CONFLICT:  # another process declared this run dead and ended it
                log.warning("run %s was taken over; this process stops driving it", run_id)
                self._final = "lost"
                return
            if self._hands_over(exc):
                return
            if self._fails_unopened():
                raise
            yield self._fail(exc)
        except Exception as exc:
            if self._fails_unopened():
                log.exception("run %s could not open", run_id)
                raise internal_error(exc) from exc
            log.exception("run %s failed", run_id)
            yield self._fail(internal_error(exc))
        finally:
            try:
                try:
                    steps.close()  # a step's own clean-up may fail (a provider's stream that fails to close)...
                finally:  # ...and the run is still let go and, unfinished, abandoned
                    self._unregister()
                    if self._final is None:  # the caller stopped pulling: nobody will drive this run
                        self._abandon()
            finally:  # told even when the clean-up failed (a store refusing the abandon's writes)
                self._tell_ended()

    def _end_unstarted(self) -> None:
        """End a run closed before its first crumb, none of its steps run (nor it registered):
        interrupted, as one closed later, without waiting for its lease to lapse. One
        ``unrecorded`` has nothing in the store (its record and claim were to come with that
        crumb) and its id reached no one: it writes nothing, as any run that failed to open."""
        try:
            if self.unrecorded:
                self._final = "interrupted"
            else:
                self._abandon()
        finally:
            self._tell_ended()

    def _tell_ended(self) -> None:
        for ended in self._when_ended:
            ended(self._final)

    def _fails_unopened(self) -> bool:
        """A run that failed before it existed (its record was to come with its first crumb,
        which was not logged, so none of its writes was committed) ends failed here, with no
        crumb to yield: True then, and its caller raises the failure instead."""
        if not (self.unrecorded and self.emitter.last_seq == 0):
            return False
        self._final = "failed"
        return True

    def _hands_over(self, exc: BreadError) -> bool:
        """A run stopped by a shutdown that can be carried on (or a remote agent's run, which
        outlives this process) ends nothing: it is left running with no owner and a lapsed
        lease, for the next process that notices to carry it on (engine/recovery.py) from its
        progress (or its relay's recorded position)."""
        token = self.ctx.token
        stopping = token.cancelled and token.reason.code == exc.code == RUN_INTERRUPTED
        if not (stopping and (self.root.outlives_process or self.root.continuable())):
            return False
        self._final = "handed over"
        self._unregister()
        owned = {"status": "running", "owner": self.runtime.owner}
        if self.store.update_run(self.ctx.run_id, expect=owned, owner=None, leaseUntil=0.0):
            log.warning("run %s: handed over; the next process to notice carries it on", self.ctx.run_id)
        return True

    def _queue(self) -> None:
        """The run's opening is logged: it is ``queued`` now, no longer this process's, and
        submitted to the executor (unless a cancel or another process changed it meanwhile)."""
        self._final = "queued"
        self._unregister()
        owned = {"status": "running", "owner": self.runtime.owner}
        if not self.store.update_run(self.ctx.run_id, expect=owned, status="queued", owner=None, leaseUntil=0.0):
            return
        try:
            self.runtime.executor.submit(self.runtime, self.ctx.run_id)
        except BreadError as exc:  # queued all the same: a sweep submits it again (queued.py)
            log.warning("run %s: queued, not submitted (%s); a sweep submits it again", self.ctx.run_id, exc.message)

    def _steps(self, resume: tuple[dict[str, Any], Any] | None, carry_on: bool, resumed: bool) -> Steps:
        if self.opening is not None:
            yield from self.opening
        if carry_on:
            output = yield from self.root.carry_on()
        elif resume is not None:
            checkpoint, response = resume
            if not resumed:
                yield {
                    "type": c.HUMAN_RESUMED,
                    "runId": self.ctx.run_id,
                    "checkpointId": checkpoint["id"],
                    "response": response,
                }
            if self.queue:
                yield QUEUE_HERE
            output = yield from self.root.resume(response)
        else:
            if self.queue:
                yield QUEUE_HERE
            output = yield from self.root.run()
        end = {"type": c.AGENT_RUN_END, "runId": self.ctx.run_id, "output": output}
        if self.ctx.usage:
            end["usage"] = self.ctx.usage.to_wire()
        yield end

    def _note_progress(self, crumb_type: str) -> None:
        """Save the run's progress with the crumb about to be logged: its root's snapshot, or,
        while the run is where it cannot be carried on (a remote subagent under way),
        that it cannot, so a continuation never goes back to an older snapshot. A run that was
        never where it can be carried on saves nothing, and a progress already saved is not
        saved again (nor looked at, where the root knows the crumb changed nothing)."""
        root = self.root
        if not root.changed_with(crumb_type):
            return
        stack = root.snapshot(progress=True) if root.continuable() else None
        seen = packed(stack)
        if seen == self._progress:
            return  # the same as saved with an earlier crumb (a tool input streamed, say)
        self._progress = seen
        self.emitter.defer(partial(self._save_progress, stack, self.emitter.next_seq))

    def _save_progress(self, stack: dict[str, Any] | None, seq: int) -> None:
        """The run's progress, in the transaction of the crumb being logged (``seq``): where a
        continuation goes on if this process dies (engine/recovery.py), caught up with the
        crumbs logged after it; ``stack`` None: it cannot."""
        ctx = self.ctx
        progress = {
            "version": CHECKPOINT_VERSION,
            "id": progress_id(ctx.run_id),
            "runId": ctx.run_id,
            "sessionId": ctx.session_id,
            "status": "progress",
            "createdAt": now_iso(),
            "seq": seq,
            "stack": stack,
            "usage": ctx.usage.to_wire(),
        }
        # No trace link in it: a continuation links to the span the run's record names
        # (stores.TRACE_FIELD), the same one, and a traced turn saves its progress with one dict fewer.
        self.store.save_checkpoint(progress)

    def _settled(self, status: str) -> None:
        """The crumb that ends (or pauses) the run is in the log: a cancel from now on is for a
        paused or ended run, not this process's live one."""
        self._final = status
        self._unregister()

    def _unregister(self) -> None:
        """No longer a live run of this process: not cancelled here, its lease not renewed."""
        self.runtime.cancels.unregister(self.ctx.run_id, self.ctx.token)
        self.runtime.leases.unwatch(self.ctx.run_id)

    def _pause(self, pause: Pause) -> dict[str, Any]:
        ctx, call = self.ctx, pause.call
        checkpoint_id = f"cp_{uuid.uuid4().hex}"
        crumb = {
            "type": c.HUMAN_REQUIRED,
            "runId": ctx.run_id,
            "checkpointId": checkpoint_id,
            "kind": pause.kind,
            "toolCallId": call["id"],
            "toolName": call["name"],
            "input": call["input"],
        }
        if pause.outcome_unknown:
            crumb["outcomeUnknown"] = True
        checkpoint = {
            "version": CHECKPOINT_VERSION,
            "id": checkpoint_id,
            "runId": ctx.run_id,
            "sessionId": ctx.session_id,
            "kind": pause.kind,
            "toolCallId": call["id"],
            "toolName": call["name"],
            "input": call["input"],
            "status": "pending",
            "createdAt": now_iso(),
            # the human:required crumb takes emitter.next_seq; the continuation starts after it
            "nextSeq": self.emitter.next_seq + 1,
            "stack": self.root.snapshot(),
            "usage": ctx.usage.to_wire(),
        }
        if ctx.trace is not None:  # the resume's span links to this run's span
            checkpoint["trace"] = ctx.trace.link()
        store = self.store
        self.emitter.defer(lambda: store.save_checkpoint(checkpoint))
        self._end_with_next_crumb("paused", checkpointId=checkpoint_id)
        return crumb

    def _fail(self, error: BreadError) -> dict[str, Any]:
        crumb = c.error_crumb(self.ctx.run_id, error)
        status = STATUS_OF_ERROR.get(error.code, "failed")
        self._end_with_next_crumb(status)
        self.emitter.emit(crumb)
        self._settled(status)
        return crumb

    def _end_with_next_crumb(self, status: str, **fields: Any) -> None:
        """The run's status and usage, and the release of its session, written in the transaction
        of the crumb that ends (or pauses) it: a client that sees that crumb finds the run settled.
        Only while this process still owns the run: if another declared it dead meanwhile, the
        whole transaction fails as a seq conflict would, and this process stops driving it."""
        store, run_id, session_id, owner = self.store, self.ctx.run_id, self.ctx.session_id, self.runtime.owner
        fields["usage"] = self.ctx.usage.to_wire()

        def record_status() -> None:
            if not store.update_run(run_id, expect={"owner": owner}, status=status, owner=None, **fields):
                raise BreadError(SEQ_CONFLICT, f"run {run_id} is no longer this process's to end")

        self.emitter.defer(record_status)
        self.emitter.defer(lambda: self.runtime.sessions.release(session_id, run_id))

    def _abandon(self) -> None:
        # Its record and session written with the crumb, as any end's: only while this process
        # still owns the run (another may have ended or carried it on meanwhile).
        self._final = "interrupted"
        try:
            self._fail(BreadError(RUN_INTERRUPTED, "the run was abandoned before it ended"))
        except BreadError as exc:  # said, not raised: an abandon comes from a close, or a let go of a dropped run
            if exc.code == SEQ_CONFLICT:
                log.warning("run %s: abandoned, and no longer this process's to end", self.ctx.run_id)
            else:  # no longer renewed, its lease lapses and a sweep ends it
                log.warning("run %s: abandoned, its end not logged (%s)", self.ctx.run_id, exc.code)


def packed(stack: dict[str, Any] | None) -> bytes | str:
    """``stack`` as a value that compares equal only to an equal stack's: to tell whether a run's
    progress changed. ``marshal`` copies the values deeply in C, several times faster than JSON
    encodes them (this is on the path of every durable crumb); JSON is the fallback for a
    subclass of a JSON type (a str enum, say), which marshal refuses (a str never equals bytes)."""
    try:
        return marshal.dumps(stack)
    except ValueError:
        return c.dumps(stack)


def progress_id(run_id: str) -> str:
    """The id of a run's progress: a checkpoint of status ``progress``, replaced as it goes."""
    return f"progress_{run_id}"


def close_driven(run_id: str, crumbs: Generator[Any, None, None]) -> None:
    """Close the crumbs of run ``run_id`` as its driver yields them (an opened run's, maybe
    counted by the metrics): one left unfinished ends interrupted, and so does one never started,
    its driver started for that alone (closing a generator never started runs none of it, and
    the run would be left to a recovery sweep once its lease lapsed)."""
    if getgeneratorstate(crumbs) == GEN_CREATED:
        closing = _CLOSED_UNSTARTED.set(run_id)
        try:
            next(crumbs, None)
        finally:
            _CLOSED_UNSTARTED.reset(closing)
    crumbs.close()


def drain(labels: RunLabels, crumbs: Iterator[dict[str, Any]]) -> None:
    """Drive a run to its end or pause, for a caller that only needs it to happen (the server's
    runner, a relay taken over: their clients read the crumbs from the transport). The run's labels
    are set for its log records once around all the crumbs rather than per crumb.

    After each durable crumb other threads get their turn: its commit held this one (under gevent
    a SQLite call does not yield), and whoever streams the crumb should get to send it now."""
    with run_context(labels):
        for crumb in crumbs:
            if crumb["type"] not in c.NOT_DURABLE:
                time.sleep(0)
