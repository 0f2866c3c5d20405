"""The translator: :class:`UiMessageStreamTranslator`, sans-IO and stateful, one per stream.

The chunks are the AI SDK's UI message stream protocol v1 (``ai`` 6, its ``uiMessageChunkSchema``),
as plain dicts; :func:`sse` writes one as an SSE frame. A stream is one assistant message:
``start`` first, text and tool parts inside steps (``start-step`` / ``finish-step``), ``finish``
at the run's end or pause. A continuation (after ``human:resumed``) opens with ``start`` again,
under the same message id, so the client appends it to the message the pause ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import crumbs as c
from ...crumbs import dumps, json_string, to_wire_crumb
from ...errors import RUN_CANCELLED, TOOL_DENIED

#: Every chunk type the translator can emit; tests/test_ai_sdk.py pins it against the code.
EMITTED_CHUNK_TYPES = frozenset({
    "start", "finish", "abort", "error", "start-step", "finish-step",
    "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta", "reasoning-end",
    "tool-input-start", "tool-input-delta", "tool-input-available", "tool-approval-request",
    "tool-output-available", "tool-output-error", "tool-output-denied",
    "file", "data-subagent", "data-task", "data-loop", "data-pipeline-step", "data-tool-progress",
})  # fmt: skip

#: The chunks that open, carry and close a part of each kind a model streams.
PART_CHUNKS = {
    "text": ("text-start", "text-delta", "text-end"),
    "reasoning": ("reasoning-start", "reasoning-delta", "reasoning-end"),
}

#: What a stream ends with, after its last chunk.
DONE = b"data: [DONE]\n\n"
_SUBAGENT_KEYS = ("parentAgentId", "subagentId", "status", "output")
_TASK_KEYS = ("taskRunId", "taskId", "model", "status", "durationMs", "usage", "error")
_STEP_KEYS = ("pipelineId", "stepName", "index", "output")

Chunk = dict[str, Any]


def sse(chunk: Chunk) -> bytes:
    """One chunk as an SSE frame, ``data: <json>\\n\\n``."""
    return f"data: {dumps(chunk)}\n\n".encode()


def message_id(run_id: str) -> str:
    """The id of the assistant message a run writes: the same in every stream of the run."""
    return f"msg_{run_id}"


class UiMessageStreamTranslator:
    """A translator for one stream: call it with each crumb, get that crumb's UI message chunks.

    ``ui_tools``: the names of the tools the UI answers (input tools): their calls go out
    without ``providerExecuted``, so the SDK's ``lastAssistantMessageIsCompleteWithToolCalls``
    sends the UI's output back; every other tool runs on the server. Live crumbs or wire crumbs
    alike. Does no I/O; not thread-safe (one per stream)."""

    def __init__(self, ui_tools: frozenset[str] = frozenset()) -> None:
        self.ui_tools = ui_tools
        #: "idle" before ``start``, "running", then "paused" (a HITL pause) or "ended".
        self.phase = "idle"
        self._text: str | None = None  # the open text (or reasoning) part's id
        self._text_kind = "text"  # which of the two it is
        self._texts = {"text": 0, "reasoning": 0}  # parts opened, of each kind: their ids count them
        self._step = False  # a step is open
        self._after_tools = False  # the open step's tool outputs came: the next output is a new step
        self._announced: set[str] = set()  # tool calls whose part the client has
        self._loop: dict[str, Any] = {}
        self._tasks: dict[str, dict[str, Any]] = {}
        self._subagents: dict[str, list[str]] = {}  # open subagent parts, per subagent id
        self._subagent_parts = 0
        self._table: dict[str, Callable[[dict[str, Any]], list[Chunk]]] = {
            c.AGENT_RUN_START: self._started,
            c.HUMAN_RESUMED: self._started,
            c.TEXT_DELTA: lambda crumb: self._text_delta(crumb, "text"),
            c.REASONING_DELTA: lambda crumb: self._text_delta(crumb, "reasoning"),
            c.AGENT_RUN_CONTINUED: lambda crumb: self._close_text(),
            c.FILE_GENERATED: self._file,
            c.TOOL_INPUT_START: self._tool_input_start,
            c.TOOL_INPUT_DELTA: self._tool_input_delta,
            c.TOOL_CALL: self._tool_call,
            c.TOOL_RESULT: self._tool_result,
            c.TOOL_ERROR: self._tool_error,
            c.TOOL_PROGRESS: self._tool_progress,
            c.PIPELINE_STEP_START: lambda crumb: self._pipeline_step(crumb, "running"),
            c.PIPELINE_STEP_END: lambda crumb: self._pipeline_step(crumb, "done"),
            c.LOOP_START: self._loop_start,
            c.LOOP_ITERATION_START: self._loop_state,
            c.LOOP_ITERATION_END: self._loop_state,
            c.LOOP_END: self._loop_state,
            c.SUBAGENT_RUN_START: self._subagent_start,
            c.SUBAGENT_RUN_END: self._subagent_end,
            c.TASK_START: self._task,
            c.TASK_END: self._task,
            c.HUMAN_REQUIRED: self._paused,
            c.AGENT_RUN_END: self._run_end,
            c.AGENT_ERROR: self._error,
        }

    def __call__(self, crumb: dict[str, Any]) -> list[Chunk]:
        """The chunks of one crumb (often none)."""
        handle = self._table.get(crumb["type"])
        if handle is None:
            return []
        if crumb["type"] in (c.AGENT_RUN_START, c.HUMAN_RESUMED, c.AGENT_ERROR):
            return handle(crumb)  # these may come before ``start``, or make it
        if self.phase == "idle":  # a stream that missed its start still opens with ``start``
            return [*self._started(crumb), *handle(crumb)]
        return handle(crumb) if self.phase == "running" else []

    translate = __call__

    def frames(self, crumb: dict[str, Any]) -> list[bytes]:
        """The crumb's chunks as SSE frames. A text delta of the open text part, most of a
        stream, is written straight into its frame: no chunk built per delta."""
        if (
            self._text is not None
            and crumb["type"] == c.TEXT_DELTA
            and self._text_kind == "text"
            and self.phase == "running"
        ):
            return [
                f'data: {{"type":"text-delta","id":"{self._text}","delta":{json_string(crumb["delta"])}}}\n\n'.encode()
            ]
        return [sse(chunk) for chunk in self(crumb)]

    # -- the message --------------------------------------------------------------------------

    def _started(self, crumb: dict[str, Any]) -> list[Chunk]:
        if self.phase not in ("idle", "paused"):
            return []
        self.phase = "running"
        run_id = crumb["runId"]
        return [{"type": "start", "messageId": message_id(run_id), "messageMetadata": {"runId": run_id}}]

    def _run_end(self, crumb: dict[str, Any]) -> list[Chunk]:
        return [*self._close_step(), self._finish("stop")]

    def _paused(self, crumb: dict[str, Any]) -> list[Chunk]:
        chunks = self._announce(crumb)
        if crumb["kind"] == "approval":
            chunks.append(
                {
                    "type": "tool-approval-request",
                    "approvalId": crumb["checkpointId"],
                    "toolCallId": crumb["toolCallId"],
                }
            )
        chunks += [*self._close_step(), self._finish("tool-calls")]
        self.phase = "paused"
        return chunks

    def _error(self, crumb: dict[str, Any]) -> list[Chunk]:
        if self.phase in ("ended", "paused"):
            return []
        error = to_wire_crumb(crumb)["error"]
        chunks = [*self._started(crumb), *self._close_step()]
        self.phase = "ended"
        if error.get("code") == RUN_CANCELLED:
            return [*chunks, {"type": "abort", "reason": error.get("message") or RUN_CANCELLED}]
        return [*chunks, {"type": "error", "errorText": _error_text(error)}]

    def _finish(self, reason: str) -> Chunk:
        self.phase = "ended"
        return {"type": "finish", "finishReason": reason}

    def _open_step(self) -> list[Chunk]:
        """What output needs before it: a step, a new one once the open step's tools answered."""
        chunks = self._close_step() if self._after_tools else []
        if not self._step:
            self._step = True
            chunks.append({"type": "start-step"})
        return chunks

    def _close_step(self) -> list[Chunk]:
        chunks = self._close_text()
        if self._step:
            chunks.append({"type": "finish-step"})
        self._step = self._after_tools = False
        return chunks

    # -- text and files -----------------------------------------------------------------------

    def _text_delta(self, crumb: dict[str, Any], kind: str) -> list[Chunk]:
        """A text or reasoning delta, in the open part of its kind (a part of the other kind is
        closed first: the model thought, then wrote, or the other way round)."""
        chunks: list[Chunk] = []
        if self._text is not None and self._text_kind != kind:
            chunks += self._close_text()
        if self._text is None:
            chunks += self._open_step()
            self._texts[kind] += 1
            self._text, self._text_kind = f"{kind}_{self._texts[kind]}", kind
            chunks.append({"type": PART_CHUNKS[kind][0], "id": self._text})
        chunks.append({"type": PART_CHUNKS[kind][1], "id": self._text, "delta": crumb["delta"]})
        return chunks

    def _close_text(self) -> list[Chunk]:
        if self._text is None:
            return []
        text, self._text = self._text, None
        return [{"type": PART_CHUNKS[self._text_kind][2], "id": text}]

    def _file(self, crumb: dict[str, Any]) -> list[Chunk]:
        return [*self._open_step(), {"type": "file", "url": crumb["uri"], "mediaType": crumb["mimeType"]}]

    # -- tool calls ---------------------------------------------------------------------------

    def _tool_input_start(self, crumb: dict[str, Any]) -> list[Chunk]:
        self._announced.add(crumb["toolCallId"])
        start = {"type": "tool-input-start", "toolCallId": crumb["toolCallId"], "toolName": crumb["toolName"]}
        return [*self._open_step(), *self._close_text(), self._run_by(crumb, start)]

    def _tool_input_delta(self, crumb: dict[str, Any]) -> list[Chunk]:
        if crumb["toolCallId"] not in self._announced:
            return []
        return [{"type": "tool-input-delta", "toolCallId": crumb["toolCallId"], "inputTextDelta": crumb["delta"]}]

    def _tool_call(self, crumb: dict[str, Any]) -> list[Chunk]:
        self._announced.add(crumb["toolCallId"])
        available = {"type": "tool-input-available", "toolCallId": crumb["toolCallId"], "toolName": crumb["toolName"]}
        available["input"] = crumb.get("input")
        return [*self._open_step(), *self._close_text(), self._run_by(crumb, available)]

    def _run_by(self, crumb: dict[str, Any], chunk: Chunk) -> Chunk:
        # A tool the UI answers is the client's to run; every other one ran on the server.
        return chunk if crumb.get("toolName") in self.ui_tools else {**chunk, "providerExecuted": True}

    def _announce(self, crumb: dict[str, Any]) -> list[Chunk]:
        # A pause names its call: the client has its part unless the stream missed the call.
        return [] if crumb["toolCallId"] in self._announced else self._tool_call(crumb)

    def _tool_result(self, crumb: dict[str, Any]) -> list[Chunk]:
        return self._output(crumb, {"type": "tool-output-available", "output": crumb.get("output")})

    def _tool_error(self, crumb: dict[str, Any]) -> list[Chunk]:
        error = to_wire_crumb(crumb)["error"]
        if error.get("code") == TOOL_DENIED:
            return self._output(crumb, {"type": "tool-output-denied"})
        return self._output(crumb, {"type": "tool-output-error", "errorText": _error_text(error)})

    def _output(self, crumb: dict[str, Any], chunk: Chunk) -> list[Chunk]:
        # The call's part is the client's already: announced in this stream, or in the one its
        # pause ended (a continuation's stream appends to that message).
        self._after_tools = True
        return [*self._close_text(), self._run_by(crumb, {**chunk, "toolCallId": crumb["toolCallId"]})]

    # -- subagents, tasks, loops and pipeline steps: data parts, updated in place by id -------

    def _data(self, kind: str, part_id: str, data: dict[str, Any]) -> list[Chunk]:
        return [*self._close_text(), {"type": f"data-{kind}", "id": part_id, "data": data}]

    def _tool_progress(self, crumb: dict[str, Any]) -> list[Chunk]:
        part_id = f"progress_{crumb['toolCallId']}"
        return self._data("tool-progress", part_id, _picked(crumb, c.TOOL_PROGRESS_KEYS))

    def _pipeline_step(self, crumb: dict[str, Any], status: str) -> list[Chunk]:
        part_id = f"{crumb['pipelineId']}_{crumb['index']}"
        return self._data("pipeline-step", part_id, {**_picked(crumb, _STEP_KEYS), "status": status})

    def _loop_start(self, crumb: dict[str, Any]) -> list[Chunk]:
        self._loop = {}
        return self._loop_state(crumb)

    def _loop_state(self, crumb: dict[str, Any]) -> list[Chunk]:
        self._loop.update({k: v for k, v in crumb.items() if k not in ("type", "runId")})
        return self._data("loop", crumb["loopId"], dict(self._loop))

    def _subagent_start(self, crumb: dict[str, Any]) -> list[Chunk]:
        self._subagent_parts += 1
        part_id = f"subagent_{self._subagent_parts}"
        self._subagents.setdefault(crumb["subagentId"], []).append(part_id)
        return self._data("subagent", part_id, _picked(crumb, _SUBAGENT_KEYS))

    def _subagent_end(self, crumb: dict[str, Any]) -> list[Chunk]:
        opened = self._subagents.get(crumb["subagentId"])
        part_id = opened.pop() if opened else f"subagent_{crumb['subagentId']}"
        return self._data("subagent", part_id, _picked(crumb, _SUBAGENT_KEYS))

    def _task(self, crumb: dict[str, Any]) -> list[Chunk]:
        # task:end may leave out what task:start said (the model): the part keeps it.
        merged = self._tasks[crumb["taskRunId"]] = {**self._tasks.get(crumb["taskRunId"], {}), **crumb}
        return self._data("task", crumb["taskRunId"], _picked(merged, _TASK_KEYS))


def _error_text(error: dict[str, Any]) -> str:
    return f"{error.get('code')}: {error.get('message')}"


def _picked(crumb: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: crumb[k] for k in keys if crumb.get(k) is not None}
