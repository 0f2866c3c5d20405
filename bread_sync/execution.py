"""One run's execution: the driver that takes a run from its first crumb to its end or pause.

The driver pulls crumbs from the run's root activity (an agent, a loop or a pipeline; see
:mod:`bread_sync.agent_loop`), passes each through the choke point and on to the caller, checks
the cancel token between them, turns a :class:`~bread_sync.agent_loop.Pause` into a checkpoint
and a ``human:required`` crumb, and makes sure the run ends with exactly one terminal crumb.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import crumbs as c
from .agent_loop import RUN_ENDING, AgentLoop, Pause, Steps
from .agents import Agent, Tool, ToolContext
from .cancel import CancelToken
from .emitter import Emitter
from .errors import (
    BLOB_STORE_NOT_CONFIGURED,
    RUN_CANCELLED,
    RUN_INTERRUPTED,
    RUN_TIMEOUT,
    SEQ_CONFLICT,
    BreadError,
    internal_error,
)
from .greenlets import Pacer
from .stores import now_iso

if TYPE_CHECKING:
    from .runtime import Bread

log = logging.getLogger("bread_sync")

CHECKPOINT_VERSION = 1
STATUS_OF_ERROR = {RUN_CANCELLED: "cancelled", RUN_TIMEOUT: "cancelled", RUN_INTERRUPTED: "interrupted"}


@dataclass
class RunContext:
    """What every activity of one run shares: the runtime, the run's ids and its cancel token."""

    bread: Bread
    run_id: str
    session_id: str
    token: CancelToken
    emitter: Emitter

    def activity_for(self, agent: Agent, input: Any, skill: str | None = None, record: bool = False) -> Any:
        if agent.loop is not None:
            from .loops import LoopRun

            return LoopRun(self, agent, input, skill, record)
        return AgentLoop(self, agent, input, skill, record)

    def tool_context(self, agent_id: str) -> ToolContext:
        return ToolContext(
            run_id=self.run_id, session_id=self.session_id, agent_id=agent_id, signal=self.token,
            logger=log.getChild("tools"), blob_store=self.bread.blob_store,
        )  # fmt: skip

    def tool_parameters(self, tool: Tool) -> dict[str, Any]:
        if tool.kind == "task":
            return self.bread.task(tool.target).input_schema.model_json_schema()
        if tool.kind == "subagent":
            child = self.bread.agent(tool.target)
            if child.input_schema is not None:
                return child.input_schema.model_json_schema()
            return {"type": "object", "properties": {"input": {}}, "required": ["input"]}
        return tool.parameters()

    def store_file(self, event: Any) -> dict[str, Any]:
        """Keep a model-generated file in the blob store; the ``file:generated`` crumb."""
        blobs = self.bread.blob_store
        if blobs is None:
            raise BreadError(BLOB_STORE_NOT_CONFIGURED, "the model generated a file and no blob store is configured")
        stored = blobs.put(event.data, event.mime_type, event.name)
        crumb = {"type": c.FILE_GENERATED, "runId": self.run_id, "uri": stored["url"], "mimeType": event.mime_type}
        if event.name:
            crumb["name"] = event.name
        return crumb

    def call_task(self, task_id: str, args: Any, agent_id: str | None) -> Steps:
        from .tasks import framed_task

        return (yield from framed_task(self, self.bread.task(task_id), args, agent_id))

    def framed_subagent(self, parent_id: str, child: Any, steps: Steps, resumed: bool = False) -> Steps:
        """A child agent's crumbs between ``subagent:run:start`` and ``subagent:run:end``."""
        frame = {"runId": self.run_id, "parentAgentId": parent_id, "subagentId": child.agent.id}
        if not resumed:
            yield {"type": c.SUBAGENT_RUN_START, **frame, "status": "running"}
        try:
            output = yield from steps
        except BreadError as exc:
            if exc.code not in RUN_ENDING:
                error = {"code": exc.code, "message": exc.message}
                yield {"type": c.SUBAGENT_RUN_END, **frame, "status": "failed", "error": error}
            raise
        yield {"type": c.SUBAGENT_RUN_END, **frame, "status": "completed", "output": output}
        return output


def restore(ctx: RunContext, snap: dict[str, Any]) -> Any:
    """Rebuild an activity (and its children) from its checkpoint snapshot."""
    from .loops import LoopRun
    from .pipelines import PipelineRun

    kinds = {AgentLoop.kind: AgentLoop, LoopRun.kind: LoopRun, PipelineRun.kind: PipelineRun}
    return kinds[snap["kind"]].restore(ctx, snap)


