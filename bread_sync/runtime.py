"""The ``Bread`` object: runs agents, resumes them, cancels them.

A run is a plain iterator of crumbs. Pulling it drives the run; every crumb goes through the
run's :class:`~bread_sync.engine.emitter.Emitter` (the choke point) before the caller sees it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

from .agents import Agent, ServedAgent
from .blobs import meta_of
from .cancel import CancelToken, registry
from .config import Config, make_blob_store, make_executor, make_store
from .crumbs import Frame
from .engine import owners, queued, recovery
from .engine.context import RunContext
from .engine.emitter import fan_out
from .engine.execution import drain
from .engine.lease import LeaseKeeper
from .engine.opening import Opened, check_state, new_id, open_continuation, open_run
from .engine.pipeline_run import pipeline_root
from .engine.relay import Relay
from .engine.sessions import SessionGuard
from .engine.task_run import run_task
from .errors import (
    AGENT_NOT_FOUND,
    PIPELINE_NOT_FOUND,
    RUN_ID_CONFLICT,
    SKILL_NOT_FOUND,
    TASK_NOT_FOUND,
    BreadError,
)
from .executors import check_queue
from .files import MayRead, check_accepted, check_files
from .loading import resolve
from .metrics import metrics_from_config
from .models import resolve_provider
from .pipelines import Pipeline
from .plugins import hooks
from .runs import Run, RunResult, close_tail
from .schedules import Schedule, tick_run_id
from .tails import LogFollower, tail
from .tasks import Task
from .tracing import tracer_from_environment
from .transports import TRANSPORTS
from .webhooks.runs import wait_for_report

#: ``RunResult`` was declared here before runs.py; its old path is kept for one release.
__all__ = ["Bread", "Run", "RunResult", "create_bread"]


class Bread:
    """One runtime instance: agents, a store, a transport, listeners."""

    def __init__(self, config: Config):
        self.config = config
        self.agents: dict[str, Agent] = {agent.id: agent for agent in config.agents}
        #: Agents of other servers by local id (``Config.remote_agents``); they shadow local ones.
        self.remote_agents: dict[str, Any] = dict(config.remote_agents)
        self.tasks: dict[str, Task] = {task.id: task for task in config.tasks}
        self.pipelines: dict[str, Pipeline] = {pipeline.id: pipeline for pipeline in config.pipelines}
        self.store = make_store(config)
        self.blob_store = make_blob_store(config)
        self.sessions = SessionGuard(self)
        self.transport = resolve(config.transport or "http-chunked", TRANSPORTS, "transport")
        self._owner_tag = uuid.uuid4().hex[:8]
        self.cancels = registry
        self._listeners: list[Callable[[Frame], None]] = []
        #: Hands each crumb the choke point logged to the listeners and the transport.
        self.publish = fan_out(self._listeners, self.transport)
        self.leases = LeaseKeeper(self)
        self.follower = LogFollower(self)
        #: Where an opened run is driven: here (inline), or queued for workers (executors/).
        self.executor = make_executor(config)
        #: Whether this instance carries on runs whose owner is gone (engine/recovery.py); a
        #: server worker that is shutting down hands runs over and takes none, nor does a web
        #: tier whose runs are queued: its workers do (the Huey consumer sets it).
        self.carries_on = not self.executor.queues
        #: Traces runs when the ``OTEL_*`` variables ask for it (bread_sync/tracing/), else None.
        #: Set it to ``bread_sync.tracing.otel.tracer(provider)`` to trace to a provider of yours.
        self.tracer = tracer_from_environment()
        #: Counts runs, crumbs and requests when ``config.server.metrics`` is on (bread_sync/metrics/), else None.
        self.metrics = metrics_from_config(config)
        for on_crumb in hooks(config.plugins, "on_crumb"):
            self.on("crumb", on_crumb)

    @property
    def owner(self) -> str:
        """What this process's run records name as their owner (see engine/owners.py). Read in the
        process that runs them: a worker forked after the ``Bread`` was made names itself."""
        return owners.this_process(self._owner_tag)

    # -- public API --------------------------------------------------------------------------

    def file_meta(self, url: str) -> dict[str, Any] | None:
        """The metadata of the stored file ``url`` names (``/files/<id>``), its bytes unread;
        None when there is no such file or no blob store."""
        return None if self.blob_store is None else meta_of(self.blob_store, url)

    def on(self, event: str, fn: Callable[[Frame], None]) -> Callable[[], None]:
        """Call ``fn(frame)`` for every crumb of every run of this instance; returns an undo."""
        if event != "crumb":
            raise ValueError(f"unknown event {event!r}: the only event is 'crumb'")
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def start(self) -> Bread:
        """Recover the runs whose owner is gone (carried on here, or interrupted: see
        engine/recovery.py). Safe to call in every process."""
        recovery.sweep(self)
        return self

    def let_go(self) -> None:
        """End the runs and let go of the tails their callers dropped unclosed, whose finalizers
        only queued their clean-up (engine/lease.py, tails/follower.py ``drop``): here, so call
        it only where no lock is held. The lease keeper and the log follower do at their passes;
        so do a run's opening (before its session's claim: engine/opening.py), a server
        worker's periodic pass and :meth:`close`."""
        self.leases.let_go()
        self.follower.let_go()

    def close(self) -> None:
        """Stop this instance's background work and close its store's connections."""
        self.let_go()  # while the store is open: a dropped run's end is written
        self.leases.stop()
        if self.tracer is not None:
            self.tracer.close()
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    def run(
        self,
        agent_id: str,
        input: Any = None,
        *,
        session: dict[str, Any] | str | None = None,
        skill: str | None = None,
        signal: CancelToken | None = None,
        run_id: str | None = None,
        session_policy: str | None = None,
        may_interrupt: Callable[[str], bool] | None = None,
        state: dict[str, Any] | None = None,
        context: list[dict[str, Any]] | None = None,
        after: datetime | None = None,
        mode: str = "stream",
        may_read_file: MayRead | None = None,
    ) -> Any:
        """Start a run of ``agent_id``; an iterator of its crumbs, or with ``mode="sync"`` its
        :class:`RunResult`. Errors found before the run exists (unknown agent, provider or
        skill, input failing the schema) raise :class:`BreadError` and log nothing. Under the
        ``interrupt`` session policy, ``may_interrupt(run_id)`` (when given) must allow the
        cancel of the run holding the session, else it is ``SESSION_BUSY``.

        ``state`` (a JSON object) replaces the session's state, which tools read as
        ``ctx.state`` and providers as ``request.session_state``; without it the run has the
        state its session kept. ``context`` (``[{description, value}]``) is this run's only:
        ``ctx.context``, ``request.context``. A remote agent's run
        relays the remote run (engine/relay.py); what the remote refuses ends it, logged.
        ``after`` (a timezone-aware datetime) delays the run: it opens now and waits queued
        until then (engine/queued.py). File references in ``input`` (bread_sync/files.py) must
        name stored files that ``may_read_file(metadata)`` (when given) allows and that the
        agent's model takes."""
        make_root, state, context = self._root_maker(agent_id, input, skill, state, context, may_read_file)
        check_queue(self.executor)
        opened = open_run(
            self,
            make_root,
            session,
            run_id=run_id,
            signal=signal,
            session_policy=session_policy,
            may_interrupt=may_interrupt,
            state=state,
            context=context,
            after=_epoch(after),
        )
        return self._deliver(self._started(opened, run_id, agent_id), mode)

    def _root_maker(
        self,
        agent_id: str,
        input: Any,
        skill: str | None,
        state: Any,
        context: Any,
        may_read_file: MayRead | None = None,
    ) -> tuple[Callable[[RunContext], Any], dict[str, Any] | None, list[dict[str, Any]] | None]:
        """What makes the root activity of a run of ``agent_id``, and the run's state and context,
        each checked in the order their errors are told. A remote agent's input is the remote's
        to judge, and its relay keeps no state."""
        if agent_id in self.remote_agents:
            return partial(_relay, agent_id, input, skill), None, None
        agent = self.agent(agent_id)
        skill = self._skill(agent, skill)
        state, context = check_state(state, context)
        validated = agent.validate_input(input)
        provider, _ = resolve_provider(agent.model)
        check_files(validated, self.blob_store, may_read_file, provider)
        return partial(RunContext.activity_for, agent=agent, input=validated, skill=skill, record=True), state, context

    def run_pipeline(
        self,
        pipeline_id: str,
        input: Any = None,
        *,
        session: dict[str, Any] | str | None = None,
        signal: CancelToken | None = None,
        run_id: str | None = None,
        after: datetime | None = None,
        mode: str = "stream",
        may_read_file: MayRead | None = None,
    ) -> Any:
        """Run a pipeline under one run id: every step's crumbs framed by ``pipeline:step:start``
        / ``pipeline:step:end``, ending with ``agent:run:end`` carrying the last step's output.
        ``after`` delays it, and ``may_read_file`` checks its input's files, as :meth:`run`'s."""
        pipeline = self.pipeline(pipeline_id)
        make_root = pipeline_root(self, pipeline, input, may_read_file)
        check_queue(self.executor)
        opened = open_run(self, make_root, session, run_id=run_id, signal=signal, after=_epoch(after))
        return self._deliver(self._started(opened, run_id, pipeline.id), mode)

    def run_task(self, task_id: str, args: Any, *, signal: CancelToken | None = None) -> Any:
        """Call a task once; its validated output. Bad args are ``INPUT_INVALID``, a model
        answer that fails the output schema ``OUTPUT_INVALID``."""
        return run_task(self.store, self.task(task_id), args, signal)

    def run_scheduled(self, schedule: Schedule, tick: datetime) -> str | None:
        """Open ``schedule``'s run of the minute ``tick`` unless another process did: its run id,
        else None. The run is an ordinary one, with its own record, queued for a worker when the
        executor queues (its opening is driven here). Every worker's tick calls this; the tick's
        run id, made from the schedule and the minute, is created once in the store."""
        run_id = tick_run_id(schedule, tick)
        make_root, _, _ = self._root_maker(schedule.agent_id, schedule.input, None, None, None)
        opened = open_run(self, make_root, schedule.session, run_id=run_id)
        if opened is None:
            return None
        drain(opened.labels, opened.crumbs)
        return run_id

    def resume(
        self,
        checkpoint_id: str,
        response: Any,
        *,
        signal: CancelToken | None = None,
        may_interrupt: Callable[[str], bool] | None = None,
        state: dict[str, Any] | None = None,
        context: list[dict[str, Any]] | None = None,
        mode: str = "stream",
    ) -> Any:
        """Continue a paused run from its checkpoint, in this or any process sharing the store
        (``may_interrupt``, ``state`` and ``context`` as for :meth:`run`: the continuation has
        the session's state unless given one, and only the context given here).

        The response is validated before the checkpoint is claimed, so a malformed one does
        not burn it; a checkpoint resumes once (``CHECKPOINT_ALREADY_RESUMED``)."""
        check_queue(self.executor)
        opened = open_continuation(
            self, checkpoint_id, response, signal=signal, may_interrupt=may_interrupt, state=state, context=context
        )
        return self._deliver(self._run_of(opened), mode)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run: live here, queued (it never starts), paused, or running in another
        process (recorded in the store for its owner to honour, and sent on the transport's
        cancel channel if it has one). False when the run is unknown or already finished."""
        if self.cancels.cancel(run_id):
            return True
        record = self.store.get_run(run_id)
        if record is None:
            return False
        if record["status"] == "queued" and queued.cancel_queued(self, record):
            return True
        record = self.store.get_run(run_id) or record  # claimed by a worker meanwhile: running
        if record["status"] == "paused":
            return recovery.cancel_paused(self, record)
        if record["status"] == "running":
            if recovery.orphaned(self, record):
                return recovery.cancel_orphaned(self, record)
            if not self.store.update_run(run_id, expect={"status": "running"}, cancelRequested=True):
                return False
            self.leases.announce_cancel(run_id)
            return True
        return False

    def wait(self, run_id: str, timeout: float) -> dict[str, Any] | None:
        """Wait up to ``timeout`` seconds for a run, driven by any process sharing the store,
        to end or pause; its report (its record with ``output``, ``error``, ``checkpoint`` and
        ``seq``: what ``GET /runs/<runId>/wait`` answers), as it stands when the time is up.
        None when the run is unknown."""
        return wait_for_report(self.store, run_id, timeout)

    def tail(self, run_id: str, after: int = 0, **opts: Any) -> Iterator[Any]:
        """Follow a run from any process sharing the store: its log past ``after``, then live
        frames, to its terminal crumb. See :func:`bread_sync.tails.tail` for the options."""
        return tail(self, run_id, after, **opts)

    def _started(self, opened: Opened | None, run_id: str | None, definition_id: str) -> Run:
        # None: a retried request with the same runId, which follows the run it started.
        if opened is None:
            assert run_id is not None  # only a runId the caller gave can name a run that exists
            return self._attach(run_id, definition_id)
        return self._run_of(opened)

    def _run_of(self, opened: Opened) -> Run:
        run_id, session_id, agent_id, trace = opened.labels
        rest = partial(_ToPause, self, run_id) if opened.queued else None
        return Run(
            run_id,
            opened.crumbs,
            first_seq=opened.first_seq,
            session_id=session_id,
            agent_id=agent_id,
            trace=trace,
            rest=rest,
            ready=opened.ready,
            keeper=self.leases,
        )

    def _attach(self, run_id: str, agent_id: str) -> Run:
        # A retried request with the same runId follows the run it started, to its end or pause.
        record = self.store.get_run(run_id)
        if record is None or record["agentId"] != agent_id:
            raise BreadError(RUN_ID_CONFLICT, f"run {run_id} exists and belongs to another agent or pipeline")
        return Run(run_id, _ToPause(self, run_id), attached=True, session_id=record["sessionId"], agent_id=agent_id)

    def task(self, task_id: str) -> Task:
        task = self.tasks.get(task_id)
        if task is None:
            raise BreadError(TASK_NOT_FOUND, f"no task {task_id!r}")
        return task

    def pipeline(self, pipeline_id: str) -> Pipeline:
        pipeline = self.pipelines.get(pipeline_id)
        if pipeline is None:
            raise BreadError(PIPELINE_NOT_FOUND, f"no pipeline {pipeline_id!r}")
        return pipeline

    def agent(self, agent_id: str) -> Agent:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise BreadError(AGENT_NOT_FOUND, f"no agent {agent_id!r}")
        return agent

    def check_file_type(self, agent_id: str, media_type: str) -> None:
        """``FILE_NOT_ACCEPTED`` unless the model of ``agent_id`` takes files of ``media_type``,
        as a run's input files are checked (a remote agent's are the remote's to judge): for a
        bridge that must know before it stores a file a run would be refused for."""
        if agent_id in self.remote_agents:
            return
        provider, _ = resolve_provider(self.agent(agent_id).model)
        check_accepted(provider, media_type)

    def served_agents(self) -> list[ServedAgent]:
        """The agents this instance serves: those ``config.entrypoints`` names, or all, its own
        then the remote ones (a remote agent shadows an own agent of its id). The one answer
        ``GET /agents``, the in-process client's manifest and the MCP tools all give."""
        own = [ServedAgent(a.id, a) for a in self.agents.values() if a.id not in self.remote_agents]
        remote = [ServedAgent(id, agent, remote=True) for id, agent in self.remote_agents.items()]
        return [served for served in own + remote if self.serves(served.id)]

    def serves(self, agent_id: str) -> bool:
        """Whether ``config.entrypoints`` (when set) names ``agent_id``: an agent it leaves out
        (a subagent, say) is not listed, and runs over HTTP only as a tool of one it names."""
        entrypoints = self.config.entrypoints
        return entrypoints is None or agent_id in entrypoints

    # -- runs whose process died (engine/recovery.py) ----------------------------------------

    #: Whether a running run's owner is gone (engine/recovery.py); kept here for one release.
    owner_gone = staticmethod(recovery.owner_gone)

    def sweep_interrupted(self) -> int:
        """Recover every running run whose owner is gone: carried on here (or its relay taken
        over), else interrupted; and submit again the runs queued past a lease (a lost
        enqueue). How many this process did."""
        return recovery.sweep(self) + queued.requeue_stale(self)

    def interrupt(self, record: dict[str, Any]) -> bool:
        """End a run whose owner died with ``RUN_INTERRUPTED``; False when the record changed
        since it was read."""
        return recovery.interrupt(self, record)

    def adopt(self, record: dict[str, Any]) -> bool:
        """Take over the relay of a remote agent's run whose owner died; False when another
        process claimed it first."""
        return recovery.adopt(self, record)

    @staticmethod
    def _skill(agent: Agent, name: str | None) -> str | None:
        if name is not None and name not in agent.skills:
            raise BreadError(SKILL_NOT_FOUND, f"agent {agent.id!r} has no skill {name!r}")
        return name

    @staticmethod
    def _deliver(run: Run, mode: str) -> Any:
        if mode == "sync":
            return run.result()
        if mode != "stream":
            raise ValueError(f"mode must be 'stream' or 'sync', not {mode!r}")
        return run


