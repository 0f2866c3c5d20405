"""One agent's turn-taking: model turns, tool calls, and pauses for a human.

An activity is a generator that yields crumbs (and, to pause, a :class:`~bread_sync.engine.Pause`),
and returns its output. Activities nest: a pipeline runs agents, an agent runs a subagent or a
task as a tool. Each keeps the contract of :mod:`bread_sync.engine`.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
from abc import abstractmethod
from collections.abc import Callable, Generator
from time import monotonic
from typing import Any, ClassVar

from .. import crumbs as c
from ..agents import Agent, Tool, ToolContext, ToolProgress
from ..clock import now_iso
from ..errors import INTERNAL, TOOL_DENIED, TOOL_FAILED, TOOL_OUTCOME_UNKNOWN, BreadError
from ..files import check_handed_down, for_model_call, message_files, user_message
from ..models import (
    FileOutput,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    ToolSpec,
    Usage,
    resolve_provider,
)
from ..tracing import model_call
from . import RUN_ENDING, Activity, Pause, Steps
from .context import RunContext
from .relay import Relay
from .task_run import TaskRun

log = logging.getLogger("bread_sync")

#: The durable crumbs of a model call under way (see AgentRun.changed_with).
MODEL_CALL_CRUMBS = frozenset({c.TOOL_INPUT_START, c.TOOL_INPUT_END})

MAX_STEPS_EXCEEDED = "agent {agent!r} made more than {limit} model calls in one run"
#: The least time between two ``tool:progress`` crumbs of one call: a chatty tool fills no log.
PROGRESS_INTERVAL_SECONDS = 1.0


class AgentActivity(Activity):
    """An activity that runs an agent (its turn, or its loop): the agent, the input, the skill,
    and whether it writes the session's history (only the run's own agent does)."""

    saved: ClassVar[dict[str, str]] = {
        "input": "input",
        "skill": "skill",
        "record": "record",
        "begun": "begun",
        "returned": "returned",
    }

    def __init__(self, ctx: RunContext, agent: Agent, input: Any, skill: str | None = None, record: bool = False):
        self.ctx = ctx
        self.agent = agent
        self.input = input
        self.skill = skill
        self.record = record
        self.child: Any = None
        #: Whether :meth:`run` began (a subagent's snapshot may be taken before).
        self.begun = False
        #: ``{"output": ...}`` once it returned (its caller's crumb may be logged after).
        self.returned: dict[str, Any] | None = None

    @property
    def session_policy(self) -> str:  # type: ignore[override]
        return self.agent.session_policy

    @property
    def agent_id(self) -> str:
        return self.agent.id

    def head(self) -> dict[str, Any]:
        return {"agentId": self.agent.id}

    def continuable(self) -> bool:
        return self.agent.continue_after_crash and super().continuable()

    @classmethod
    def rebuild(cls, ctx: RunContext, snapshot: dict[str, Any]) -> Any:
        agent = ctx.runtime.agent(snapshot["agentId"])
        return cls(ctx, agent, snapshot["input"], snapshot["skill"], snapshot["record"])

    def carry_on(self) -> Steps:
        """Go on from the state after the last durable crumb (:meth:`_go_on`): from its start
        when it had not begun, with its output when it had returned."""
        if not self.begun:
            return (yield from self.run())
        if self.returned is not None:
            return self.returned["output"]
        return (yield from self._go_on())

    @abstractmethod
    def run(self) -> Steps:
        """From the run's start (or the delegation's) to the agent's output."""

    @abstractmethod
    def _go_on(self) -> Steps:
        """Go on from where it stands, begun and not returned."""

    def open(self, tags: dict[str, str], wait_for_session: Callable[[], None] | None) -> Steps:
        """Waiting for the session, ``before_run`` (which may rewrite the input), then the start
        crumb, with the session's touch (and a state the run was given) in its transaction."""
        ctx, agent = self.ctx, self.agent
        start = ctx.start_crumb(agent.id, self.input, self.skill)
        try:
            if wait_for_session is not None:
                wait_for_session()
            if agent.before_run is not None:
                rewritten = agent.before_run(self.input, ctx.tool_context(agent.id))
                if rewritten is not None:
                    self.input = start["input"] = rewritten
        except Exception:
            yield start  # the run exists: its log opens before it records the failure
            raise
        ctx.touch_session_with_next_crumb(tags, ctx.state)  # a state the run was given replaces its session's
        self.read_session()
        yield start