class Execution:
    """Drives one run (or one continuation of it) through the choke point."""

    def __init__(self, ctx: RunContext, root: Any, opening: Steps | None = None):
        self.ctx = ctx
        self.root = root
        self.opening = opening
        self.bread = ctx.bread
        self.store = ctx.bread.store
        self.emitter = ctx.emitter
        self._final: str | None = None

    def start(self, resume: tuple[dict[str, Any], Any] | None = None) -> Iterator[dict[str, Any]]:
        run_id = self.ctx.run_id
        self.bread.cancels.register(run_id, self.ctx.token)
        self.bread._keeper.watch(run_id)
        steps = self._steps(resume)
        emit, token = self.emitter.emit, self.ctx.token
        # A model that never blocks (echo, a fast provider's buffered stream) would otherwise keep
        # a gevent worker from everyone else until the run ends, whoever pulls the crumbs.
        pace = Pacer().pace
        try:
            for item in steps:
                if isinstance(item, Pause):
                    crumb, final = self._pause(item), "paused"
                elif item["type"] == c.AGENT_RUN_END:
                    crumb, final = item, "completed"
                    self._end_with_next_crumb(final)
                else:
                    crumb, final = item, None
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
            yield self._fail(exc)
        except Exception as exc:
            log.exception("run %s failed", run_id)
            yield self._fail(internal_error(exc))
        finally:
            steps.close()
            self._unregister()
            if self._final is None:  # the caller stopped pulling: nobody will drive this run
                self._abandon()

    def _steps(self, resume: tuple[dict[str, Any], Any] | None) -> Steps:
        if self.opening is not None:
            yield from self.opening
        if resume is not None:
            checkpoint, response = resume
            yield {"type": c.HUMAN_RESUMED, "runId": self.ctx.run_id,
                   "checkpointId": checkpoint["id"], "response": response}  # fmt: skip
            output = yield from self.root.resume(response)
        else:
            output = yield from self.root.run()
        yield {"type": c.AGENT_RUN_END, "runId": self.ctx.run_id, "output": output}

    def _settled(self, status: str) -> None:
        """The crumb that ends (or pauses) the run is in the log: a cancel from now on is for a
        paused or ended run, not this process's live one."""
        self._final = status
        self._unregister()

    def _unregister(self) -> None:
        """No longer a live run of this process: not cancelled here, its lease not renewed."""
        self.bread.cancels.unregister(self.ctx.run_id, self.ctx.token)
        self.bread._keeper.unwatch(self.ctx.run_id)

    def _pause(self, pause: Pause) -> dict[str, Any]:
        ctx, call = self.ctx, pause.call
        checkpoint_id = f"cp_{uuid.uuid4().hex}"
        crumb = {"type": c.HUMAN_REQUIRED, "runId": ctx.run_id, "checkpointId": checkpoint_id, "kind": pause.kind,
                 "toolCallId": call["id"], "toolName": call["name"], "input": call["input"]}  # fmt: skip
        checkpoint = {
            "version": CHECKPOINT_VERSION, "id": checkpoint_id, "runId": ctx.run_id, "sessionId": ctx.session_id,
            "kind": pause.kind, "toolCallId": call["id"], "toolName": call["name"], "input": call["input"],
            "status": "pending", "createdAt": now_iso(),
            # the human:required crumb takes emitter.next_seq; the continuation starts after it
            "nextSeq": self.emitter.next_seq + 1, "stack": self.root.snapshot(),
        }  # fmt: skip
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
        """The run's status, and the release of its session, written in the transaction of the
        crumb that ends (or pauses) it: a client that sees that crumb finds the run settled.
        Only while this process still owns the run: if another declared it dead meanwhile, the
        whole transaction fails as a seq conflict would, and this process stops driving it."""
        store, run_id, session_id, owner = self.store, self.ctx.run_id, self.ctx.session_id, self.bread.owner

        def record_status() -> None:
            if not store.update_run(run_id, expect={"owner": owner}, status=status, owner=None, **fields):
                raise BreadError(SEQ_CONFLICT, f"run {run_id} is no longer this process's to end")

        self.emitter.defer(record_status)
        self.emitter.defer(lambda: self.bread.sessions.release(session_id, run_id))

    def _abandon(self) -> None:
        # Only while this process still owns the run: another may have ended it meanwhile.
        self._final = "interrupted"
        self.bread.sessions.release(self.ctx.session_id, self.ctx.run_id)
        owned = {"status": "running", "owner": self.bread.owner}
        if self.store.update_run(self.ctx.run_id, expect=owned, status="interrupted", owner=None):
            error = BreadError(RUN_INTERRUPTED, "the run was abandoned before it ended")
            try:
                self.emitter.emit(c.error_crumb(self.ctx.run_id, error))
            except BreadError as exc:
                log.warning("run %s: could not log its interruption (%s)", self.ctx.run_id, exc.code)


def open_agent_run(
    ctx: RunContext, root: Any, agent: Agent, skill: str | None, tags: dict[str, str],
    wait_for_session: Callable[[], None] | None = None,
) -> Steps:  # fmt: skip
    """The start of an agent's run: waiting for its session if another run holds it,
    ``before_run``, the session and its history, the start crumb."""
    start = {"type": c.AGENT_RUN_START, "runId": ctx.run_id, "agentId": agent.id,
             "sessionId": ctx.session_id, "input": root.input}  # fmt: skip
    if skill:
        start["skill"] = skill
    try:
        if wait_for_session is not None:
            wait_for_session()
        if agent.before_run is not None:
            rewritten = agent.before_run(root.input, ctx.tool_context(agent.id))
            if rewritten is not None:
                root.input = start["input"] = rewritten
    except Exception:
        yield start  # the run exists: its log opens before it records the failure
        raise
    store = ctx.bread.store
    ctx.emitter.defer(lambda: store.touch_session(ctx.session_id, tags))
    if isinstance(root, AgentLoop):
        from .agent_loop import for_model

        history = store.get_session(ctx.session_id) or {"messages": []}
        root.messages = [for_model(m) for m in history["messages"]]
    yield start