class _ToPause:
    """A run's crumbs followed from any process past ``after`` (its tail's frames, no gap) to
    its end or pause; the tail subscribes only once this is iterated. Not a generator, for the
    reason :class:`~bread_sync.runs._ThenFollow` gives: closed, it closes the tail now."""

    __slots__ = ("_after", "_bread", "_frames", "_run_id")

    def __init__(self, bread: Bread, run_id: str, after: int = 0):
        self._bread, self._run_id, self._after = bread, run_id, after
        self._frames: Iterator[Any] | None = None

    def __iter__(self) -> _ToPause:
        return self

    def __next__(self) -> dict[str, Any]:
        frames = self._frames
        if frames is None:
            frames = self._frames = tail(self._bread, self._run_id, self._after, through_pause=False)
        while True:
            frame = next(frames)
            if isinstance(frame, Frame):
                return frame.crumb

    def close(self) -> None:
        frames, self._frames = self._frames, iter(())
        close_tail(frames)


def create_bread(config: Config | None = None) -> Bread:
    """A ``Bread`` for ``config`` (by default the one ``BREAD_CONFIG`` names, else the demo)."""
    if config is None:
        from .config import load_config

        config = load_config()
    return Bread(config)


def _epoch(when: datetime | None) -> float | None:
    if when is not None and when.tzinfo is None:
        raise ValueError("after must be a timezone-aware datetime (datetime.now(UTC) + ...), not a naive one")
    return None if when is None else when.timestamp()


def _relay(agent_id: str, input: Any, skill: str | None, ctx: RunContext) -> Relay:
    """The root activity of a remote agent's run; the remote run's id is chosen here."""
    return Relay(ctx, agent_id, input, skill, new_id("run"))
