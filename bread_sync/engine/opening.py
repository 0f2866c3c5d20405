"""Opening a run: the one sequence a new run, or a paused run's continuation, goes through before
its first crumb, whatever its kind (an agent, a loop, a pipeline, a remote agent's relay).

A new run gets its id, its context and root activity, its session's claim and its record, in
that order, so a retried request finds the run it started and a second run of a busy session
follows its policy before anything is logged; then its root activity opens itself (its start
crumb) and the driver takes it from there. A continuation claims its checkpoint once, in any
process sharing the store; a run carried on after its process died goes on from its progress
(or its start crumb); a relay taken over from a dead process goes on from its position.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, NamedTuple

from .. import crumbs as c
from ..agents import Tool, check_response_kind
from ..cancel import CancelToken
from ..clock import now_iso
from ..errors import CHECKPOINT_ALREADY_RESUMED, CHECKPOINT_NOT_FOUND, INVALID_REQUEST, BreadError
from ..logs import RunLabels
from ..stores import TRACE_FIELD
from ..usage import RunUsage
from . import Runtime, Steps
from .context import RunContext
from .emitter import Emitter
from .execution import Execution, progress_id
from .kinds import KINDS
from .lease import lease_end
from .relay import Relay

Session = dict[str, Any] | str | None
#: Set while a caller opens runs it drives to their first crumb at once (opening_at_once).
_AT_ONCE: ContextVar[bool] = ContextVar("bread_opening_at_once", default=False)


class Opened(NamedTuple):
    """A run under way: what names it, and its crumbs as the driver yields them (pulling drives it)."""

    labels: RunLabels
    crumbs: Iterator[dict[str, Any]]
    #: The seq of its first durable crumb: 1, or where a continuation goes on.
    first_seq: int = 1
    #: Whether its crumbs end with its opening, the run then queued for the executor's worker.
    queued: bool = False
    #: Whether its first crumb comes without a wait for another run (a new run holding its
    #: session, not queued): what :meth:`~bread_sync.runs.Run.open` may drive at once.
    ready: bool = False


@contextmanager
def opening_at_once() -> Iterator[None]:
    """Inside, a new run opened under an id of its own making (no ``run_id`` given) that is
    :attr:`~Opened.ready` is one its caller drives to its first crumb at once
    (:meth:`~bread_sync.runs.Run.open`), before it hands out the run's id (the server's start
    of a run): the run's record, and the claim of a session made for it, are written in that
    crumb's transaction, not each in one of its own before it (two commits fewer before a
    run's first byte). Outside, a run's record exists once it is opened."""
    token = _AT_ONCE.set(True)
    try:
        yield
    finally:
        _AT_ONCE.reset(token)


def open_run(
    runtime: Runtime,
    make_root: Callable[[RunContext], Any],
    session: Session,
    *,
    run_id: str | None = None,
    signal: CancelToken | None = None,
    session_policy: str | None = None,
    may_interrupt: Callable[[str], bool] | None = None,
    state: dict[str, Any] | None = None,
    context: list[dict[str, Any]] | None = None,
    after: float | None = None,
) -> Opened | None:
    """Open a new run whose root activity ``make_root(ctx)`` makes (the run is of the agent or
    pipeline the root runs); None when a run ``run_id`` exists already (a retried request: its
    caller follows that run). With ``after`` (epoch seconds) the run is queued, and no worker
    claims it before then."""
    runtime.let_go()  # first: a run its caller dropped unfinished holds its session until then
    session_id, tags, made = session_ref(session)
    if run_id is not None and runtime.store.get_run(run_id) is not None:
        return None
    # Opened at once (opening_at_once) under an id of its own making, which no one else knows yet.
    at_once = _AT_ONCE.get() and run_id is None
    run_id = run_id or new_id("run")
    ctx = new_context(runtime, run_id, session_id, signal, state=state, context=context)
    ctx.new_session = made
    root = make_root(ctx)
    queue = _queues(runtime, root, after)
    at_once = at_once and not queue
    claimed = _claim_session(runtime, ctx, root, session_policy, may_interrupt, at_once and made)
    definition_id = root.definition_id
    record = {**run_record(runtime, run_id, definition_id, session_id), **root.record_fields()}
    if after is not None:
        record["notBefore"] = after
    _trace_new_run(ctx, definition_id, record)
    # Its record comes with its first crumb only where its session's claim does too (or it claims
    # none): a claim of a session others know, held by a run without a record, would look stale
    # to them (engine/sessions.py) from now until its first crumb's commit.
    unrecorded = at_once and (made or not root.claims_session)
    if unrecorded:
        ctx.emitter.defer(partial(_create_leased, runtime, record))
    elif not runtime.store.create_run(record):
        if ctx.trace is not None:  # another request opened this run id meanwhile: not this process's run
            ctx.trace.abandon()
        return None
    opening = root.open(tags, None if queue else _session_wait(runtime, ctx, claimed))
    execution = Execution(ctx, root, opening, queue=queue, unrecorded=unrecorded)
    crumbs = observed(ctx, definition_id, execution, lambda e: e.start(), new=True)
    labels = RunLabels(run_id, session_id, definition_id, ctx.trace)
    return Opened(labels, crumbs, queued=queue, ready=claimed and not queue)


def open_continuation(
    runtime: Runtime,
    checkpoint_id: str,
    response: Any,
    *,
    signal: CancelToken | None = None,
    may_interrupt: Callable[[str], bool] | None = None,
    state: dict[str, Any] | None = None,
    context: list[dict[str, Any]] | None = None,
) -> Opened:
    """Continue a paused run from its checkpoint. The response is validated before the
    checkpoint is claimed, so a malformed one does not burn it; a checkpoint resumes once."""
    runtime.let_go()  # first: a run its caller dropped unfinished holds its session until then
    store = runtime.store
    checkpoint = store.get_checkpoint(checkpoint_id)
    if checkpoint is None:
        raise BreadError(CHECKPOINT_NOT_FOUND, f"no checkpoint {checkpoint_id}")
    if checkpoint["status"] != "pending":
        raise BreadError(CHECKPOINT_ALREADY_RESUMED, f"checkpoint {checkpoint_id} was already used")
    state, context = check_state(state, context)
    run_id, session_id, next_seq = checkpoint["runId"], checkpoint["sessionId"], checkpoint["nextSeq"]
    ctx = new_context(runtime, run_id, session_id, signal, next_seq, state, context)
    ctx.usage = RunUsage.from_wire(checkpoint.get("usage"))
    root = ctx.restore(checkpoint["stack"])  # an agent or pipeline no longer configured fails here
    response = _validate_response(checkpoint["kind"], root.pending_tool(), response)
    claimed = runtime.sessions.claim(session_id, run_id, root.session_policy, may_interrupt)
    if not store.claim_checkpoint(checkpoint_id):
        runtime.sessions.release(session_id, run_id)
        raise BreadError(CHECKPOINT_ALREADY_RESUMED, f"checkpoint {checkpoint_id} was already used")
    store.update_run(
        run_id, status="running", checkpointId=None, owner=runtime.owner, leaseUntil=lease_end(runtime.config)
    )
    queue = _queues(runtime, root)
    wait = None if queue else _session_wait(runtime, ctx, claimed)
    execution = Execution(ctx, root, _continuation_opening(ctx, state, wait), queue=queue)
    crumbs = observed(ctx, root.definition_id, execution, lambda e: e.start(resume=(checkpoint, response)), checkpoint)
    labels = RunLabels(run_id, session_id, root.definition_id, ctx.trace)
    return Opened(labels, crumbs, next_seq, queued=queue)


def _claim_session(
    runtime: Runtime,
    ctx: RunContext,
    root: Any,
    policy: str | None,
    may_interrupt: Callable[[str], bool] | None,
    with_first_crumb: bool,
) -> bool:
    """Whether the run holds its session now, else it waits for it (engine/sessions.py). With
    ``with_first_crumb`` (a session made for a run opened at once: no one else knows it yet) the
    claim is written in the run's first crumb's transaction."""
    if not root.claims_session:
        return True
    if with_first_crumb:
        ctx.emitter.defer(partial(runtime.store.claim_session, ctx.session_id, ctx.run_id))
        return True
    return runtime.sessions.claim(ctx.session_id, ctx.run_id, policy or root.session_policy, may_interrupt)


def _queues(runtime: Runtime, root: Any, after: float | None = None) -> bool:
    """Whether the run of ``root`` is queued for the executor once opened (and waits there, not
    here, for its session: engine/queued.py): with a queueing executor, and with any executor a
    delayed run or one of an agent with a cap; never a remote agent's relay, which its caller's
    process drives."""
    waits = runtime.executor.queues or after is not None or cap_of(runtime, root.definition_id) is not None
    return waits and not root.outlives_process


def cap_of(runtime: Runtime, definition_id: str) -> int | None:
    """The most runs of an agent that may run at once (``Agent.max_concurrent_runs``); None: no cap."""
    agent = runtime.agents.get(definition_id)
    return None if agent is None else agent.max_concurrent_runs


def open_continued(runtime: Runtime, record: dict[str, Any], reason: str, most: int) -> Opened | None:
    """Carry on a run this process claimed from one that is gone, after its last durable crumb:
    its root restored from its progress, or rebuilt from its start crumb when it saved none.
    None when it is not to be carried on: nothing logged, its agent opts out, a kind that
    cannot, or continued ``most`` times already with no durable crumb between."""
    run_id, session_id, store = record["id"], record["sessionId"], runtime.store
    last = store.last_seq(run_id)
    if last == 0:
        return None
    (previous,) = store.get_crumbs(run_id, after=last - 1, limit=1)
    attempt = previous.crumb["attempt"] + 1 if previous.crumb["type"] == c.AGENT_RUN_CONTINUED else 1
    if attempt > most:
        return None
    ctx = new_context(runtime, run_id, session_id, next_seq=last + 1)
    ctx.usage = RunUsage.from_wire(record.get("usage"))  # as it last paused; its progress's is newer
    root = continuation_root(ctx)
    if root is None:
        return None
    continued = {"type": c.AGENT_RUN_CONTINUED, "runId": run_id, "reason": reason, "afterSeq": last, "attempt": attempt}
    execution = Execution(ctx, root, _yielding(continued))
    # Its span links to the span of the driving it goes on from, which the record names.
    went_on_from = {"trace": record.get(TRACE_FIELD)}
    crumbs = observed(ctx, root.definition_id, execution, lambda e: e.start(carry_on=True), went_on_from)
    return Opened(RunLabels(run_id, session_id, root.definition_id, ctx.trace), crumbs, last + 1)


def continuation_root(ctx: RunContext) -> Any | None:
    """The root activity a continuation of the run goes on with: restored from its progress, or
    rebuilt from its start crumb when it saved none; None when it cannot be carried on. The
    context the run was started with (``ctx.context``) is read from that crumb too."""
    store = ctx.runtime.store
    first = store.get_crumbs(ctx.run_id, after=0, limit=1)
    if not first:
        return None
    start = first[0].crumb
    progress = store.get_checkpoint(progress_id(ctx.run_id))
    if progress is not None:  # its stack None: it was where it cannot be carried on
        ctx.context = start.get("context", [])
        if progress.get("usage"):
            ctx.usage = RunUsage.from_wire(progress["usage"])
        root = ctx.restore(progress["stack"]) if progress["stack"] else None
        if root is not None and "seq" in progress:  # a progress saved before it had one has nothing to catch up
            root.catch_up([frame.crumb for frame in store.get_crumbs(ctx.run_id, after=progress["seq"])])
    else:
        root = root_from_start(ctx, start)
    return root if root is not None and root.continuable() else None


def root_from_start(ctx: RunContext, start: dict[str, Any]) -> Any:
    """The root activity of a run that saved no progress, from its start crumb, not begun."""
    ctx.context = start.get("context", [])  # what its tools are given again
    runtime = ctx.runtime
    if "pipelineId" in start:
        return ctx.kinds["pipeline"](ctx, runtime.pipeline(start["pipelineId"]), start["input"])
    root = ctx.activity_for(runtime.agent(start["agentId"]), start["input"], start.get("skill"), record=True)
    root.read_session()
    return root


def _yielding(crumb: dict[str, Any]) -> Steps:
    yield crumb


def open_taken_over(runtime: Runtime, record: dict[str, Any]) -> Opened:
    """Go on relaying a remote agent's run another process started, after the position its
    record holds, under the same run id and seqs (the record is this process's already)."""
    run_id = record["id"]
    ctx = new_context(runtime, run_id, record["sessionId"], next_seq=runtime.store.last_seq(run_id) + 1)
    position = {"remote_run_id": record["remoteRunId"], "remote_seq": record["remoteSeq"] or 0}
    root = Relay(ctx, record["agentId"], adopted=True, **position)
    crumbs = observed(ctx, record["agentId"], Execution(ctx, root), lambda execution: execution.start())
    return Opened(RunLabels(run_id, record["sessionId"], record["agentId"], ctx.trace), crumbs)


def observed(
    ctx: RunContext,
    agent_id: str,
    execution: Execution,
    start: Callable[[Execution], Iterator[dict[str, Any]]],
    went_on_from: dict[str, Any] | None = None,
    new: bool = False,
) -> Iterator[dict[str, Any]]:
    """The driver's crumbs; with tracing on, under the run's span, which links to the span the
    checkpoint or progress it goes on from was kept under. Its parent is the context current
    here, where the run opens (its request's), not in the greenlet that drives it. With metrics
    on, counted (``new``: a run opened, not a continuation), its timing starting here."""
    runtime = ctx.runtime
    crumbs = start(execution)
    if runtime.tracer is not None:
        if ctx.trace is None:  # a continuation's (a new run's was made with its record)
            ctx.trace = runtime.tracer.run_trace(ctx.run_id, ctx.session_id, agent_id, went_on_from)
            # The record names this driving's span, from its first crumb's commit on: the webhook
            # POSTs about the run carry it, from whichever process sends them (stores.TRACE_FIELD).
            ctx.emitter.defer(partial(runtime.store.update_run, ctx.run_id, trace=ctx.trace.link()))
        ctx.emitter.watch(ctx.trace.committed)
        execution.when_ended(ctx.trace.end)
    if runtime.metrics is not None:
        metrics = runtime.metrics
        crumbs = metrics.follow(agent_id, crumbs, lambda: execution.status, ctx.usage, new, ctx.emitter.tally)
    return crumbs


def _trace_new_run(ctx: RunContext, agent_id: str, record: dict[str, Any]) -> None:
    """A new run's span, started before its record is made, which names it
    (stores.TRACE_FIELD): written with the record, not by an update of it with the first crumb
    (an ``UPDATE`` of the run's row, some 4% of a run of 250 text deltas in SQLite)."""
    tracer = ctx.runtime.tracer
    if tracer is not None:
        ctx.trace = tracer.run_trace(ctx.run_id, ctx.session_id, agent_id, None)
        record[TRACE_FIELD] = ctx.trace.link()


def _create_leased(runtime: Runtime, record: dict[str, Any]) -> None:
    """Write a run's record with its first crumb, its lease from then: the opening before it
    (``before_run``) may have taken a while."""
    runtime.store.create_run({**record, "leaseUntil": lease_end(runtime.config)})


def new_context(
    runtime: Runtime,
    run_id: str,
    session_id: str,
    signal: CancelToken | None = None,
    next_seq: int = 1,
    state: dict[str, Any] | None = None,
    context: list[dict[str, Any]] | None = None,
) -> RunContext:
    """What the activities of one run (or continuation) share, with its choke point."""
    emitter = Emitter(run_id, runtime.store, runtime.publish, next_seq=next_seq, metrics=runtime.metrics)
    return RunContext(runtime, run_id, session_id, signal or CancelToken(), emitter, KINDS, state, context or [])


def run_record(runtime: Runtime, run_id: str, definition_id: str, session_id: str) -> dict[str, Any]:
    """The record of a new run, owned by this process under a fresh lease."""
    now = now_iso()
    return {
        "id": run_id,
        "agentId": definition_id,
        "sessionId": session_id,
        "status": "running",
        "checkpointId": None,
        "owner": runtime.owner,
        "leaseUntil": lease_end(runtime.config),
        "cancelRequested": False,
        "usage": None,
        "createdAt": now,
        "updatedAt": now,
    }


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def session_ref(session: Session) -> tuple[str, dict[str, str], bool]:
    """The session id (a new one when none is given), the tags of a ``session`` argument, and
    whether the id is new (nothing can be stored under it yet)."""
    if session is None:
        return new_id("ses"), {}, True
    if isinstance(session, str):
        return session, {}, False
    if not isinstance(session, dict):
        raise BreadError(INVALID_REQUEST, "session must be an object {id?, tags?}")
    tags = session.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise BreadError(INVALID_REQUEST, "session tags must be an object of strings")
    given = session.get("id")
    session_id = given or new_id("ses")
    if not isinstance(session_id, str):
        raise BreadError(INVALID_REQUEST, "session id must be a string")
    return session_id, dict(tags), not given


def check_state(
    state: dict[str, Any] | None, context: list[dict[str, Any]] | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A run's ``state`` (a JSON object or None) and ``context`` (a list, empty when None), checked."""
    if state is not None and not isinstance(state, dict):
        raise BreadError(INVALID_REQUEST, "state must be a JSON object")
    if context is None:
        return state, []
    if not isinstance(context, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("description"), str) for entry in context
    ):
        raise BreadError(INVALID_REQUEST, "context must be a list of {description, value} objects")
    return state, context


def _session_wait(runtime: Runtime, ctx: RunContext, claimed: bool) -> Callable[[], None] | None:
    """None when the run holds its session; else the wait for it, made before its first crumb."""
    return None if claimed else partial(runtime.sessions.wait, ctx.session_id, ctx.run_id, ctx.token)


def _continuation_opening(ctx: RunContext, state: dict[str, Any] | None, wait: Callable[[], None] | None) -> Steps:
    """A continuation has no opening crumb of its own: only the wait for its session, and its
    ``state``, kept with its first crumb. A step, not done as it opens: one closed before its
    first crumb replaces no state, its abandon being the only crumb it logs."""
    if wait is not None:
        wait()
    if state is not None:
        ctx.touch_session_with_next_crumb(None, state)
    yield from ()


def _validate_response(kind: str, tool: Tool | None, response: Any) -> Any:
    return tool.validate_response(kind, response) if tool is not None else check_response_kind(kind, response)
