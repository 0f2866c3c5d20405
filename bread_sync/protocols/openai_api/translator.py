"""The translators: a run's crumbs as chat completion chunks, or as the Responses API's events.

Sans-IO and stateful, one per answer: call one with each crumb, get that crumb's chunks (dicts in
OpenAI's wire shapes; often none), then ask it for the whole answer (the non-streaming body).
Both read the same things of a run: the agent's own text (a subagent's or a task's stays inside
them), its end and usage, its pause, its failure. A pause ends the answer with what it awaits,
as text, and the checkpoint in the ``bread`` extension field; a failure ends it with an error.
The shapes are the ones the ``openai`` package's types read (tests/test_openai_api.py checks
each against them); nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import crumbs as c
from ...crumbs import dumps, json_string, to_wire_crumb

#: The kinds of chat completion chunk the chat translator can emit (see :func:`chunk_kind`);
#: tests/test_openai_api.py pins it.
EMITTED_CHAT_CHUNKS = frozenset({"role", "content", "finish", "usage", "error"})
#: Every Responses API event type the responses translator can emit; pinned against the code.
EMITTED_RESPONSE_EVENTS = frozenset({
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done", "response.completed", "response.failed", "error",
    "response.reasoning_text.delta", "response.reasoning_text.done",
})  # fmt: skip
#: What ends a chat completion stream.
DONE = b"data: [DONE]\n\n"
#: Stand-ins for the values a delta's frame template leaves out (see :func:`_template`).
_DELTA_MARK, _SEQUENCE_MARK = "\x00delta", "\x00sequence"


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    """One SSE frame: ``data: <json>``, after ``event: <type>`` when given (the Responses API's)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {dumps(data)}\n\n".encode()


def _template(frame: bytes, *marks: str) -> list[str]:
    """``frame`` split where each mark's JSON string is, in order: the parts the values go between."""
    parts, rest = [], frame.decode()
    for mark in marks:
        head, rest = rest.split(json_string(mark))
        parts.append(head)
    return [*parts, rest]


def error_object(code: str, message: str, status: int, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object with bread's code: ``{message, type, code, param}``; ``type`` is
    OpenAI's word for the status (what its clients branch on besides the status)."""
    return {"message": message, "type": _error_type(status), "code": code, "param": param}


def _error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    return "invalid_request_error" if status < 500 else "server_error"


def pause_question(crumb: dict[str, Any]) -> str:
    """What a ``human:required`` awaits, as a sentence."""
    tool, tool_input = crumb.get("toolName"), crumb.get("input")
    if crumb["kind"] == "approval":
        return f"Approve the call of {tool}? Answer yes or no."
    question = tool_input.get("question") if isinstance(tool_input, dict) else None
    return question if isinstance(question, str) else f"{tool} asks for your input."


class _Answer:
    """What both APIs take of a run, by crumb type: the agent's text, its end, pause or failure."""

    def __init__(self, run_id: str | None, session_id: str | None):
        self.run_id, self.session_id = run_id, session_id
        #: "idle" before the first crumb, "running", then "completed", "paused" or "failed".
        self.phase = "idle"
        self.text: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.pause: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self._nested = 0  # subagents and tasks open: their text is not the agent's answer
        self._table: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
            c.TEXT_DELTA: self._delta,
            c.REASONING_DELTA: self._reasoning_delta,
            c.SUBAGENT_RUN_START: self._enter,
            c.TASK_START: self._enter,
            c.SUBAGENT_RUN_END: self._leave,
            c.TASK_END: self._leave,
            c.HUMAN_REQUIRED: self._paused,
            c.AGENT_RUN_END: self._ended,
            c.AGENT_ERROR: self._failed,
        }

    def __call__(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunks of one crumb (often none): live crumbs or wire crumbs alike."""
        if self.phase not in ("idle", "running"):
            return []
        chunks: list[dict[str, Any]] = []
        if self.phase == "idle":
            self.run_id = self.run_id or crumb["runId"]
            self.session_id = self.session_id or crumb.get("sessionId")
            self.phase = "running"
            chunks += self._opened()
        handle = self._table.get(crumb["type"])
        return [*chunks, *handle(crumb)] if handle is not None else chunks

    translate = __call__

    def frames(self, crumb: dict[str, Any]) -> list[bytes]:
        """The crumb's chunks as SSE frames (:meth:`frame`). A text delta of the agent's open
        answer, most of a stream, is its JSON string put into a frame template made once per
        answer: no chunk built or serialised per delta."""
        if crumb["type"] == c.TEXT_DELTA and self.phase == "running" and not self._nested:
            framed = self._delta_frame(crumb["delta"])
            if framed is not None:
                self.text.append(crumb["delta"])
                return [framed]
        return [self.frame(chunk) for chunk in self(crumb)]

    def extension(self) -> dict[str, Any]:
        """The ``bread`` field: the run, its session, how it stands, and a pause's checkpoint."""
        status = "running" if self.phase in ("idle", "running") else self.phase
        found = {"runId": self.run_id, "sessionId": self.session_id, "status": status}
        if self.pause is not None:
            found["checkpoint"] = self.pause
        if self.error is not None:
            found["error"] = self.error
        return found

    def _delta(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        if self._nested:
            return []
        self.text.append(crumb["delta"])
        return self._text(crumb["delta"])

    def _reasoning_delta(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        return [] if self._nested else self._reasoning(crumb["delta"])

    def _reasoning(self, delta: str) -> list[dict[str, Any]]:
        """The agent's thinking, live: left out unless an API has a field for it (chat's)."""
        return []

    def _enter(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        self._nested += 1
        return []

    def _leave(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        self._nested = max(0, self._nested - 1)
        return []

    def _paused(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        question = pause_question(crumb)
        said = f"\n\n{question}" if "".join(self.text).strip() else question
        self.text.append(said)
        keys = ("kind", "toolName", "toolCallId", "input")
        self.pause = {"id": crumb["checkpointId"], **{k: crumb.get(k) for k in keys}, "question": question}
        chunks = self._text(said)
        self.phase = "paused"
        return [*chunks, *self._closed()]

    def _ended(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        usage = crumb.get("usage")
        self.usage = usage if isinstance(usage, dict) else None
        self.phase = "completed"
        return self._closed()

    def _failed(self, crumb: dict[str, Any]) -> list[dict[str, Any]]:
        error = to_wire_crumb(crumb)["error"]
        self.error = {"code": str(error.get("code") or "INTERNAL"), "message": str(error.get("message") or "")}
        self.phase = "failed"
        return self._failure()

    # what each API writes for these moments
    def frame(self, chunk: dict[str, Any]) -> bytes:
        """One chunk as the API's SSE frame."""
        raise NotImplementedError

    def _delta_frame(self, delta: str) -> bytes | None:
        """A text delta's frame from the template, or None before the template applies."""
        raise NotImplementedError

    def _opened(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _text(self, delta: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _closed(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _failure(self) -> list[dict[str, Any]]:
        raise NotImplementedError


def chunk_kind(chunk: dict[str, Any]) -> str:
    """Which of :data:`EMITTED_CHAT_CHUNKS` a chat chunk is."""
    if "error" in chunk:
        return "error"
    if not chunk["choices"]:
        return "usage"
    choice = chunk["choices"][0]
    if choice["finish_reason"] is not None:
        return "finish"
    return "role" if "role" in choice["delta"] else "content"


class ChatCompletionsTranslator(_Answer):
    """Crumbs to ``chat.completion.chunk`` objects; :meth:`completion` is the whole answer.

    The first chunk names the role; each text delta is a content chunk (a reasoning delta one
    with ``reasoning_content``, as OpenAI-compatible servers send thinking); the end (or a pause,
    after its question) is a chunk with ``finish_reason: "stop"`` and the ``bread`` field, then,
    with ``include_usage``, a chunk of no choices with ``usage`` (null when the provider reported
    none). A failure is ``{"error": {...}}``, which the OpenAI clients raise."""

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int,
        include_usage: bool = False,
        run_id: str | None = None,
        session_id: str | None = None,
    ):
        super().__init__(run_id, session_id)
        self.head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self.include_usage = include_usage
        self._content = _template(self.frame(self._content_chunk(_DELTA_MARK)), _DELTA_MARK)

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` of the run so far (read once the run ended or paused)."""
        message = {"role": "assistant", "content": "".join(self.text), "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        body = {**self.head, "object": "chat.completion", "choices": [choice], "bread": self.extension()}
        if self.usage is not None:
            body["usage"] = chat_usage(self.usage)
        return body

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self.head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    def frame(self, chunk: dict[str, Any]) -> bytes:
        return sse(chunk)

    def _delta_frame(self, delta: str) -> bytes:
        head, tail = self._content
        return f"{head}{json_string(delta)}{tail}".encode()

    def _content_chunk(self, delta: str) -> dict[str, Any]:
        return self._chunk({"content": delta})

    def _opened(self) -> list[dict[str, Any]]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def _text(self, delta: str) -> list[dict[str, Any]]:
        return [self._content_chunk(delta)]

    def _reasoning(self, delta: str) -> list[dict[str, Any]]:
        # the field OpenAI-compatible servers (vLLM, DeepSeek, llama.cpp) stream thinking in
        return [self._chunk({"reasoning_content": delta})]

    def _closed(self) -> list[dict[str, Any]]:
        chunks = [{**self._chunk({}, "stop"), "bread": self.extension()}]
        if self.include_usage:
            usage = chat_usage(self.usage) if self.usage is not None else None
            chunks.append({**self.head, "choices": [], "usage": usage})
        return chunks

    def _failure(self) -> list[dict[str, Any]]:
        assert self.error is not None
        return [{"error": error_object(self.error["code"], self.error["message"], 500)}]


def chat_usage(usage: dict[str, Any]) -> dict[str, int]:
    """bread's run usage (``inputTokens``, ``outputTokens``, ``totalTokens``) in chat's words."""
    given, made = int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0)
    return {"prompt_tokens": given, "completion_tokens": made, "total_tokens": int(usage.get("totalTokens") or 0)}


def responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """bread's run usage in the Responses API's words."""
    chat = chat_usage(usage)
    return {
        "input_tokens": chat["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": chat["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chat["total_tokens"],
    }


@dataclass
class _Reasoning:
    """A reasoning item of a response: its id, where it stands in the output, its text so far."""

    id: str
    index: int
    parts: list[str] = field(default_factory=list)

    def where(self) -> dict[str, Any]:
        return {"item_id": self.id, "output_index": self.index, "content_index": 0}

    def json(self, status: str) -> dict[str, Any]:
        content = [_reasoning_part("".join(self.parts))] if self.parts else []
        return {"id": self.id, "type": "reasoning", "summary": [], "content": content, "status": status}


def _reasoning_part(text: str) -> dict[str, Any]:
    return {"type": "reasoning_text", "text": text}


class ResponsesTranslator(_Answer):
    """Crumbs to the Responses API's typed events; :meth:`response` is the whole answer.

    ``response.created`` and ``response.in_progress`` open; the first text adds the message
    item and its ``output_text`` part, each delta is ``response.output_text.delta``; the end (or
    a pause, after its question) closes the part and the item and is ``response.completed``,
    whose response has ``usage`` and the ``bread`` field. A failure is ``error`` (bread's code)
    then ``response.failed``. Each event has its ``sequence_number``."""

    def __init__(
        self,
        response_id: str,
        model: str,
        created: int,
        run_id: str | None = None,
        session_id: str | None = None,
        instructions: str | None = None,
    ):
        super().__init__(run_id, session_id)
        self.response_id, self.model, self.created, self.instructions = response_id, model, created, instructions
        self.item_id = f"msg_{response_id.removeprefix('resp_')}"
        self._sequence = 0
        self._open = False  # whether the message item was added
        self._text_delta: list[str] | None = None  # the delta's frame template, once the item is open
        #: The output's items in order: the message (its text is ``self.text``) where it was
        #: added, and a reasoning item for each stretch of thinking, holding its text.
        self._items: list[_Reasoning | None] = []
        self._thinking: _Reasoning | None = None  # the reasoning item still open

    def response(self) -> dict[str, Any]:
        """The ``response`` object of the run so far."""
        status = {"completed": "completed", "paused": "completed", "failed": "failed"}.get(self.phase, "in_progress")
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": self._output("completed" if status == "completed" else "in_progress"),
            "error": None,
            "incomplete_details": None,
            "instructions": self.instructions,
            "metadata": {},
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": responses_usage(self.usage) if self.usage is not None else None,
            "bread": self.extension(),
        }
        if self.error is not None:
            body["error"] = {"code": "server_error", "message": f"{self.error['code']}: {self.error['message']}"}
        return body

    def _event(self, kind: str, sequence: int | str | None = None, **fields: Any) -> dict[str, Any]:
        """An event, numbered next unless ``sequence`` is given (a template's mark)."""
        if sequence is None:
            sequence, self._sequence = self._sequence, self._sequence + 1
        return {"type": kind, "sequence_number": sequence, **fields}

    def _delta_event(self, delta: str, sequence: int | str | None = None) -> dict[str, Any]:
        return self._event("response.output_text.delta", sequence, **self._where(), delta=delta, logprobs=[])

    def frame(self, chunk: dict[str, Any]) -> bytes:
        return sse(chunk, chunk["type"])

    def _delta_frame(self, delta: str) -> bytes | None:
        if not self._open or self._thinking is not None:  # the item to add, or reasoning to close first
            return None
        if self._text_delta is None:
            event = self._delta_event(_DELTA_MARK, _SEQUENCE_MARK)
            self._text_delta = _template(self.frame(event), _SEQUENCE_MARK, _DELTA_MARK)
        head, middle, tail = self._text_delta
        self._sequence += 1
        return f"{head}{self._sequence - 1}{middle}{json_string(delta)}{tail}".encode()

    def _item(self, status: str) -> dict[str, Any]:
        content = [self._part()] if status == "completed" or self.text else []
        return {"id": self.item_id, "type": "message", "role": "assistant", "status": status, "content": content}

    def _part(self) -> dict[str, Any]:
        return {"type": "output_text", "text": "".join(self.text), "annotations": [], "logprobs": []}

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "output_index": self._items.index(None), "content_index": 0}

    def _output(self, status: str) -> list[dict[str, Any]]:
        return [self._item(status) if item is None else item.json(status) for item in self._items]

    def _reasoning(self, delta: str) -> list[dict[str, Any]]:
        """Thinking is a reasoning item of its own (``reasoning_text`` content, as open-weight
        models' servers send it), added when a stretch of it begins, closed when text follows."""
        events = []
        if self._thinking is None:
            self._thinking = _Reasoning(f"rs_{self.response_id.removeprefix('resp_')}_{len(self._items)}",
                                        len(self._items))  # fmt: skip
            self._items.append(self._thinking)
            events += [
                self._event("response.output_item.added", output_index=self._thinking.index,
                            item=self._thinking.json("in_progress")),
                self._event("response.content_part.added", **self._thinking.where(), part=_reasoning_part("")),
            ]  # fmt: skip
        self._thinking.parts.append(delta)
        return [*events, self._event("response.reasoning_text.delta", **self._thinking.where(), delta=delta)]

    def _thought(self) -> list[dict[str, Any]]:
        """The open reasoning item's closing events (none if none is open)."""
        item, self._thinking = self._thinking, None
        if item is None:
            return []
        text = "".join(item.parts)
        return [
            self._event("response.reasoning_text.done", **item.where(), text=text),
            self._event("response.content_part.done", **item.where(), part=_reasoning_part(text)),
            self._event("response.output_item.done", output_index=item.index, item=item.json("completed")),
        ]

    def _opened(self) -> list[dict[str, Any]]:
        snapshot = self.response()
        created = self._event("response.created", response=snapshot)
        return [created, self._event("response.in_progress", response=snapshot)]

    def _text(self, delta: str) -> list[dict[str, Any]]:
        events = self._thought()
        if not self._open:
            self._open = True
            self._items.append(None)
            item = {"id": self.item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events += [
                self._event("response.output_item.added", output_index=self._where()["output_index"], item=item),
                self._event("response.content_part.added", **self._where(), part=part),
            ]
        return [*events, self._delta_event(delta)]

    def _closed(self) -> list[dict[str, Any]]:
        events = self._thought()
        if self._open:
            events += [
                self._event("response.output_text.done", **self._where(), text="".join(self.text), logprobs=[]),
                self._event("response.content_part.done", **self._where(), part=self._part()),
                self._event("response.output_item.done", output_index=self._where()["output_index"],
                            item=self._item("completed")),
            ]  # fmt: skip
        return [*events, self._event("response.completed", response=self.response())]

    def _failure(self) -> list[dict[str, Any]]:
        assert self.error is not None
        error = self._event("error", code=self.error["code"], message=self.error["message"], param=None)
        return [error, self._event("response.failed", response=self.response())]