class AgentRun(AgentActivity):
    """Runs an agent to its output. Only the run's own agent (``record=True``) writes the
    session's history; a subagent or a pipeline step keeps its messages to itself."""

    kind = "agent"
    saved: ClassVar[dict[str, str]] = {
        **AgentActivity.saved,
        "messages": "messages",
        "pending": "pending",
        "modelState": "model_state",
        "steps": "steps",
        "calling": "calling",
        "unknown": "unknown",
        "delegated": "delegated",
    }

    def __init__(self, ctx: RunContext, agent: Agent, input: Any, skill: str | None = None, record: bool = False):
        super().__init__(ctx, agent, input, skill, record)
        self.messages: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.model_state: dict[str, Any] = {}
        self.steps = 0
        #: The id of the call whose ``tool:call`` is logged and whose result is not yet.
        self.calling: str | None = None
        #: The id of that call once its outcome is known to be unknown (asked again, see carry_on).
        self.unknown: str | None = None
        #: Whether ``messages`` are its session's history, as the run's own turn has them (read
        #: at its start, written with its crumbs): its progress then leaves them to the session.
        self.in_session = False
        #: ``{"output": ...}`` (or ``{"error": {code, message}}``) of the subagent that call ran,
        #: once its end is logged.
        self.delegated: dict[str, Any] | None = None
        #: History entries waiting for the run's next durable crumb: one write for all of them.
        self._unwritten: list[dict[str, Any]] = []

    def read_session(self) -> None:
        """The session's history is the conversation so far; its state is read with it rather
        than again when first asked for."""
        ctx = self.ctx
        # A session the run's opening made has nothing stored yet: a read (a statement) finds nothing.
        history = None if ctx.new_session else ctx.runtime.store.get_session(ctx.session_id)
        history = history or {"messages": []}
        self.messages = [for_model(m) for m in history["messages"]]
        self.in_session = True
        if self.ctx.state is None:
            self.ctx.state = history.get("state") or {}

    def snapshot(self, progress: bool = False) -> dict[str, Any]:
        """As every kind's; the progress of the run's own turn leaves its messages out: the
        session's history written with the same crumbs holds them (a pause's checkpoint keeps
        them: the session is free while the run waits, and another run may write it)."""
        kept = super().snapshot(progress)
        if progress and self.in_session:
            kept["messages"] = len(self.messages)  # how many: a change is a change of progress
        return kept

    def changed_with(self, crumb_type: str) -> bool:
        """Two kinds of crumb of the run's own turn leave its progress as saved (with no subagent
        or remote one under way, whose crumbs they may be): a tool input's start or end, which
        comes from the model call under way, made again by a continuation, the turn's state
        moving only once it is made (unless a history entry waits to be written with it: the
        run's start); and its call's result or error, which a continuation reads from the log
        after its progress (:meth:`catch_up`), with the one history entry written with it."""
        if not self.record or self.child is not None:
            return True
        if crumb_type in MODEL_CALL_CRUMBS:
            return bool(self._unwritten)
        return crumb_type not in c.CALL_SETTLED or len(self._unwritten) != 1

    def catch_up(self, logged: list[dict[str, Any]]) -> None:
        """Settle the call under way whose result (or error) was logged after the progress this
        run was restored from (see :meth:`changed_with`), its history entry read back with it."""
        for crumb in logged:
            if crumb["type"] in c.CALL_SETTLED and self.calling is not None and crumb["toolCallId"] == self.calling:
                self.child = None
                self._settled()
                kept = len(self.messages) + 1
                self.read_session()
                del self.messages[kept:]

    @classmethod
    def restore(cls, ctx: RunContext, snapshot: dict[str, Any]) -> Any:
        run = super().restore(ctx, snapshot)
        count = snapshot.get("messages")
        if isinstance(count, int):  # a progress that left them to the session: its first ones
            run.read_session()
            del run.messages[count:]
        return run

    def pending_tool(self) -> Tool | None:
        """The tool whose call the run paused on (None if the agent no longer has it)."""
        if self.child is not None:
            return self.child.pending_tool()
        return self.agent.tool(self.pending[0]["name"])

    # -- running -----------------------------------------------------------------------------

    def run(self) -> Steps:
        self.begun = True
        self._remember(user_message(self.input))
        return (yield from self._turns())

    def _go_on(self) -> Steps:
        """The model call that was in flight is made again; a call logged without its result is
        settled by its tool's ``on_repeat`` (a subagent or task under way carries on itself);
        then the turn's other calls and the turns."""
        if self.calling is not None:
            yield from self._settle_unknown(self.pending[0])
        yield from self._run_pending()
        return (yield from self._turns())

    def _settle_unknown(self, call: dict[str, Any]) -> Steps:
        if self.delegated is not None:  # its subagent's end is logged, its result not yet
            yield self._delegated_outcome(call, self.delegated)
            return
        if self.child is not None:
            if self.child.continuable():
                yield from self._finish_delegation(call, self._carry_child_on())
                return
            self.child = None
        tool = self.agent.tool(call["name"])
        on_repeat = _on_repeat(tool)
        if on_repeat == "run":
            yield from self._invoke(call)
        elif on_repeat == "ask" and tool is not None:
            self.unknown = call["id"]
            yield Pause(tool.human_kind or "approval", call, outcome_unknown=True)
        else:
            yield self._tool_error(call, _outcome_unknown(call))

    def _carry_child_on(self) -> Steps:
        """The subagent or task under way, carried on in the frame it opened."""
        if self.child.kind == "task":  # a task frames itself
            return (yield from self.child.carry_on())
        return (yield from self._framed(self.child.carry_on(), resumed=True))

    def resume(self, response: Any) -> Steps:
        """Continue after the pause: the human's answer settles the first pending call."""
        call = self.pending[0]
        if self.child is not None:  # the pause was inside the subagent this call started
            yield from self._finish_delegation(call, self._framed(self.child.resume(response), resumed=True))
        elif self._human_kind(call) == "input":
            yield self._tool_result(call, response)
        elif response["approved"]:
            yield from self._invoke(call)
        elif self.unknown == call["id"]:
            yield self._tool_error(call, _outcome_unknown(call))
        else:
            yield self._tool_error(call, BreadError(TOOL_DENIED, f"the human denied the call to {call['name']}"))
        yield from self._run_pending()
        return (yield from self._turns())

    def _turns(self) -> Steps:
        while True:
            if self.steps >= self.agent.max_steps:
                limit = self.agent.max_steps
                raise BreadError(INTERNAL, MAX_STEPS_EXCEEDED.format(agent=self.agent.id, limit=limit))
            text, calls = yield from self._model_turn()
            self.steps += 1  # counted once made: a call made again after a crash counts once
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["toolCalls"] = calls
            self._remember(message)
            if not calls:
                output = self.agent.parse_output(text)
                self.returned = {"output": output}
                return output
            self.pending = list(calls)
            yield from self._run_pending()

    def _model_turn(self) -> Steps:
        provider, model_name = resolve_provider(self.agent.model)
        messages, files = for_model_call(self.messages, self.ctx.runtime.blob_store, provider)
        request = ModelRequest(
            model=model_name,
            system=self._system_prompt(),
            messages=messages,
            files=files,
            tools=[ToolSpec(t.name, t.description, self.ctx.tool_parameters(t)) for t in self.agent.all_tools()],
            signal=self.ctx.token,
            input=self.input,
            output_format=self.agent.output_format,
            # The provider's state as the turn began stays in the progress until the turn ends:
            # a call made again after a crash starts from it (copy.deepcopy: a provider may nest).
            state=copy.deepcopy(self.model_state),
            session_state=self.ctx.session_state(),
            context=self.ctx.context,
        )
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        streamed: set[str] = set()
        used: list[Usage] = []
        token, run_id = self.ctx.token, self.ctx.run_id
        try:
            with model_call(self.ctx.trace, provider, model_name, request, text, calls, used) as events:
                for event in events:
                    token.raise_if_cancelled()
                    if isinstance(event, TextDelta):  # most events: their crumb made here, not in _crumb_of
                        text.append(event.text)
                        yield {"type": c.TEXT_DELTA, "runId": run_id, "delta": event.text}
                        continue
                    if isinstance(event, ReasoningDelta):  # shown, never remembered for the model
                        yield {"type": c.REASONING_DELTA, "runId": run_id, "delta": event.text}
                        continue
                    if isinstance(event, Usage):
                        used.append(event)
                        continue
                    if isinstance(event, ToolInputStart):
                        streamed.add(event.id)
                    elif isinstance(event, FileOutput):
                        yield self.ctx.store_file(event)
                        continue
                    elif isinstance(event, ToolCall):
                        calls.append({"id": event.id, "name": event.name, "input": event.input})
                        if event.id not in streamed:
                            continue  # a call that was not streamed has no tool:input:* to close
                    yield self._crumb_of(event)
        finally:
            # summed once the call ends (a cancelled one too: its tokens were spent)
            for event in used:
                self.ctx.usage.add(event.model or self.agent.model_name, event.input_tokens, event.output_tokens)
        token.raise_if_cancelled()
        self.model_state = request.state
        return "".join(text), calls

    def _crumb_of(self, event: Any) -> dict[str, Any]:
        crumb: dict[str, Any] = {"runId": self.ctx.run_id, "toolCallId": event.id}
        if isinstance(event, ToolInputStart):
            return {"type": c.TOOL_INPUT_START, **crumb, "toolName": event.name}
        if isinstance(event, ToolInputDelta):
            return {"type": c.TOOL_INPUT_DELTA, **crumb, "delta": event.delta}
        return {"type": c.TOOL_INPUT_END, **crumb}

    # -- tool calls --------------------------------------------------------------------------

    def _run_pending(self) -> Steps:
        """Run the turn's remaining tool calls in order, pausing at one that needs a human."""
        while self.pending:
            call = self.pending[0]
            self.calling = call["id"]
            yield {
                "type": c.TOOL_CALL,
                "runId": self.ctx.run_id,
                "toolCallId": call["id"],
                "toolName": call["name"],
                "input": call["input"],
            }
            kind = self._human_kind(call)
            if kind is not None:
                yield Pause(kind, call)
                return  # never reached: a paused run is rebuilt from its checkpoint
            self.ctx.token.raise_if_cancelled()
            yield from self._invoke(call)
            self.ctx.token.raise_if_cancelled()

    def _human_kind(self, call: dict[str, Any]) -> str | None:
        tool = self.agent.tool(call["name"])
        return tool.human_kind if tool is not None else None

    def _invoke(self, call: dict[str, Any]) -> Steps:
        tool = self.agent.tool(call["name"])
        if tool is None:
            yield self._tool_error(call, BreadError(TOOL_FAILED, f"there is no tool {call['name']!r}"))
        elif tool.kind in ("subagent", "task"):
            yield from self._finish_delegation(call, self._delegate(tool, call))
        else:
            yield from self._call_function(tool, call)

    def _call_function(self, tool: Tool, call: dict[str, Any]) -> Steps:
        """The call's result or error; a generator function's progress on the way. A cancel
        inside the tool ends the run, as one between steps does."""
        assert tool.fn is not None  # a call tool is made with its fn
        try:
            output = tool.fn(tool.validate_input(call["input"]), self._context())
            if inspect.isgenerator(output):
                output = yield from self._progressed(call, output)
        except BreadError as exc:
            if exc.code in RUN_ENDING and self.ctx.token.cancelled:
                raise
            yield self._tool_error(call, exc)
            return
        except Exception:
            log.exception("tool %s failed in run %s", call["name"], self.ctx.run_id)
            yield self._tool_error(call, BreadError(TOOL_FAILED, f"tool {call['name']!r} failed"))
            return
        yield self._tool_result(call, _jsonable(output))

    def _progressed(self, call: dict[str, Any], reports: Generator[Any, None, Any]) -> Steps:
        """Drive a tool that reports progress to its result: a ``tool:progress`` crumb for each
        :class:`ToolProgress` it yields, at most one per ``PROGRESS_INTERVAL_SECONDS`` (the
        others dropped). Closing this (the run cancelled) closes the tool, which may clean up."""
        logged_at: float | None = None
        try:
            while True:
                try:
                    report = next(reports)
                except StopIteration as done:
                    return done.value
                if not isinstance(report, ToolProgress):
                    raise TypeError(f"tool {call['name']!r} yielded {type(report).__name__}, not a ToolProgress")
                now = monotonic()
                if logged_at is None or now - logged_at >= PROGRESS_INTERVAL_SECONDS:
                    logged_at = now
                    yield self._progress_crumb(call, report)
        finally:
            reports.close()

    def _progress_crumb(self, call: dict[str, Any], report: ToolProgress) -> dict[str, Any]:
        crumb = {
            "type": c.TOOL_PROGRESS,
            "runId": self.ctx.run_id,
            "toolCallId": call["id"],
            "progress": report.progress,
        }
        if report.total is not None:
            crumb["total"] = report.total
        if report.message is not None:
            crumb["message"] = report.message
        return crumb

    def _delegate(self, tool: Tool, call: dict[str, Any]) -> Steps:
        """A subagent or a task called as a tool: its crumbs join this stream, framed. The files
        its input names are checked against this conversation's; a remote agent's name files of
        its server, which checks them against its caller (this server). A task runs here, even
        one whose id a remote agent also has."""
        if tool.kind == "task":
            self._check_handed_down(call["input"])
            self.child = TaskRun(self.ctx, self.ctx.runtime.task(tool.delegate), call["input"], self.agent.id)
            return (yield from self.child.run())
        if tool.delegate in self.ctx.runtime.remote_agents:
            self.child = Relay.nested_in(self.ctx, tool.delegate, call["input"])
            return (yield from self._framed(self.child.run()))
        child_agent = self.ctx.runtime.agent(tool.delegate)
        child_input = child_agent.validate_input(tool.child_input(call["input"], child_agent))
        self._check_handed_down(child_input)  # as the subagent reads it: its schema may add a file reference
        self.child = self.ctx.activity_for(child_agent, child_input)
        return (yield from self._framed(self.child.run()))

    def _check_handed_down(self, value: Any) -> None:
        check_handed_down(value, self.ctx.runtime.blob_store, message_files(self.messages))

    def _framed(self, steps: Steps, resumed: bool = False) -> Steps:
        """The subagent's steps in its frame, the subagent dropped and its output kept before its
        end is logged: a continuation after that crumb gives the call its result, not the end again."""
        return self.ctx.framed_subagent(self.agent.id, self.child, steps, self._subagent_ended, resumed)

    def _subagent_ended(self, outcome: dict[str, Any]) -> None:
        self.child = None
        self.delegated = outcome

    def _delegated_outcome(self, call: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
        """The call's result (or error) from the end its subagent logged."""
        error = outcome.get("error")
        if error is not None:
            return self._tool_error(call, BreadError(error["code"], error["message"]))
        return self._tool_result(call, _jsonable(outcome["output"]))

    def _finish_delegation(self, call: dict[str, Any], steps: Steps) -> Steps:
        try:
            output = yield from steps
        except BreadError as exc:
            if exc.code in RUN_ENDING:
                raise
            self.child = None
            yield self._tool_error(call, exc)
            return
        self.child = None
        yield self._tool_result(call, _jsonable(output))

    def _settled(self) -> None:
        """The first pending call has its result (or error): the state its crumb is logged with."""
        self.pending.pop(0)
        self.calling = self.unknown = self.delegated = None

    def _tool_result(self, call: dict[str, Any], output: Any) -> dict[str, Any]:
        self._settled()
        self._remember({"role": "tool", "toolCallId": call["id"], "name": call["name"], "content": json.dumps(output)})
        return {
            "type": c.TOOL_RESULT,
            "runId": self.ctx.run_id,
            "toolCallId": call["id"],
            "toolName": call["name"],
            "output": output,
        }

    def _tool_error(self, call: dict[str, Any], error: BreadError) -> dict[str, Any]:
        wire = {"code": error.code, "message": error.message}
        self._settled()
        self._remember(
            {
                "role": "tool",
                "toolCallId": call["id"],
                "name": call["name"],
                "content": json.dumps({"error": wire}),
                "error": wire,
            }
        )
        return {
            "type": c.TOOL_ERROR,
            "runId": self.ctx.run_id,
            "toolCallId": call["id"],
            "toolName": call["name"],
            "error": error,
        }

    # -- helpers -----------------------------------------------------------------------------

    def _remember(self, message: dict[str, Any]) -> None:
        """Add a message to what the model sees, and to the session's history if this is the
        run's own agent (written with the run's next durable crumb)."""
        self.messages.append(message)
        if self.record:
            if not self._unwritten:
                self.ctx.emitter.defer(self._write_history)
            self._unwritten.append({**message, "runId": self.ctx.run_id, "at": now_iso()})

    def _write_history(self) -> None:
        entries, self._unwritten = self._unwritten, []
        self.ctx.runtime.store.append_messages(self.ctx.session_id, entries)

    def _system_prompt(self) -> str:
        skill = self.agent.skills.get(self.skill) if self.skill else None
        parts = [self.agent.prompt.strip(), skill and f"# Skill: {skill.name}\n\n{skill.instructions}"]
        return "\n\n".join(p for p in parts if p)

    def _context(self) -> ToolContext:
        return self.ctx.tool_context(self.agent.id)


def _on_repeat(tool: Tool | None) -> str:
    """What a call of ``tool`` logged without its result does when its run is carried on: a
    delegation starts again (its own tools decide for themselves), a gated tool asks again."""
    if tool is None:
        return "fail"
    if tool.kind in ("subagent", "task"):
        return "run"
    return "ask" if tool.human_kind is not None else tool.on_repeat


def _outcome_unknown(call: dict[str, Any]) -> BreadError:
    return BreadError(
        TOOL_OUTCOME_UNKNOWN, f"the call to {call['name']} was cut off by a crash; whether it took effect is unknown"
    )


def for_model(message: dict[str, Any]) -> dict[str, Any]:
    """A session history entry as the model sees it."""
    return {k: v for k, v in message.items() if k not in ("runId", "at")}


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value
