"""What a stream of AG-UI events must satisfy to be read by the official clients (AG-UI 1.0).

The Python models of ``ag-ui-protocol`` check each event's fields; they accept ``null`` optionals,
unknown and snake_case keys, which ``@ag-ui/client`` rejects or strips, so those are checked here
too, with the ordering rules of its ``verify.ts``.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import Event
from pydantic import TypeAdapter

EVENT = TypeAdapter(Event)


def wire_keys(model: Any) -> set[str]:
    return {field.alias or name for name, field in type(model).model_fields.items()}


def check_event(obj: dict[str, Any]) -> Any:
    """One event as JSON decoded: valid, no null at its top level, no key its model lacks."""
    event = EVENT.validate_python(obj)
    assert [k for k, v in obj.items() if v is None] == [], obj
    assert set(obj) <= wire_keys(event), f"unknown keys {set(obj) - wire_keys(event)} in {obj}"
    return event


def check_stream(events: list[dict[str, Any]], ends: bool = True) -> None:
    """The ordering rules of @ag-ui/client's verify: RUN_STARTED (or RUN_ERROR) first; after
    RUN_FINISHED only RUN_STARTED or RUN_ERROR, after RUN_ERROR only RUN_STARTED; messages, tool
    calls and steps opened once and closed once, and none open at RUN_FINISHED."""
    for obj in events:
        check_event(obj)
    assert events, "an empty stream"
    assert events[0]["type"] in ("RUN_STARTED", "RUN_ERROR"), events[0]
    state, open_ = "idle", {"message": set(), "tool": set(), "step": set(), "reasoning": set(), "thought": set()}
    for obj in events:
        kind = obj["type"]
        if state == "finished":
            assert kind in ("RUN_STARTED", "RUN_ERROR"), f"{kind} after RUN_FINISHED"
        if state == "errored":
            assert kind == "RUN_STARTED", f"{kind} after RUN_ERROR"
        if kind == "RUN_STARTED":
            state = "running"
        elif kind == "RUN_FINISHED":
            assert not any(open_.values()), f"RUN_FINISHED with {open_} open"
            state = "finished"
        elif kind == "RUN_ERROR":
            state = "errored"
        else:
            _check_span(obj, open_)
    if ends:
        assert state in ("finished", "errored"), "the stream stops before the run's end"
        assert not any(open_.values()), f"the stream ends with {open_} open"


_SPANS = {
    "TEXT_MESSAGE_START": ("message", "messageId", "open"),
    "TEXT_MESSAGE_CONTENT": ("message", "messageId", "inside"),
    "TEXT_MESSAGE_END": ("message", "messageId", "close"),
    "TOOL_CALL_START": ("tool", "toolCallId", "open"),
    "TOOL_CALL_ARGS": ("tool", "toolCallId", "inside"),
    "TOOL_CALL_END": ("tool", "toolCallId", "close"),
    "STEP_STARTED": ("step", "stepName", "open"),
    "STEP_FINISHED": ("step", "stepName", "close"),
    "REASONING_START": ("reasoning", "messageId", "open"),
    "REASONING_END": ("reasoning", "messageId", "close"),
    "REASONING_MESSAGE_START": ("thought", "messageId", "open"),
    "REASONING_MESSAGE_CONTENT": ("thought", "messageId", "inside"),
    "REASONING_MESSAGE_END": ("thought", "messageId", "close"),
}


def _check_span(obj: dict[str, Any], open_: dict[str, set[str]]) -> None:
    span = _SPANS.get(obj["type"])
    if span is None:
        return
    kind, key, what = span
    ident = obj[key]
    if what == "open":
        assert ident not in open_[kind], f"{obj['type']} of {ident} already open"
        open_[kind].add(ident)
    else:
        assert ident in open_[kind], f"{obj['type']} of {ident}, which is not open"
        if what == "close":
            open_[kind].discard(ident)


def decode_sse(body: str) -> list[dict[str, Any]]:
    """The events of a bare AG-UI SSE body, split on blank lines as @ag-ui/client splits it
    (``\\n\\n`` only); comments (heartbeats) and ``id:`` lines are skipped."""
    return [event for _, event in decode_sse_ids(body)]


def decode_sse_ids(body: str) -> list[tuple[str | None, dict[str, Any]]]:
    """Each event of the body with the ``id:`` of its frame (None for a frame without one): a
    seq, or ``<seq>:<characters>`` on a delta's."""
    assert "\r" not in body
    events = []
    for frame in body.split("\n\n"):
        lines = frame.split("\n")
        data = [line[5:].lstrip(" ") for line in lines if line.startswith("data:")]
        ids = [line[3:].strip() for line in lines if line.startswith("id:")]
        if data:
            events.append((ids[-1] if ids else None, json.loads("\n".join(data))))
    return events
