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

    def frame(self, item: dict[str, Any], seq: int | None = None) -> bytes:
        frame = f"{self._head}{dumps(item)}}}\n\n"
        return (f"id: {seq}\n{frame}" if seq is not None else frame).encode()

    def event(self, event: Event, seq: int | None = None) -> bytes:
        if event.__class__ is TextChunk:
            return self._text(event)
        return self.frame(self.dialect.event(self.task_id, self.context_id, event), seq)

    def crumb(self, frame: Any) -> list[bytes]:
        """The frames of one of the run's frames (often none)."""
        crumb = frame.crumb
        if crumb["type"] == TEXT_DELTA:
            return [self._text(self.translator.text(crumb["delta"]))]
        events = self.translator(crumb)
        out = [self.event(event) for event in events[:-1]]
        if events:
            out.append(self.event(events[-1], frame.seq))
        return out

    def _text(self, chunk: TextChunk) -> bytes:
        key = (chunk.artifact_id, chunk.append)
        template = self._templates.get(key)
        if template is None:
            head, tail = self.dialect.text_template(self.task_id, self.context_id, chunk.artifact_id, chunk.append)
            template = self._templates[key] = (self._head + head, tail + "}\n\n")
        return f"{template[0]}{json_string(chunk.text)}{template[1]}".encode()
