"""One run's execution: the agent loop, its pauses for a human, and how it ends.

The loop yields crumbs; :meth:`Execution.start` passes each through the choke point and on to
the caller, checks the cancel token between them, and makes sure the run ends with exactly one
terminal crumb (or a pause) whatever happens.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from . import crumbs as c
from .agents import Agent, ToolContext
from .cancel import CancelToken
from .emitter import Emitter
from .errors import (
    INTERNAL,
    RUN_CANCELLED,
    RUN_INTERRUPTED,
    SEQ_CONFLICT,
    TOOL_DENIED,
    TOOL_FAILED,
    BreadError,
    internal_error,
)
from .models import (
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    ToolSpec,
    resolve_provider,
)
from .stores import now_iso

if TYPE_CHECKING:
    from .runtime import Bread

log = logging.getLogger("bread_sync")

CHECKPOINT_VERSION = 1
MAX_STEPS_EXCEEDED = "agent {agent!r} made more than {limit} model calls in one run"


@dataclass
class RunState:
    """What a continuation needs besides the log; a checkpoint is this plus the pause."""

    run_id: str
    agent_id: str
    input: Any
    skill: str | None
    session_id: str
    session_tags: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    model_state: dict[str, Any] = field(default_factory=dict)
    frames: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0

    @classmethod
    def from_checkpoint(cls, checkpoint: dict[str, Any]) -> RunState:
        return cls(**{k: checkpoint["state"][k] for k in cls.__dataclass_fields__})


class Execution:
    def __init__(self, bread: Bread, agent: Agent, state: RunState, token: CancelToken, emitter: Emitter):
        self.bread = bread
        self.agent = agent
        self.state = state
        self.token = token
        self.emitter = emitter
        self.store = bread.store
        self._final: str | None = None

    # -- the driver -------------------------------------------------------------------------

    def start(self, resume: tuple[dict[str, Any], Any] | None = None) -> Iterator[dict[str, Any]]:
        run_id = self.state.run_id
        self.bread.cancels.register(run_id, self.token)
        self.bread._keeper.watch(run_id)
        steps = self._resumed(*resume) if resume else self._started()
        try:
            for crumb in steps:
                self.emitter.emit(crumb)
                yield crumb
                if crumb["type"] == c.HUMAN_REQUIRED:
                    self._final = "paused"
                    return
                if crumb["type"] == c.AGENT_RUN_END:
                    self._finish("completed")
                    return
                self.token.raise_if_cancelled()
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
            self.bread.cancels.unregister(run_id, self.token)
            self.bread._keeper.unwatch(run_id)
            if self._final is None:  # the caller stopped pulling: nobody will drive this run
                self._abandon()

    def _fail(self, error: BreadError) -> dict[str, Any]:
        crumb = c.error_crumb(self.state.run_id, error)
        self.emitter.emit(crumb)
        self._finish({RUN_CANCELLED: "cancelled", RUN_INTERRUPTED: "interrupted"}.get(error.code, "failed"))
        return crumb

    def _abandon(self) -> None:
        # Only while this process still owns the run: another may have ended it meanwhile.
        self._final = "interrupted"
        owned = {"status": "running", "owner": self.bread.owner}
        if self.store.update_run(self.state.run_id, expect=owned, status="interrupted", owner=None):
            error = BreadError(RUN_INTERRUPTED, "the run was abandoned before it ended")
            try:
                self.emitter.emit(c.error_crumb(self.state.run_id, error))
            except BreadError as exc:
                log.warning("run %s: could not log its interruption (%s)", self.state.run_id, exc.code)

    def _finish(self, status: str) -> None:
        self._final = status
        self.store.update_run(self.state.run_id, status=status, owner=None)

    # -- the agent loop ---------------------------------------------------------------------

    def _started(self) -> Iterator[dict[str, Any]]:
        state = self.state
        start = {"type": c.AGENT_RUN_START, "runId": state.run_id, "agentId": self.agent.id,
                 "sessionId": state.session_id, "input": state.input}  # fmt: skip
        if state.skill:
            start["skill"] = state.skill
        if self.agent.before_run is not None:
            try:
                rewritten = self.agent.before_run(state.input, self._context())
            except Exception:
                yield start  # the run exists: its log opens before it records the failure
                raise
            if rewritten is not None:
                state.input = start["input"] = rewritten
        self.store.touch_session(state.session_id, state.session_tags)
        history = self.store.get_session(state.session_id) or {"messages": []}
        state.messages = [_for_model(m) for m in history["messages"]]
        yield start
        self._remember({"role": "user", "content": _as_text(state.input)})
        yield from self._loop()

    def _resumed(self, checkpoint: dict[str, Any], response: Any) -> Iterator[dict[str, Any]]:
        yield {"type": c.HUMAN_RESUMED, "runId": self.state.run_id,
               "checkpointId": checkpoint["id"], "response": response}  # fmt: skip
        call = self.state.pending.pop(0)
        if checkpoint["kind"] == "input":
            yield self._tool_result(call, response)
        elif response["approved"]:
            yield self._invoke(call)
        else:
            denied = BreadError(TOOL_DENIED, f"the human denied the call to {call['name']}")
            yield self._tool_error(call, denied)
        if (yield from self._run_pending()):
            return
        yield from self._loop()

    def _loop(self) -> Iterator[dict[str, Any]]:
        state = self.state
        while True:
            if state.steps >= self.agent.max_steps:
                raise BreadError(INTERNAL, MAX_STEPS_EXCEEDED.format(agent=self.agent.id, limit=self.agent.max_steps))
            state.steps += 1
            text, calls = yield from self._model_turn()
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["toolCalls"] = calls
            self._remember(message)
            if not calls:
                yield {
                    "type": c.AGENT_RUN_END,
                    "runId": state.run_id,
                    "output": self.agent.parse_output(text),
                }
                return
            state.pending = list(calls)
            if (yield from self._run_pending()):
                return

    def _model_turn(self) -> Iterator[dict[str, Any]]:
        provider, model_name = resolve_provider(self.agent.model)
        request = ModelRequest(
            model=model_name, system=self._system_prompt(), messages=list(self.state.messages),
            tools=[ToolSpec(t.name, t.description, t.parameters()) for t in self.agent.tools],
            signal=self.token, input=self.state.input, output_format=self.agent.output_format,
            state=self.state.model_state,
        )  # fmt: skip
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        streamed: set[str] = set()
        events = provider.stream(request)
        try:
            for event in events:
                self.token.raise_if_cancelled()
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ToolInputStart):
                    streamed.add(event.id)
                elif isinstance(event, ToolCall):
                    calls.append({"id": event.id, "name": event.name, "input": event.input})
                    if event.id not in streamed:
                        continue  # a call that was not streamed has no tool:input:* to close
                yield self._crumb_of(event)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        self.token.raise_if_cancelled()
        return "".join(text), calls

    def _crumb_of(self, event: Any) -> dict[str, Any]:
        crumb: dict[str, Any] = {"runId": self.state.run_id}
        if isinstance(event, TextDelta):
            return {"type": c.TEXT_DELTA, **crumb, "delta": event.text}
        crumb["toolCallId"] = event.id
        if isinstance(event, ToolInputStart):
            return {"type": c.TOOL_INPUT_START, **crumb, "toolName": event.name}
        if isinstance(event, ToolInputDelta):
            return {"type": c.TOOL_INPUT_DELTA, **crumb, "delta": event.delta}
        return {"type": c.TOOL_INPUT_END, **crumb}

    def _run_pending(self) -> Iterator[dict[str, Any]]:
        """Run the turn's remaining tool calls in order; True if the run paused for a human."""
        state = self.state
        while state.pending:
            call = state.pending[0]
            yield {"type": c.TOOL_CALL, "runId": state.run_id, "toolCallId": call["id"],
                   "toolName": call["name"], "input": call["input"]}  # fmt: skip
            tool = self.agent.tool(call["name"])
            if tool is not None and tool.human_kind is not None:
                yield self._pause(call, tool.human_kind)
                return True
            state.pending.pop(0)
            self.token.raise_if_cancelled()
            yield self._invoke(call)
            self.token.raise_if_cancelled()
        return False

    def _pause(self, call: dict[str, Any], kind: str) -> dict[str, Any]:
        state = self.state
        checkpoint_id = f"cp_{uuid.uuid4().hex}"
        crumb = {"type": c.HUMAN_REQUIRED, "runId": state.run_id, "checkpointId": checkpoint_id, "kind": kind,
                 "toolCallId": call["id"], "toolName": call["name"], "input": call["input"]}  # fmt: skip
        checkpoint = {
            "version": CHECKPOINT_VERSION, "id": checkpoint_id, "runId": state.run_id,
            "agentId": state.agent_id, "kind": kind, "toolCallId": call["id"], "toolName": call["name"],
            "input": call["input"], "status": "pending", "createdAt": now_iso(),
            # the human:required crumb takes emitter.next_seq; the continuation starts after it
            "nextSeq": self.emitter.next_seq + 1, "state": asdict(state),
        }  # fmt: skip
        self.store.save_checkpoint(checkpoint)
        self.store.update_run(state.run_id, status="paused", checkpointId=checkpoint_id, owner=None)
        return crumb

    def _invoke(self, call: dict[str, Any]) -> dict[str, Any]:
        tool = self.agent.tool(call["name"])
        if tool is None:
            return self._tool_error(call, BreadError(TOOL_FAILED, f"there is no tool {call['name']!r}"))
        try:
            output = tool.fn(tool.validate_input(call["input"]), self._context())
        except BreadError as exc:
            return self._tool_error(call, exc)
        except Exception as exc:
            log.exception("tool %s failed in run %s", call["name"], self.state.run_id)
            return self._tool_error(
                call, BreadError(TOOL_FAILED, f"tool {call['name']!r} failed ({type(exc).__name__})")
            )
        return self._tool_result(call, _jsonable(output))

    def _tool_result(self, call: dict[str, Any], output: Any) -> dict[str, Any]:
        self._remember({"role": "tool", "toolCallId": call["id"], "name": call["name"], "content": json.dumps(output)})
        return {"type": c.TOOL_RESULT, "runId": self.state.run_id, "toolCallId": call["id"],
                "toolName": call["name"], "output": output}  # fmt: skip

    def _tool_error(self, call: dict[str, Any], error: BreadError) -> dict[str, Any]:
        wire = {"code": error.code, "message": error.message}
        self._remember({"role": "tool", "toolCallId": call["id"], "name": call["name"],
                        "content": json.dumps({"error": wire}), "error": wire})  # fmt: skip
        return {"type": c.TOOL_ERROR, "runId": self.state.run_id, "toolCallId": call["id"],
                "toolName": call["name"], "error": error}  # fmt: skip

    # -- helpers ----------------------------------------------------------------------------

    def _remember(self, message: dict[str, Any]) -> None:
        """Add a message to what the model sees and to the session's history."""
        self.state.messages.append(message)
        self.store.append_messages(self.state.session_id, [{**message, "runId": self.state.run_id, "at": now_iso()}])

    def _system_prompt(self) -> str:
        skill = self.agent.skills.get(self.state.skill) if self.state.skill else None
        parts = [self.agent.prompt.strip(), skill and f"# Skill: {skill.name}\n\n{skill.instructions}"]
        return "\n\n".join(p for p in parts if p)

    def _context(self) -> ToolContext:
        return ToolContext(
            run_id=self.state.run_id, session_id=self.state.session_id, agent_id=self.agent.id,
            signal=self.token, logger=log.getChild("tools"),
        )  # fmt: skip


def _for_model(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("runId", "at")}


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value
