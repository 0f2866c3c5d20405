"""The SSE body of a streaming method, sans-IO: each event in a JSON-RPC success envelope,
``id: <seq>`` on the last event of a durable crumb (where a resubscribe may start)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ...crumbs import TEXT_DELTA, dumps, json_string
from .rpc import result_head
from .translator import A2ATranslator, Event, TextChunk

CONTENT_TYPE = "text/event-stream"
#: What a resubscribe opens with, before anything of the task is known to be there to send.
CONNECTED = b": connected\n\n"
#: An SSE comment: clients skip it, proxies see the stream is alive.
HEARTBEAT = b": ping\n\n"


def one_event(body: dict[str, Any]) -> bytes:
    """An SSE body of one event: ``body`` (a JSON-RPC error, for a v0.3 stream refused at once)."""
    return f"data: {dumps(body)}\n\n".encode()


class StreamEncoder:
    """One stream's frames: ``encoder.frame(item)`` for a stream item (a dict), ``encoder.crumb(
    frame)`` for the events of a run's frame. A text delta is written from a template made once
    per artifact (its JSON around its text), not through the models."""

    def __init__(self, dialect: ModuleType, request_id: Any, task_id: str, context_id: str, base_url: str = ""):
        self.dialect = dialect
        self.task_id, self.context_id = task_id, context_id
        self.translator = A2ATranslator(task_id, base_url)
        self._head = "data: " + result_head(request_id)
        self._templates: dict[tuple[str, bool], tuple[str, str]] = {}
        self._opening: dict[str, Any] | None = None

    def open_with(self, item: dict[str, Any]) -> None:
        """Write ``item`` (a stream's Task) before the events of the first crumb; when that crumb
        has none (the run's start), the Task is its last event and carries its ``id: <seq>``."""
        self._opening = item

    def unsent_opening(self) -> list[bytes]:
        """The Task of :meth:`open_with` when no crumb has brought it yet (a failure writes it
        first, so a stream still opens with its Task)."""
        opening, self._opening = self._opening, None
        return [] if opening is None else [self.frame(opening)]

    def frame(self, item: dict[str, Any], seq: int | None = None) -> bytes:
        frame = f"{self._head}{dumps(item)}}}\n\n"
        return (f"id: {seq}\n{frame}" if seq is not None else frame).encode()

    def event(self, event: Event, seq: int | None = None) -> bytes:
        if event.__class__ is TextChunk:
            return self._text((event.artifact_id, event.append), event.text)
        return self.frame(self.dialect.event(self.task_id, self.context_id, event), seq)

    def crumb(self, frame: Any) -> list[bytes]:
        """The frames of one of the run's frames (often none)."""
        if self._opening is not None:
            opening, self._opening = self._opening, None
            rest = self.crumb(frame)
            return [self.frame(opening, None if rest else frame.seq), *rest]
        crumb = frame.crumb
        if crumb["type"] == TEXT_DELTA:
            return [self._text(self.translator.text_key(), crumb["delta"])]
        events = self.translator(crumb)
        out = [self.event(event) for event in events[:-1]]
        if events:  # a delta's seq is its watermark, no position of its own: no id to resume from
            out.append(self.event(events[-1], frame.seq if frame.durable else None))
        return out

    def _text(self, key: tuple[str, bool], text: str) -> bytes:
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._text_template(*key)
        return f"{template[0]}{json_string(text)}{template[1]}".encode()

    def _text_template(self, artifact_id: str, append: bool) -> tuple[str, str]:
        head, tail = _text_template(self.dialect, append)
        for mark, value in ((TASK_MARK, self.task_id), (CONTEXT_MARK, self.context_id), (ARTIFACT_MARK, artifact_id)):
            escaped = json_string(value)[1:-1]
            head, tail = head.replace(mark, escaped), tail.replace(mark, escaped)
        return self._head + head, tail + "}\n\n"


#: Stand-ins for a text chunk's ids in its template, made once per process (the models' output
#: with these in it; each stream puts its ids in their place).
TASK_MARK, CONTEXT_MARK, ARTIFACT_MARK = "\x01task\x01", "\x01context\x01", "\x01artifact\x01"
TEXT_MARK = "\x00text\x00"
_text_templates: dict[tuple[str, bool], tuple[str, str]] = {}


def _text_template(dialect: ModuleType, append: bool) -> tuple[str, str]:
    key = (dialect.VERSION, append)
    template = _text_templates.get(key)
    if template is None:
        # The dialect's own event, split around its text (a JSON string), its ids left as marks.
        whole = dumps(dialect.event(TASK_MARK, CONTEXT_MARK, TextChunk(ARTIFACT_MARK, append, TEXT_MARK)))
        head, _, tail = whole.partition(dumps(TEXT_MARK))
        for mark in (TASK_MARK, CONTEXT_MARK, ARTIFACT_MARK):
            escaped = json_string(mark)[1:-1]
            head, tail = head.replace(escaped, mark), tail.replace(escaped, mark)
        template = _text_templates[key] = (head, tail)
    return template
