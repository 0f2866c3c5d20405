"""What every activity of one run shares: the runtime's parts it may use, the run's ids, its cancel
token, its choke point, and the table of activity kinds."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import crumbs as c
from ..agents import Agent, Tool, ToolContext
from ..blobs import media_type_or_opaque
from ..cancel import CancelToken
from ..errors import BLOB_STORE_NOT_CONFIGURED, BreadError
from ..usage import RunUsage
from . import RUN_ENDING, Runtime, Steps
from .emitter import Emitter

log = logging.getLogger("bread_sync")


@dataclass
class RunContext:
    """What the activities of one run share: the run's ids, its cancel token, its choke point,
    the runtime's parts, and the run's state and context. One per run or continuation, made
    where it opens (engine/opening.py): an activity never reaches the ``Bread`` but through it."""

    runtime: Runtime
    run_id: str
    session_id: str
    token: CancelToken
    emitter: Emitter
    #: Activity kind -> implementation (:data:`bread_sync.engine.kinds.KINDS`).
    kinds: dict[str, Any]
    #: The run's state: the one its caller gave, else its session's once read (None until then).
    state: dict[str, Any] | None = None
    #: The caller's ``[{description, value}]`` about its world, for this request's run only.
    context: list[dict[str, Any]] = field(default_factory=list)
    #: The tokens the run's models used so far, its tasks' and subagents' included (kept in its
    #: checkpoints and progress, so a continuation goes on counting).
    usage: RunUsage = field(default_factory=RunUsage)
    #: Its spans (a :class:`bread_sync.tracing.RunTrace`) when tracing is on, else None.
    trace: Any = None
    #: Whether the run's opening made its session's id: until its start crumb, nothing is
    #: stored under it, so there is no history or state to read.
    new_session: bool = False

    def activity_for(self, agent: Agent, input: Any, skill: str | None = None, record: bool = False) -> Any:
        """A new activity running ``agent``: its loop if it has one, else its turn."""
        kind = self.kinds["loop" if agent.loop is not None else "agent"]
        return kind(self, agent, input, skill, record)

    def restore(self, snapshot: dict[str, Any]) -> Any:
        """Rebuild an activity (and its children) from its checkpoint snapshot, by its kind."""
        return self.kinds[snapshot["kind"]].restore(self, snapshot)

    def start_crumb(self, agent_id: str, input: Any, skill: str | None = None, **more: Any) -> dict[str, Any]:
        """The run's ``agent:run:start`` crumb."""
        start = {
            "type": c.AGENT_RUN_START,
            "runId": self.run_id,
            "agentId": agent_id,
            **more,
            "sessionId": self.session_id,
            "input": input,
        }
        if skill:
            start["skill"] = skill
        if self.context:  # what a continuation of the run gives its tools again
            start["context"] = self.context
        return start

    def touch_session_with_next_crumb(self, tags: dict[str, str] | None, state: dict[str, Any] | None = None) -> None:
        """Create or touch the run's session (its tags, a state given) in the transaction of the
        next durable crumb (the start crumb): a client that sees it finds the session."""
        store, session_id = self.runtime.store, self.session_id
        self.emitter.defer(lambda: store.touch_session(session_id, tags, state))

    def trace_headers(self) -> dict[str, str]:
        """What a request this run sends out carries of its trace (nothing when tracing is off)."""
        return {} if self.trace is None else self.trace.context()

    def tool_context(self, agent_id: str) -> ToolContext:
        return ToolContext(
            run_id=self.run_id,
            session_id=self.session_id,
            agent_id=agent_id,
            signal=self.token,
            logger=log.getChild("tools"),
            blob_store=self.runtime.blob_store,
            state=self.session_state(),
            context=self.context,
        )

    def session_state(self) -> dict[str, Any]:
        """The run's state; a run given none has its session's, read once, when first asked."""
        if self.state is None:
            session = self.runtime.store.get_session(self.session_id)
            self.state = (session or {}).get("state") or {}
        return self.state

    def tool_parameters(self, tool: Tool) -> dict[str, Any]:
        if tool.kind == "task":
            return self.runtime.task(tool.delegate).input_schema.model_json_schema()
        if tool.kind == "subagent" and tool.delegate in self.runtime.remote_agents:
            return subagent_parameters(self.runtime.remote_agents[tool.delegate].input_schema())
        if tool.kind == "subagent":
            child = self.runtime.agent(tool.delegate)
            return subagent_parameters(child.input_schema.model_json_schema() if child.input_schema else None)
        return tool.parameters()

    def store_file(self, event: Any) -> dict[str, Any]:
        """Keep a model-generated file in the blob store; the ``file:generated`` crumb."""
        blobs = self.runtime.blob_store
        if blobs is None:
            raise BreadError(BLOB_STORE_NOT_CONFIGURED, "the model generated a file and no blob store is configured")
        mime_type = media_type_or_opaque(event.mime_type)  # a model's word, stored only if it is one
        stored = blobs.put(event.data, mime_type, event.name)
        crumb = {"type": c.FILE_GENERATED, "runId": self.run_id, "uri": stored["url"], "mimeType": mime_type}
        if event.name:
            crumb["name"] = event.name
        return crumb

    def framed_subagent(
        self, parent_id: str, child: Any, steps: Steps, ended: Callable[[Any], None], resumed: bool = False
    ) -> Steps:
        """A child agent's crumbs between ``subagent:run:start`` and ``subagent:run:end``;
        ``ended(outcome)`` (``{"output"}``, or ``{"error"}`` when it failed) is called before that
        end is yielded (the parent's state it goes with)."""
        frame = {"runId": self.run_id, "parentAgentId": parent_id, "subagentId": child.agent_id}
        if not resumed:
            yield {"type": c.SUBAGENT_RUN_START, **frame, "status": "running"}
        try:
            output = yield from steps
        except BreadError as exc:
            if exc.code not in RUN_ENDING:
                error = {"code": exc.code, "message": exc.message}
                ended({"error": error})
                yield {"type": c.SUBAGENT_RUN_END, **frame, "status": "failed", "error": error}
            raise
        ended({"output": output})
        yield {"type": c.SUBAGENT_RUN_END, **frame, "status": "completed", "output": output}
        return output


def subagent_parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """What a model is told a subagent takes: its input schema, else ``{"input": ...}``."""
    return input_schema or {"type": "object", "properties": {"input": {}}, "required": ["input"]}
