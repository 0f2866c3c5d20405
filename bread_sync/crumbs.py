"""The crumb vocabulary: type strings, which are durable and which terminal, and the wire form.

A crumb is a dict ``{"type": ..., "runId": ..., **payload}``. Inside the runtime an error payload
may be a live :class:`BreadError`; on the wire it is flattened to ``{name, code, message, context}``.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import BreadError

AGENT_RUN_START = "agent:run:start"
#: A run carried on by another process after the one driving it died or shut down (issue 26).
AGENT_RUN_CONTINUED = "agent:run:continued"
TEXT_DELTA = "text:delta"
#: The model's thinking, streamed as text is (an addition): never sent back to the model.
REASONING_DELTA = "reasoning:delta"
TOOL_INPUT_START = "tool:input:start"
TOOL_INPUT_DELTA = "tool:input:delta"
TOOL_INPUT_END = "tool:input:end"
TOOL_CALL = "tool:call"
TOOL_RESULT = "tool:result"
TOOL_ERROR = "tool:error"
#: How far a tool call under way is (an addition): ``toolCallId``, ``progress``, ``total``?, ``message``?.
TOOL_PROGRESS = "tool:progress"
HUMAN_REQUIRED = "human:required"
HUMAN_RESUMED = "human:resumed"
FILE_GENERATED = "file:generated"
PIPELINE_STEP_START = "pipeline:step:start"
PIPELINE_STEP_END = "pipeline:step:end"
LOOP_START = "loop:start"
LOOP_ITERATION_START = "loop:iteration:start"
LOOP_ITERATION_END = "loop:iteration:end"
LOOP_END = "loop:end"
SUBAGENT_RUN_START = "subagent:run:start"
SUBAGENT_RUN_END = "subagent:run:end"
TASK_START = "task:start"
TASK_END = "task:end"
AGENT_RUN_END = "agent:run:end"
AGENT_ERROR = "agent:error"

ALL_TYPES = (
    AGENT_RUN_START, TEXT_DELTA, TOOL_INPUT_START, TOOL_INPUT_DELTA, TOOL_INPUT_END, TOOL_CALL,
    TOOL_RESULT, TOOL_ERROR, HUMAN_REQUIRED, HUMAN_RESUMED, FILE_GENERATED, PIPELINE_STEP_START,
    PIPELINE_STEP_END, LOOP_START, LOOP_ITERATION_START, LOOP_ITERATION_END, LOOP_END,
    SUBAGENT_RUN_START, SUBAGENT_RUN_END, TASK_START, TASK_END, AGENT_RUN_END, AGENT_ERROR,
    AGENT_RUN_CONTINUED, REASONING_DELTA, TOOL_PROGRESS,
)  # fmt: skip

#: What a ``tool:progress`` carries besides ``runId`` (the last two only when the tool said).
TOOL_PROGRESS_KEYS = ("toolCallId", "progress", "total", "message")

#: The crumbs that settle a tool call: its result, or its error.
CALL_SETTLED = frozenset({TOOL_RESULT, TOOL_ERROR})

#: Every type but the deltas owns a log position; deltas are aggregated before persisting, each
#: run of deltas of one type into one log entry (a segment).
NOT_DURABLE = frozenset({TEXT_DELTA, REASONING_DELTA})
TERMINAL = frozenset({AGENT_RUN_END, AGENT_ERROR})
#: Where a live stream of a run stops: its end, or its pause for a human.
STREAM_END = TERMINAL | {HUMAN_REQUIRED}

_ERROR_FIELDS = {TOOL_ERROR: "error", AGENT_ERROR: "error"}

#: Compact JSON as every wire and the log carry it.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: A str as a JSON string, as ``dumps`` writes it (ensure_ascii=False), without its Python wrapper.
json_string = json.encoder.encode_basestring
#: The compact JSON of wire messages read back; see ``loads``.
_scan_json = json.JSONDecoder().scan_once


def loads(text: str) -> Any:
    """``json.loads`` of one wire message. Ours are bare JSON, which the scanner reads alone,
    without the two whitespace regexes ``json.loads`` runs around it on every call; anything
    else (padded, malformed) goes through ``json.loads`` for its result or its error."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


class Frame:
    """One entry of a run's crumb stream: what listeners get and what a transport carries.

    ``seq`` is the crumb's log position, or for a delta (``text:delta``, ``reasoning:delta``) the watermark (the last
    durable seq). ``wire`` is the crumb's JSON text, made at most once per crumb and shared by
    the store and every transport.
    """

    __slots__ = ("run_id", "seq", "crumb", "_wire")

    def __init__(self, run_id: str, seq: int, crumb: dict[str, Any], wire: str | None = None):
        self.run_id = run_id
        self.seq = seq
        self.crumb = crumb
        self._wire = wire

    @property
    def type(self) -> str:
        return self.crumb["type"]

    @property
    def durable(self) -> bool:
        return self.crumb["type"] not in NOT_DURABLE

    @property
    def wire(self) -> str:
        if self._wire is None:
            self._wire = dumps(to_wire_crumb(self.crumb))
        return self._wire

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and (other.run_id, other.seq, other.wire) == (
            self.run_id,
            self.seq,
            self.wire,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Frame({self.run_id!r}, {self.seq}, {self.crumb!r})"


def is_delta_frame(item: Any) -> bool:
    """A delta's frame (text or reasoning): most of what flows to a client, so the per-item
    paths test for it first (a plain class test, not ``isinstance``)."""
    return item.__class__ is Frame and item.crumb["type"] in NOT_DURABLE


def delta_wire_head(run_id: str, kind: str = TEXT_DELTA) -> str:
    """The wire JSON of a run's delta crumbs of one ``kind`` up to the delta's text: the same for
    each of them, so a delta's wire is this, its text as a JSON string, and ``}``."""
    return f'{{"type":"{kind}","runId":{dumps(run_id)},"delta":'


def to_wire_crumb(crumb: dict[str, Any]) -> dict[str, Any]:
    """The JSON-safe form of a crumb: a live :class:`BreadError` becomes its flat dict."""
    field = _ERROR_FIELDS.get(crumb["type"])
    if field is None or not isinstance(crumb.get(field), BaseException):
        return crumb
    error = crumb[field]
    flat = error.to_wire() if isinstance(error, BreadError) else _flatten_foreign(error)
    return {**crumb, field: flat}


def from_wire_crumb(crumb: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a live :class:`BreadError` from a wire crumb's flattened error."""
    field = _ERROR_FIELDS.get(crumb.get("type", ""))
    if field is None or not isinstance(crumb.get(field), dict):
        return crumb
    return {**crumb, field: BreadError.from_wire(crumb[field])}


def _flatten_foreign(exc: BaseException) -> dict[str, Any]:
    from .errors import internal_error

    return internal_error(exc).to_wire()


def error_crumb(run_id: str, error: BreadError) -> dict[str, Any]:
    return {"type": AGENT_ERROR, "runId": run_id, "error": error}
