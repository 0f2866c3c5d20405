"""The ``Bread`` object: runs agents, resumes them, cancels them.

A run is a plain iterator of crumbs. Pulling it drives the run; every crumb goes through the
run's :class:`~bread_sync.engine.emitter.Emitter` (the choke point) before the caller sees it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import crumbs as c
from .agents import Agent, ServedAgent, Tool, check_response_kind
from .blobs import BLOB_STORES
from .cancel import CancelToken, registry
from .config import Config, default_db_path, postgres_url
from .crumbs import Frame
from .engine import owners
from .engine.context import RunContext
from .engine.emitter import Emitter, fan_out
from .engine.execution import Execution, open_agent_run
from .engine.kinds import KINDS
from .engine.lease import LeaseKeeper
from .engine.loops import close_loops
from .engine.pipelines import PipelineRun
from .engine.remote import RemoteRun, open_remote_run, quietly
from .engine.sessions import SessionGuard
from .engine.tasks import run_task
from .errors import (
    AGENT_NOT_FOUND,
    CHECKPOINT_ALREADY_RESUMED,
    CHECKPOINT_NOT_FOUND,
    INVALID_REQUEST,
    PIPELINE_NOT_FOUND,
    RUN_CANCELLED,
    RUN_ID_CONFLICT,
    RUN_INTERRUPTED,
    SEQ_CONFLICT,
    SKILL_NOT_FOUND,
    TASK_NOT_FOUND,
    BreadError,
    internal_error,
)
from .loading import resolve
from .logs import BoundRun, run_context
from .models import resolve_provider
from .pipelines import Pipeline
from .stores import STORES, now_iso
from .tails import LogFollower, tail
from .tasks import Task
from .transports import TRANSPORTS

log = logging.getLogger("bread_sync")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class RunResult:
    """What ``mode="sync"`` returns. ``status`` is ``completed``, ``paused``, ``failed`` or
    ``cancelled``; a paused run carries its ``checkpoint`` (``checkpointId``, ``kind``,
    ``toolName``, ``toolCallId``, ``input``)."""

    run_id: str
    status: str
    output: Any = None
    error: BreadError | None = None
    checkpoint: dict[str, Any] | None = None
    crumbs: list[dict[str, Any]] = field(default_factory=list, repr=False)


class Run:
    """A started run: iterate it for its crumbs. ``run_id`` is fixed before the first crumb."""

    def __init__(self, run_id: str, crumbs: Iterator[dict[str, Any]], attached: bool = False, first_seq: int = 1):
        self.run_id = run_id
        #: True when this follows a run another request started (same ``run_id``).
        self.attached = attached
        #: The seq of this stream's first durable crumb: 1, or where a resumed run continues.
        self.first_seq = first_seq
        self._steps = crumbs
        self._crumbs = BoundRun(run_id, crumbs)  # its log records carry run_id

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._crumbs

    def __next__(self) -> dict[str, Any]:
        return next(self._crumbs)

    def close(self) -> None:
        close = getattr(self._crumbs, "close", None)
        if close is not None:
            close()

    def drain(self) -> None:
        """Drive the run to its end or pause, for a caller that only needs it to happen (the
        server's runner: its clients read the crumbs from the transport). The run's id is set
        once around all the crumbs rather than per crumb.

        After each durable crumb other threads get their turn: its commit held this one (under
        gevent a SQLite call does not yield), and whoever streams the crumb should get to send
        it now rather than after the rest of the run. (Between the others the run's execution
        gives way every few milliseconds: :class:`~bread_sync.greenlets.Pacer`.)"""
        with run_context(self.run_id):
            for crumb in self._steps:
                if crumb["type"] not in c.NOT_DURABLE:
                    time.sleep(0)

    def result(self) -> RunResult:
        """Drive the run to its end or pause and sum it up."""
        seen = list(self._crumbs)
        return summarize(self.run_id, seen)


class Bread:
    """One runtime instance: agents, a store, a transport, listeners."""

    def __init__(self, config: Config):
        self.config = config
        self.agents: dict[str, Agent] = {agent.id: agent for agent in config.agents}
        #: Agents of other servers by local id (``Config.remote_agents``); they shadow local ones.
        self.remote_agents: dict[str, Any] = dict(config.remote_agents)
        self.tasks: dict[str, Task] = {task.id: task for task in config.tasks}
        self.pipelines: dict[str, Pipeline] = {pipeline.id: pipeline for pipeline in config.pipelines}
        self.store = self._make_store(config)
        self.blob_store = self._make_blob_store(config)
        self.sessions = SessionGuard(self)
        self.transport = resolve(config.transport or "http-chunked", TRANSPORTS, "transport")
        self._owner_tag = uuid.uuid4().hex[:8]
        self.cancels = registry
        self._listeners: list[Callable[[Frame], None]] = []
        self._publish = fan_out(self._listeners, self.transport)
        self.leases = LeaseKeeper(self)
        self.follower = LogFollower(self)
        for plugin in config.plugins:
            if callable(getattr(plugin, "on_crumb", None)):
                self.on("crumb", plugin.on_crumb)

    @property
    def owner(self) -> str:
        """What this process's run records name as their owner (see engine/owners.py). Read in the
        process that runs them: a worker forked after the ``Bread`` was made names itself."""
        return owners.this_process(self._owner_tag)

    @staticmethod
    def _make_store(config: Config) -> Any:
        if config.store == "postgres" or (config.store is None and postgres_url()):
            if postgres_url() is None:
                raise ValueError("the postgres store needs BREAD_DB=postgresql://user@host/database")
            return resolve("postgres", STORES, "store", url=postgres_url())
        if config.store is None or config.store == "sqlite":
            from .stores.sqlite import store

            return store(path=default_db_path(config))
        return resolve(config.store, STORES, "store")

    @staticmethod
    def _make_blob_store(config: Config) -> Any:
        if config.blob_store == "filesystem":
            from .blobs.filesystem import store

            return store(root=config.instance_path / "files")
        return resolve(config.blob_store, BLOB_STORES, "store")

    # -- public API --------------------------------------------------------------------------

    def on(self, event: str, fn: Callable[[Frame], None]) -> Callable[[], None]:
        """Call ``fn(frame)`` for every crumb of every run of this instance; returns an undo."""
        if event != "crumb":
            raise ValueError(f"unknown event {event!r}: the only event is 'crumb'")
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def start(self) -> Bread:
        """Mark runs whose owner died as interrupted. Safe to call in every process."""
        self.sweep_interrupted()
        return self

    def close(self) -> None:
        """Stop this instance's background work and close its store's connections."""
        self.leases.stop()
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
        mode: str = "stream",
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
        relays the remote run (engine/remote.py); what the remote refuses ends it, logged."""
        if agent_id in self.remote_agents:
            return self._deliver(self._run_remote(agent_id, input, session, skill, signal, run_id,
                                                  session_policy, may_interrupt), mode)  # fmt: skip
        agent = self.agent(agent_id)
        skill_name = self._skill(agent, skill)
        state, context = _check_state(state, context)
        validated = agent.validate_input(input)
        resolve_provider(agent.model)
        session_id, tags = _session_ref(session)
        if run_id is not None and self.store.get_run(run_id) is not None:  # a retried request
            return self._deliver(self._attach(run_id, agent.id), mode)
        run_id = run_id or new_id("run")
        claimed = self.sessions.claim(session_id, run_id, session_policy or agent.session_policy, may_interrupt)
        if not self.store.create_run(self._record(run_id, agent.id, session_id)):
            return self._deliver(self._attach(run_id, agent.id), mode)
        ctx = self._context(run_id, session_id, signal, state=state, context=context)
        root = ctx.activity_for(agent, validated, skill_name, record=True)
        wait = None if claimed else lambda: self.sessions.wait(session_id, run_id, ctx.token)
        opening = open_agent_run(ctx, root, agent, skill_name, tags, wait)
        return self._deliver(Run(run_id, Execution(ctx, root, opening).start()), mode)

    def _run_remote(
        self, agent_id: str, input: Any, session: Any, skill: str | None, signal: CancelToken | None,
        run_id: str | None, session_policy: str | None, may_interrupt: Callable[[str], bool] | None,
    ) -> Run:  # fmt: skip
        session_id, tags = _session_ref(session)
        if run_id is not None and self.store.get_run(run_id) is not None:  # a retried request
            return self._attach(run_id, agent_id)
        run_id = run_id or new_id("run")
        claimed = self.sessions.claim(session_id, run_id, session_policy or "reject", may_interrupt)
        # The remote run's id is chosen here and recorded before it is asked for, so whoever
        # takes the relay over knows which run to follow, and a retried POST attaches to it.
        record = {**self._record(run_id, agent_id, session_id), "remoteRunId": new_id("run"), "remoteSeq": 0}
        if not self.store.create_run(record):
            return self._attach(run_id, agent_id)
        ctx = self._context(run_id, session_id, signal)
        root = RemoteRun(ctx, agent_id, input, skill, record["remoteRunId"])
        wait = None if claimed else lambda: self.sessions.wait(session_id, run_id, ctx.token)
        opening = open_remote_run(ctx, root, skill, tags, wait)
        return Run(run_id, Execution(ctx, root, opening).start())

    def run_pipeline(
        self,
        pipeline_id: str,
        input: Any = None,
        *,
        session: dict[str, Any] | str | None = None,
        signal: CancelToken | None = None,
        run_id: str | None = None,
        mode: str = "stream",
    ) -> Any:
        """Run a pipeline under one run id: every step's crumbs framed by ``pipeline:step:start``
        / ``pipeline:step:end``, ending with ``agent:run:end`` carrying the last step's output."""
        pipeline = self.pipeline(pipeline_id)
        session_id, tags = _session_ref(session)
        run_id = run_id or new_id("run")
        if not self.store.create_run(self._record(run_id, pipeline.id, session_id)):
            return self._deliver(self._attach(run_id, pipeline.id), mode)
        ctx = self._context(run_id, session_id, signal)
        root = PipelineRun(ctx, pipeline, input)
        start = {"type": c.AGENT_RUN_START, "runId": run_id, "agentId": pipeline.id, "pipelineId": pipeline.id,
                 "sessionId": session_id, "input": input}  # fmt: skip
        self.store.touch_session(session_id, tags)
        return self._deliver(Run(run_id, Execution(ctx, root, iter([start])).start()), mode)

    def run_task(self, task_id: str, args: Any, *, signal: CancelToken | None = None) -> Any:
        """Call a task once; its validated output. Bad args are ``INPUT_INVALID``, a model
        answer that fails the output schema ``OUTPUT_INVALID``."""
        return run_task(self.store, self.task(task_id), args, signal)

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
        checkpoint = self.store.get_checkpoint(checkpoint_id)
        if checkpoint is None:
            raise BreadError(CHECKPOINT_NOT_FOUND, f"no checkpoint {checkpoint_id}")
        if checkpoint["status"] != "pending":
            raise BreadError(CHECKPOINT_ALREADY_RESUMED, f"checkpoint {checkpoint_id} was already used")
        state, context = _check_state(state, context)
        run_id, session_id = checkpoint["runId"], checkpoint["sessionId"]
        ctx = self._context(run_id, session_id, signal, next_seq=checkpoint["nextSeq"], state=state, context=context)
        root = ctx.restore(checkpoint["stack"])  # an agent or pipeline no longer configured fails here
        response = _validate_response(checkpoint["kind"], root.pending_tool(), response)
        claimed = self.sessions.claim(session_id, run_id, root.session_policy, may_interrupt)
        if not self.store.claim_checkpoint(checkpoint_id):
            self.sessions.release(session_id, run_id)
            raise BreadError(CHECKPOINT_ALREADY_RESUMED, f"checkpoint {checkpoint_id} was already used")
        self.store.update_run(
            run_id, status="running", checkpointId=None, owner=self.owner, leaseUntil=self._lease_end()
        )
        if state is not None:  # kept with the continuation's first crumb
            ctx.emitter.defer(lambda: self.store.touch_session(session_id, None, state))
        execution = Execution(ctx, root, None if claimed else self._wait_for_session(ctx))
        run = Run(run_id, execution.start(resume=(checkpoint, response)), first_seq=checkpoint["nextSeq"])
        return self._deliver(run, mode)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run: live here, paused, or running in another process (recorded in the
        store for its owner to honour, and sent on the transport's cancel channel if it has
        one). False when the run is unknown or already finished."""
        if self.cancels.cancel(run_id):
            return True
        record = self.store.get_run(run_id)
        if record is None:
            return False
        if record["status"] == "paused":
            return self._cancel_paused(record)
        if record["status"] == "running":
            if self.owner_gone(record):
                self.interrupt(record)
                record = self.store.get_run(run_id)  # a relay this process took over goes on
                if record["status"] != "running" or record["owner"] != self.owner:
                    return False
            if not self.store.update_run(run_id, expect={"status": "running"}, cancelRequested=True):
                return False
            self.leases.announce_cancel(run_id)
            return True
        return False

    def tail(self, run_id: str, after: int = 0, **opts: Any) -> Iterator[Any]:
        """Follow a run from any process sharing the store: its log past ``after``, then live
        frames, to its terminal crumb. See :func:`bread_sync.tails.tail` for the options."""
        return tail(self, run_id, after, **opts)

    def _attach(self, run_id: str, agent_id: str) -> Run:
        # A retried request with the same runId follows the run it started, to its end or pause.
        if self.store.get_run(run_id)["agentId"] != agent_id:
            raise BreadError(RUN_ID_CONFLICT, f"run {run_id} exists and belongs to another agent or pipeline")
        return Run(run_id, self._follow_to_pause(run_id), attached=True)

    def _follow_to_pause(self, run_id: str) -> Iterator[dict[str, Any]]:
        # A generator, so the tail subscribes only once someone iterates the attached run.
        for frame in tail(self, run_id, through_pause=False):
            if isinstance(frame, Frame):
                yield frame.crumb

    def _context(
        self, run_id: str, session_id: str, signal: CancelToken | None, next_seq: int = 1,
        state: dict[str, Any] | None = None, context: list[dict[str, Any]] | None = None,
    ) -> RunContext:  # fmt: skip
        emitter = Emitter(run_id, self.store, self._publish, next_seq=next_seq)
        return RunContext(self, run_id, session_id, signal or CancelToken(), emitter, KINDS, state, context or [])

    def _wait_for_session(self, ctx: RunContext) -> Iterator[Any]:
        # A continuation whose session another run holds waits for it before its first crumb.
        self.sessions.wait(ctx.session_id, ctx.run_id, ctx.token)
        yield from ()

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

    def served_agents(self) -> list[ServedAgent]:
        """The agents this instance serves: those ``config.entrypoints`` names, or all, its own
        then the remote ones (a remote agent shadows an own agent of its id). The one answer
        ``GET /agents``, the in-process client's manifest and the MCP tools all give."""
        entrypoints = self.config.entrypoints
        own = [ServedAgent(a.id, a) for a in self.agents.values() if a.id not in self.remote_agents]
        remote = [ServedAgent(id, agent, remote=True) for id, agent in self.remote_agents.items()]
        return [served for served in own + remote if entrypoints is None or served.id in entrypoints]

    # -- run records ------------------------------------------------------------------------

    def sweep_interrupted(self) -> int:
        """Mark every running run whose owner is gone as interrupted; how many were."""
        running = self.store.list_runs(status="running")
        return sum(self.interrupt(record) for record in running if self.owner_gone(record))

    def owner_gone(self, record: dict[str, Any]) -> bool:
        """Whether a running run's owner is gone: its lease lapsed, or it was a process of this
        host that no longer exists (known at once, see engine/owners.py)."""
        return record["leaseUntil"] < time.time() or owners.is_dead_local(record["owner"])

    def interrupt(self, record: dict[str, Any]) -> bool:
        """End a run whose owner died with ``agent:error`` ``RUN_INTERRUPTED``; False when the
        record changed since it was read (another process marked it, or its owner renewed), or
        when it was a remote agent's relay, which this process took over instead (:meth:`adopt`)."""
        if self._relay_of_the_dead(record):
            self.adopt(record)
            return False
        expect = {"status": "running", "owner": record["owner"], "leaseUntil": record["leaseUntil"]}
        if not self.store.update_run(record["id"], expect=expect, status="interrupted", owner=None):
            return False
        error = BreadError(RUN_INTERRUPTED, "the process running this run stopped")
        self._append_final(record["id"], c.error_crumb(record["id"], error))
        close_loops(self.store, record["id"], "interrupted")
        return True

    def _relay_of_the_dead(self, record: dict[str, Any]) -> bool:
        return (
            record["agentId"] in self.remote_agents and bool(record.get("remoteRunId"))
            and record["owner"] != self.owner and self.owner_gone(record)
        )  # fmt: skip

    def adopt(self, record: dict[str, Any]) -> bool:
        """Take over the relay of a remote agent's run whose owner died: claim the run (one
        process wins), and go on relaying the remote run after the position its record holds,
        under the same run id and seqs, in a thread of this process. A remote run that is gone
        ends the local one with ``RUN_INTERRUPTED``. False when another process claimed it first."""
        run_id = record["id"]
        expect = {"status": "running", "owner": record["owner"], "leaseUntil": record["leaseUntil"]}
        if not self.store.update_run(run_id, expect=expect, owner=self.owner, leaseUntil=self._lease_end()):
            return False
        remote = self.remote_agents[record["agentId"]]
        try:
            gone = remote.run_status(record["remoteRunId"]) is None
        except BreadError:
            gone = False  # not answering now: the relay keeps trying for a while
        if gone:
            self.interrupt(self.store.get_run(run_id))
            return True
        ctx = self._context(run_id, record["sessionId"], None, next_seq=self.store.last_seq(run_id) + 1)
        root = RemoteRun(ctx, record["agentId"], remote_run_id=record["remoteRunId"],
                         remote_seq=record["remoteSeq"] or 0, adopted=True)  # fmt: skip
        run = Run(run_id, Execution(ctx, root).start())
        threading.Thread(target=run.drain, name=f"bread-relay-{run_id}", daemon=True).start()
        log.warning("run %s: its owner is gone; this process took over its relay", run_id)
        return True

    def _cancel_paused(self, record: dict[str, Any]) -> bool:
        checkpoint_id = record["checkpointId"]
        if not checkpoint_id or not self.store.claim_checkpoint(checkpoint_id, status="void"):
            return False
        self.store.update_run(record["id"], status="cancelled", checkpointId=None)
        if record["agentId"] in self.remote_agents and record.get("remoteRunId"):
            quietly(self.remote_agents[record["agentId"]].cancel, record["remoteRunId"])
        error = BreadError(RUN_CANCELLED, "the run was cancelled while waiting for a human")
        self._append_final(record["id"], c.error_crumb(record["id"], error))
        close_loops(self.store, record["id"], "cancelled")
        return True

    def _append_final(self, run_id: str, crumb: dict[str, Any]) -> None:
        try:
            emitter = Emitter(run_id, self.store, self._publish, next_seq=self.store.last_seq(run_id) + 1)
            emitter.emit(crumb)
        except BreadError as exc:
            if exc.code != SEQ_CONFLICT:
                raise
            log.warning("run %s: a late writer took the final seq; its log ends as that writer left it", run_id)

    def _record(self, run_id: str, agent_id: str, session_id: str) -> dict[str, Any]:
        now = now_iso()
        return {
            "id": run_id, "agentId": agent_id, "sessionId": session_id, "status": "running",
            "checkpointId": None, "owner": self.owner, "leaseUntil": self._lease_end(),
            "cancelRequested": False, "createdAt": now, "updatedAt": now,
        }  # fmt: skip

    def _lease_end(self) -> float:
        return time.time() + self.config.lease_seconds

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


def create_bread(config: Config | None = None) -> Bread:
    """A ``Bread`` for ``config`` (by default the one ``BREAD_CONFIG`` names, else the demo)."""
    if config is None:
        from .config import load_config

        config = load_config()
    return Bread(config)


def summarize(run_id: str, seen: list[dict[str, Any]]) -> RunResult:
    last = seen[-1] if seen else None
    if last is None:
        return RunResult(run_id, "failed", error=internal_error(RuntimeError("no crumbs")), crumbs=seen)
    if last["type"] == c.AGENT_RUN_END:
        return RunResult(run_id, "completed", output=last["output"], crumbs=seen)
    if last["type"] == c.HUMAN_REQUIRED:
        keys = ("checkpointId", "kind", "toolName", "toolCallId", "input")
        return RunResult(run_id, "paused", checkpoint={k: last[k] for k in keys}, crumbs=seen)
    error = last.get("error")
    error = error if isinstance(error, BreadError) else BreadError.from_wire(error or {})
    status = "cancelled" if error.code == RUN_CANCELLED else "failed"
    return RunResult(run_id, status, error=error, crumbs=seen)


def _session_ref(session: dict[str, Any] | str | None) -> tuple[str, dict[str, str]]:
    if session is None:
        return new_id("ses"), {}
    if isinstance(session, str):
        return session, {}
    if not isinstance(session, dict):
        raise BreadError(INVALID_REQUEST, "session must be an object {id?, tags?}")
    tags = session.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise BreadError(INVALID_REQUEST, "session tags must be an object of strings")
    session_id = session.get("id") or new_id("ses")
    if not isinstance(session_id, str):
        raise BreadError(INVALID_REQUEST, "session id must be a string")
    return session_id, dict(tags)


def _check_state(
    state: dict[str, Any] | None, context: list[dict[str, Any]] | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    if state is not None and not isinstance(state, dict):
        raise BreadError(INVALID_REQUEST, "state must be a JSON object")
    if context is None:
        return state, []
    if not isinstance(context, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("description"), str) for entry in context
    ):
        raise BreadError(INVALID_REQUEST, "context must be a list of {description, value} objects")
    return state, context


def _validate_response(kind: str, tool: Tool | None, response: Any) -> Any:
    return tool.validate_response(kind, response) if tool is not None else check_response_kind(kind, response)
