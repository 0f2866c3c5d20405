"""The translator: :func:`create_ag_ui_transformer`, sans-IO and stateful, one per stream.

The events are the ``ag-ui-protocol`` package's models; ``encode`` writes one as an SSE frame. It
keeps what ``@ag-ui/client`` verifies: RUN_STARTED first, every message, tool call and step
closed before the run's end, nothing after RUN_FINISHED or RUN_ERROR but a new RUN_STARTED,
absent optional fields left out (never ``null``), ``TOOL_CALL_RESULT.content`` a string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    EventType,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from ... import crumbs as c
from ...crumbs import dumps, json_string, to_wire_crumb

#: Every event type the translator can emit; tests/test_ag_ui.py pins it against the code.
EMITTED_EVENT_TYPES = frozenset({
    EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR,
    EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END,
    EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END, EventType.TOOL_CALL_RESULT,
    EventType.STEP_STARTED, EventType.STEP_FINISHED, EventType.STATE_SNAPSHOT, EventType.CUSTOM,
    EventType.REASONING_START, EventType.REASONING_MESSAGE_START, EventType.REASONING_MESSAGE_CONTENT,
    EventType.REASONING_MESSAGE_END, EventType.REASONING_END,
})  # fmt: skip

#: The CUSTOM event's name for a file the run produced.
FILE_GENERATED = "FILE_GENERATED"
#: The CUSTOM event's name for a tool call's progress (``tool:progress``; AG-UI has no event of its own).
TOOL_PROGRESS = "TOOL_PROGRESS"
#: What an approval interrupt expects back.
APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}
#: What an input interrupt expects back when its tool names no schema of its own.
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {}}, "required": ["answer"]}
_SUBAGENT_KEYS = ("parentAgentId", "subagentId", "status", "output")
_TASK_KEYS = ("taskRunId", "taskId", "model", "status", "durationMs", "usage", "error")

ResponseSchema = Callable[[dict[str, Any]], "dict[str, Any] | None"]
_encoder = EventEncoder()
#: What an event stream's response is.
CONTENT_TYPE = _encoder.get_content_type()
#: The delta a message's TEXT_MESSAGE_CONTENT frame is encoded with once, to find where each
#: delta's JSON string goes in it.
_SENTINEL = "\x00delta\x00"


def encode(event: BaseEvent) -> str:
    """One event as a bare SSE frame, ``data: <json>\\n\\n`` (compact camelCase JSON)."""
    return _encoder.encode(event)


def create_ag_ui_transformer(
    thread_id: str | None = None,
    run_id: str | None = None,
    response_schema: ResponseSchema | None = None,
    state: dict[str, Any] | None = None,
) -> AgUiTransformer:
    """A translator for one stream: call it with each crumb, get that crumb's AG-UI events.

    ``thread_id`` and ``run_id`` replace the ids RUN_STARTED and RUN_FINISHED carry (by default
    the run's session id and its bread run id): the HTTP ingress echoes the client's own.
    ``response_schema(human_required_crumb)`` gives the JSON Schema an input interrupt expects
    (an approval's is :data:`APPROVAL_SCHEMA`); without it, or when it gives None, an input
    interrupt names :data:`ANSWER_SCHEMA`. ``state`` is the client's: a STATE_SNAPSHOT replaces
    the client's whole state, so each carries it, with bread's keys (``loop``, ``subagent``,
    ``task``, as far as the stream has them) merged at the top level, bread's winning.
    """
    return AgUiTransformer(thread_id, run_id, response_schema, state)


class AgUiTransformer:
    """See :func:`create_ag_ui_transformer`. Does no I/O; not thread-safe (one per stream)."""

    def __init__(
        self,
        thread_id: str | None,
        run_id: str | None,
        response_schema: ResponseSchema | None,
        state: dict[str, Any] | None = None,
    ):
        self.thread_id = thread_id
        self.run_id = run_id
        self.response_schema = response_schema
        #: "idle" before RUN_STARTED, "running", then "paused" (a HITL interrupt) or "ended".
        self.phase = "idle"
        self._message: str | None = None  # the open text message
        self._content: tuple[str, str] | None = None  # its TEXT_MESSAGE_CONTENT frame, around the delta
        self._reasoning: str | None = None  # the reasoning message open (a segment of reasoning:delta)
        self._messages = 0  # messages opened: their ids are the run's id and this count
        self._lineage = ""  # after a continuation, messages are counted afresh under its afterSeq
        self._tool_calls: dict[str, str] = {}  # tool calls open (their input still streaming), to their names
        self._streamed: set[str] = set()  # tool calls whose input was streamed: tool:call adds nothing
        self._steps: list[str] = []  # open steps, innermost last
        self._loop: dict[str, Any] = {}
        self._state: dict[str, Any] = dict(state or {})  # what the next snapshot carries
        self._tasks: dict[str, dict[str, Any]] = {}
        self._files: set[str] = set()  # uris announced, so an echoed file reference is not announced twice
        self._table: dict[str, Callable[[dict[str, Any]], list[BaseEvent]]] = {
            c.AGENT_RUN_START: self._run_start,
            c.HUMAN_RESUMED: self._resumed,
            c.TEXT_DELTA: self._text_delta,
            c.REASONING_DELTA: self._reasoning_delta,
            c.AGENT_RUN_CONTINUED: self._continued,
            c.FILE_GENERATED: self._file,
            c.TOOL_INPUT_START: self._tool_input_start,
            c.TOOL_INPUT_DELTA: self._tool_input_delta,
            c.TOOL_INPUT_END: self._tool_input_end,
            c.TOOL_CALL: self._tool_call,
            c.TOOL_RESULT: self._tool_result,
            c.TOOL_ERROR: self._tool_error,
            c.TOOL_PROGRESS: self._tool_progress,
            c.PIPELINE_STEP_START: lambda crumb: self._open_step(crumb["stepName"]),
            c.PIPELINE_STEP_END: lambda crumb: self._close_step(crumb["stepName"]),
            c.LOOP_START: self._loop_start,
            c.LOOP_ITERATION_START: self._loop_iteration_start,
            c.LOOP_ITERATION_END: self._loop_iteration_end,
            c.LOOP_END: self._loop_state,
            c.SUBAGENT_RUN_START: self._subagent_start,
            c.SUBAGENT_RUN_END: self._subagent_end,
            c.TASK_START: self._task_start,
            c.TASK_END: self._task_end,
            c.HUMAN_REQUIRED: self._paused,
            c.AGENT_RUN_END: self._run_end,
            c.AGENT_ERROR: self._error,
        }

    def __call__(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        """The AG-UI events of one crumb (often none): live crumbs or wire crumbs alike."""
        handle = self._table.get(crumb["type"])
        if handle is None:
            return []
        if crumb["type"] in (c.AGENT_RUN_START, c.HUMAN_RESUMED, c.AGENT_ERROR):
            return handle(crumb)  # these may come before RUN_STARTED, or make it
        if self.phase == "idle":  # a stream that missed its start still opens with RUN_STARTED
            return [*self._started(crumb), *handle(crumb)]
        return handle(crumb) if self.phase == "running" else []

    translate = __call__

    def frames(self, crumb: dict[str, Any]) -> list[str]:
        """The crumb's events as SSE frames, as :func:`encode` writes them. A text delta of the
        open message, most of a stream, is its JSON string put into the message's content frame,
        encoded by the model once per message: no event built or serialised per delta."""
        if self._content is not None and crumb["type"] == c.TEXT_DELTA and self.phase == "running":
            head, tail = self._content
            return [f"{head}{json_string(crumb['delta'])}{tail}"]
        frames = [encode(event) for event in self(crumb)]
        if self._message is not None and self._content is None:
            self._content = _content_frame(self._message)
        return frames

    def reopen(self) -> list[BaseEvent]:
        """What a stream that resumes here opens with, after this transformer was fed the run's
        past (its events dropped): RUN_STARTED, then the steps, tool calls and message still open,
        with their ids, so the resumed stream is valid on its own. Nothing before the run's
        start, while it is paused (its continuation opens with RUN_STARTED) or once it ended."""
        if self.phase != "running":
            return []
        events: list[BaseEvent] = [
            RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)
        ]
        events += [StepStartedEvent(step_name=name) for name in self._steps]
        events += [ToolCallStartEvent(tool_call_id=i, tool_call_name=n) for i, n in self._tool_calls.items()]
        return events + self.reopen_message()

    @property
    def open_message(self) -> str | None:
        """The id of the text or reasoning message open."""
        return self._message or self._reasoning

    def reopen_message(self) -> list[BaseEvent]:
        """The start of the text or reasoning message open, under its id: what a resumed stream
        says before the rest of a message whose start its client holds."""
        if self._message is not None:
            return [TextMessageStartEvent(message_id=self._message, role="assistant")]
        return _reasoning_start(self._reasoning) if self._reasoning is not None else []

    # -- the run ------------------------------------------------------------------------------

    def _started(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self.thread_id = self.thread_id or crumb.get("sessionId") or crumb["runId"]
        self.run_id = self.run_id or crumb["runId"]
        self.phase = "running"
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)]

    def _run_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        return self._started(crumb) if self.phase == "idle" else []

    def _resumed(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        # In AG-UI a continuation is a run of its own: after the interrupt's RUN_FINISHED it
        # opens with a RUN_STARTED again.
        return self._started(crumb) if self.phase in ("idle", "paused") else []

    def _run_end(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        events = self._close_all()
        events += self._echoed_file(crumb.get("output"))
        self.phase = "ended"
        return [*events, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=crumb.get("output"))]

    def _error(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        if self.phase in ("ended", "paused"):
            return []
        error = to_wire_crumb(crumb)["error"]
        events = self._close_all()
        self.phase = "ended"
        return [*events, RunErrorEvent(message=error.get("message") or error.get("code", ""), code=error.get("code"))]

    def _paused(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        events = self._close_all()
        self.phase = "paused"
        outcome = RunFinishedInterruptOutcome(interrupts=[self._interrupt(crumb)])
        return [*events, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]

    def _interrupt(self, crumb: dict[str, Any]) -> Interrupt:
        tool, tool_input = crumb.get("toolName"), crumb.get("input")
        if crumb["kind"] == "approval":
            message, schema = f"Approve the call of {tool}?", APPROVAL_SCHEMA
        else:
            question = tool_input.get("question") if isinstance(tool_input, dict) else None
            message = question if isinstance(question, str) else f"{tool} asks for your input."
            schema = (self.response_schema(crumb) if self.response_schema else None) or ANSWER_SCHEMA
        return Interrupt(
            id=crumb["checkpointId"],
            reason=crumb["kind"],
            tool_call_id=crumb.get("toolCallId"),
            message=message,
            response_schema=schema,
            metadata={"toolName": tool, "input": tool_input},
        )

    def _close_all(self) -> list[BaseEvent]:
        """Close whatever is open, innermost first: a run ends with nothing open."""
        events = self._close_message()
        events += [ToolCallEndEvent(tool_call_id=tool_call_id) for tool_call_id in reversed(self._tool_calls)]
        events += [StepFinishedEvent(step_name=name) for name in reversed(self._steps)]
        self._tool_calls, self._steps = {}, []
        return events

    # -- text and files -----------------------------------------------------------------------

    def _text_delta(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        events: list[BaseEvent] = self._close_reasoning()
        if self._message is None:
            # The same ids in a replay of the run as in its live stream: a resumed stream
            # re-opens the message the client holds, under its id.
            self._messages += 1
            self._message = f"msg_{crumb['runId']}_{self._lineage}{self._messages}"
            events.append(TextMessageStartEvent(message_id=self._message, role="assistant"))
        events.append(TextMessageContentEvent(message_id=self._message, delta=crumb["delta"]))
        return events

    def _continued(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        # The open message's text after afterSeq was lost with the process that streamed it,
        # and the call is made again: its text goes to a new message. Their ids start afresh
        # from the crumb, so a stream resumed from the log (which never had the lost text)
        # names them as the live stream did.
        self._lineage, self._messages = f"after{crumb['afterSeq']}_", 0
        return self._close_message()

    def _reasoning_delta(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        # A reasoning segment is a reasoning message of its own, counted (and so named) as the
        # text messages are: the same ids live and in a replay.
        events = self._close_message() if self._message is not None else []
        if self._reasoning is None:
            self._messages += 1
            self._reasoning = f"rsn_{crumb['runId']}_{self._lineage}{self._messages}"
            events += _reasoning_start(self._reasoning)
        events.append(ReasoningMessageContentEvent(message_id=self._reasoning, delta=crumb["delta"]))
        return events

    def _close_reasoning(self) -> list[BaseEvent]:
        if self._reasoning is None:
            return []
        message, self._reasoning = self._reasoning, None
        return [ReasoningMessageEndEvent(message_id=message), ReasoningEndEvent(message_id=message)]

    def _close_message(self) -> list[BaseEvent]:
        """Close the text or reasoning message open, if any."""
        if self._message is None:
            return self._close_reasoning()
        message, self._message, self._content = self._message, None, None
        return [TextMessageEndEvent(message_id=message)]

    def _file(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self._files.add(crumb["uri"])
        value = {key: crumb[key] for key in ("uri", "mimeType", "name") if crumb.get(key) is not None}
        return [CustomEvent(name=FILE_GENERATED, value=value)]

    def _tool_progress(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        value = {key: crumb[key] for key in c.TOOL_PROGRESS_KEYS if crumb.get(key) is not None}
        return [CustomEvent(name=TOOL_PROGRESS, value=value)]

    def _echoed_file(self, output: Any) -> list[BaseEvent]:
        # An output that is a file reference a tool stored (and the agent echoed) is announced
        # like a generated file, unless the run already announced that uri.
        if not (isinstance(output, dict) and isinstance(output.get("uri"), str)):
            return []
        if not isinstance(output.get("mimeType"), str) or output["uri"] in self._files:
            return []
        return self._file(output)

    # -- tool calls ---------------------------------------------------------------------------

    def _tool_input_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self._streamed.add(crumb["toolCallId"])
        self._tool_calls[crumb["toolCallId"]] = crumb["toolName"]
        return self._tool_start(crumb)

    def _tool_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        parent = self._message
        events = self._close_message()
        start = ToolCallStartEvent(
            tool_call_id=crumb["toolCallId"], tool_call_name=crumb["toolName"], parent_message_id=parent
        )
        return [*events, start]

    def _tool_input_delta(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        if crumb["toolCallId"] not in self._tool_calls:
            return []
        return [ToolCallArgsEvent(tool_call_id=crumb["toolCallId"], delta=crumb["delta"])]

    def _tool_input_end(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        if crumb["toolCallId"] not in self._tool_calls:
            return []
        del self._tool_calls[crumb["toolCallId"]]
        return [ToolCallEndEvent(tool_call_id=crumb["toolCallId"])]

    def _tool_call(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        tool_call_id = crumb["toolCallId"]
        if tool_call_id in self._streamed:
            return []  # START, ARGS and END went out as the input streamed
        self._streamed.add(tool_call_id)
        return [
            *self._tool_start(crumb),
            ToolCallArgsEvent(tool_call_id=tool_call_id, delta=dumps(crumb.get("input"))),
            ToolCallEndEvent(tool_call_id=tool_call_id),
        ]

    def _tool_result(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        output = crumb.get("output")
        return self._result(crumb, output if isinstance(output, str) else dumps(output))

    def _tool_error(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        error = to_wire_crumb(crumb)["error"]
        # AG-UI 1.0 takes a string (or content parts) only: the error object goes in as JSON.
        return self._result(crumb, dumps({"error": {"code": error.get("code"), "message": error.get("message")}}))

    def _result(self, crumb: dict[str, Any], content: str) -> list[BaseEvent]:
        events = self._close_message()
        result = ToolCallResultEvent(
            message_id=f"msg_{crumb['toolCallId']}_result",
            tool_call_id=crumb["toolCallId"],
            content=content,
            role="tool",
        )
        return [*events, result]

    # -- steps and their state ----------------------------------------------------------------

    def _open_step(self, name: str) -> list[BaseEvent]:
        # A message belongs to the step it was written in: it never spans a step's edge.
        events = self._close_message()
        self._steps.append(name)
        return [*events, StepStartedEvent(step_name=name)]

    def _close_step(self, name: str) -> list[BaseEvent]:
        if name not in self._steps:
            return []
        events = self._close_message()
        while self._steps:  # whatever opened inside the step and did not close, closes with it
            inner = self._steps.pop()
            events.append(StepFinishedEvent(step_name=inner))
            if inner == name:
                break
        return events

    def _loop_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self._loop = {}
        return self._loop_state(crumb)

    def _loop_state(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self._loop.update({k: v for k, v in crumb.items() if k not in ("type", "runId")})
        return [self._snapshot("loop", dict(self._loop))]

    def _loop_iteration_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        return [*self._open_step(_iteration_step(crumb)), *self._loop_state(crumb)]

    def _loop_iteration_end(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        snapshot = self._loop_state(crumb)
        return [*self._close_message(), *snapshot, *self._close_step(_iteration_step(crumb))]

    def _snapshot(self, key: str, value: dict[str, Any]) -> StateSnapshotEvent:
        self._state[key] = value
        return StateSnapshotEvent(snapshot=dict(self._state))

    def _subagent_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        snapshot = self._snapshot("subagent", _picked(crumb, _SUBAGENT_KEYS))
        return [*self._open_step(f"subagent_{crumb['subagentId']}"), snapshot]

    def _subagent_end(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        snapshot = self._snapshot("subagent", _picked(crumb, _SUBAGENT_KEYS))
        return [*self._close_message(), snapshot, *self._close_step(f"subagent_{crumb['subagentId']}")]

    def _task_start(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        self._tasks[crumb["taskRunId"]] = dict(crumb)
        return [*self._open_step(f"task_{crumb['taskRunId']}"), self._snapshot("task", _picked(crumb, _TASK_KEYS))]

    def _task_end(self, crumb: dict[str, Any]) -> list[BaseEvent]:
        # task:end may leave out what task:start said (the model): the snapshot keeps it.
        merged = {**self._tasks.pop(crumb["taskRunId"], {}), **crumb}
        snapshot = self._snapshot("task", _picked(merged, _TASK_KEYS))
        return [*self._close_message(), snapshot, *self._close_step(f"task_{crumb['taskRunId']}")]


def _content_frame(message_id: str) -> tuple[str, str]:
    """A TEXT_MESSAGE_CONTENT frame of the message, as the encoder writes it, split where its
    delta's JSON string goes."""
    head, tail = encode(TextMessageContentEvent(message_id=message_id, delta=_SENTINEL)).split(json_string(_SENTINEL))
    return head, tail


def _iteration_step(crumb: dict[str, Any]) -> str:
    return f"{crumb['loopId']}_iteration_{crumb['iteration']}"


def _picked(crumb: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: crumb[k] for k in keys if crumb.get(k) is not None}


def _reasoning_start(message_id: str) -> list[BaseEvent]:
    return [ReasoningStartEvent(message_id=message_id), ReasoningMessageStartEvent(message_id=message_id)]
