"""The translator: a run's crumbs as A2A task events, sans-IO and stateful, one per stream.

Its events are neutral (:class:`Status`, :class:`ArtifactChunk`, :class:`TextChunk`); a
dialect (``v03.py``, ``v10.py``) writes them in its version's shapes. Parts are neutral dicts
too, one key each: ``{"text": str}``, ``{"data": value}``, ``{"file": {"uri", "mimeType"?,
"name"?}}``, and a ``metadata`` beside it where the part has one (a thought's text).

The model's thinking (``reasoning:delta``) is a ``working`` status update whose message is the
delta as a text part marked ``metadata: {"thought": true}``, never an artifact: a task's
artifacts stay its answer, and a client that knows nothing of thoughts shows them as progress.

Artifact ids are made from the task id and the run's log, never at random, so a stream resumed
after a dropped connection names the same artifacts as the stream it continues: the run's text
is the artifact ``<taskId>-text-<turn>`` (a turn ends at each pause for a human), its n-th file
``<taskId>-file-<n>``, a structured output ``<taskId>-output``. After a run was carried on
(``agent:run:continued``), the turn's text goes on in ``<taskId>-text-<turn>-after<afterSeq>``:
the text streamed after ``afterSeq`` was lost with its process, so it is left where it is and the
call made again writes a new artifact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from ... import crumbs as c
from ...crumbs import to_wire_crumb
from ...errors import RUN_CANCELLED

#: The task states bread's runs take, in v0.3's spelling (a dialect spells them its way).
WORKING, INPUT_REQUIRED, COMPLETED, CANCELED, FAILED = "working", "input-required", "completed", "canceled", "failed"
SUBMITTED = "submitted"
#: A run record's status as a task state.
RUN_STATES = {
    "queued": SUBMITTED,
    "running": WORKING,
    "paused": INPUT_REQUIRED,
    "completed": COMPLETED,
    "failed": FAILED,
    "cancelled": CANCELED,
    "interrupted": FAILED,
}
TERMINAL_STATES = frozenset({COMPLETED, CANCELED, FAILED})
#: The metadata of a text part that is the model's thinking, not its answer: A2A has no part of its
#: own for thoughts (the convention of Google's ADK, whose A2A agents mark them so).
THOUGHT = {"thought": True}
#: The pause fields a paused task's data part carries.
PAUSE_KEYS = ("checkpointId", "kind", "toolName", "toolCallId", "input")


@dataclass(frozen=True, slots=True)
class Status:
    """A status update; ``final`` when the stream ends with it (a terminal state, or a pause)."""

    state: str
    parts: list[dict[str, Any]] | None = None
    message_id: str | None = None
    final: bool = False


@dataclass(frozen=True, slots=True)
class ArtifactChunk:
    artifact_id: str
    parts: list[dict[str, Any]]
    append: bool = False
    last_chunk: bool = False


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the run's text: its own event class, as most events are these (the dialects
    write them from a template)."""

    artifact_id: str
    append: bool
    text: str


Event = Status | ArtifactChunk | TextChunk


@dataclass(frozen=True, slots=True)
class Message:
    """A message of a task's history: ``role`` ``"user"`` or ``"agent"``."""

    role: str
    parts: list[dict[str, Any]]
    message_id: str


def pause_part(crumb: dict[str, Any]) -> dict[str, Any]:
    """The data part of a pause (a ``human:required`` crumb or a checkpoint record): what was
    asked, and the checkpoint the next message answers."""
    data = {key: crumb.get(key) for key in PAUSE_KEYS}
    tool_input = crumb.get("input")
    question = tool_input.get("question") if isinstance(tool_input, dict) else None
    if crumb.get("kind") == "approval":
        question = f"Approve the call of {crumb.get('toolName')}? Answer yes or no."
    data["question"] = question if isinstance(question, str) else f"{crumb.get('toolName')} asks for your input."
    return {"data": data}


def output_part(output: Any) -> dict[str, Any] | None:
    """A run's output as a part: None for text (its text streamed already), a file part for a
    file reference (``{uri, mimeType}``), else a data part."""
    if output is None or isinstance(output, str):
        return None
    if is_file_reference(output):
        return {"file": {k: output[k] for k in ("uri", "mimeType", "name") if output.get(k) is not None}}
    return {"data": output}


def is_file_reference(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("uri"), str) and isinstance(value.get("mimeType"), str)


class A2ATranslator:
    """``translator(crumb) -> [event, ...]``. ``base_url`` makes a file's relative uri (the blob
    store's ``/files/<id>``) absolute, as an A2A client needs it. Does no I/O; one per stream."""

    def __init__(self, task_id: str, base_url: str = ""):
        self.task_id = task_id
        self.base_url = base_url
        self._turn = 1
        self._text_id = f"{task_id}-text-1"
        self._text_open = False  # this turn's text artifact was sent: later chunks append
        self._files = 0
        self._uris: set[str] = set()
        self._table: dict[str, Callable[[dict[str, Any]], list[Event]]] = {
            c.TEXT_DELTA: self._text,
            c.REASONING_DELTA: self._thought,
            c.AGENT_RUN_CONTINUED: self._continued,
            c.FILE_GENERATED: self._file,
            c.HUMAN_REQUIRED: self._paused,
            c.HUMAN_RESUMED: self._resumed,
            c.AGENT_RUN_END: self._completed,
            c.AGENT_ERROR: self._failed,
        }

    def __call__(self, crumb: dict[str, Any]) -> list[Event]:
        handle = self._table.get(crumb["type"])
        return handle(crumb) if handle is not None else []

    def text(self, delta: str) -> TextChunk:
        """A text delta's event."""
        return TextChunk(*self.text_key(), delta)

    def text_key(self) -> tuple[str, bool]:
        """What a text delta's event is, but its text: its artifact id and ``append``. The hot
        path (an encoder writing deltas from a template) takes this and makes no event."""
        append, self._text_open = self._text_open, True
        return self._text_id, append

    def _text(self, crumb: dict[str, Any]) -> list[Event]:
        return [self.text(crumb["delta"])]

    def _thought(self, crumb: dict[str, Any]) -> list[Event]:
        part = {"text": crumb["delta"], "metadata": THOUGHT}
        return [Status(WORKING, [part], f"{self.task_id}-thought-{self._turn}")]

    def _file(self, crumb: dict[str, Any]) -> list[Event]:
        self._files += 1
        self._uris.add(crumb["uri"])
        file = {k: crumb[k] for k in ("uri", "mimeType", "name") if crumb.get(k) is not None}
        file["uri"] = urljoin(self.base_url, file["uri"])
        return [ArtifactChunk(f"{self.task_id}-file-{self._files}", [{"file": file}], last_chunk=True)]

    def _paused(self, crumb: dict[str, Any]) -> list[Event]:
        return [Status(INPUT_REQUIRED, [pause_part(crumb)], crumb["checkpointId"], final=True)]

    def _continued(self, crumb: dict[str, Any]) -> list[Event]:
        self._new_text_artifact(f"{self.task_id}-text-{self._turn}-after{crumb['afterSeq']}")
        return []

    def _resumed(self, crumb: dict[str, Any]) -> list[Event]:
        self._turn += 1
        self._new_text_artifact(f"{self.task_id}-text-{self._turn}")
        return [Status(WORKING)]

    def _new_text_artifact(self, artifact_id: str) -> None:
        self._text_id, self._text_open = artifact_id, False

    def _completed(self, crumb: dict[str, Any]) -> list[Event]:
        output = crumb.get("output")
        events: list[Event] = []
        part = output_part(output)
        if part is not None and "file" in part:
            if output["uri"] not in self._uris:  # a tool's file the agent echoed, not yet announced
                events += self._file(output)
        elif part is not None:
            events.append(ArtifactChunk(f"{self.task_id}-output", [part], last_chunk=True))
        return [*events, Status(COMPLETED, final=True)]

    def _failed(self, crumb: dict[str, Any]) -> list[Event]:
        error = to_wire_crumb(crumb)["error"]
        state = CANCELED if error.get("code") == RUN_CANCELLED else FAILED
        sanitized = {"code": error.get("code"), "message": error.get("message")}
        parts = [{"text": f"{sanitized['code']}: {sanitized['message']}"}, {"data": sanitized}]
        return [Status(state, parts, f"{self.task_id}-{state}", final=True)]


class TaskFold:
    """The events of a stream folded into the task they describe: what ``message/send``
    answers once its run ended or paused."""

    def __init__(self) -> None:
        self.status = Status(WORKING)
        self.artifacts: dict[str, ArtifactChunk] = {}

    def add(self, event: Event) -> None:
        if isinstance(event, Status):
            self.status = event
            return
        parts = [{"text": event.text}] if isinstance(event, TextChunk) else event.parts
        held = self.artifacts.get(event.artifact_id)
        if held is not None and event.append:
            if "text" in parts[0] and held.parts and "text" in held.parts[-1]:
                parts = [{"text": held.parts[-1]["text"] + parts[0]["text"]}, *parts[1:]]
                held_parts = held.parts[:-1]
            else:
                held_parts = held.parts
            parts = [*held_parts, *parts]
        self.artifacts[event.artifact_id] = ArtifactChunk(event.artifact_id, parts)


class TaskLog:
    """A task rebuilt from its run's log, crumb by crumb (``log.add(crumb)``): its status and
    artifacts as its stream folded them, and its history: the user's input and answers, the
    agent's status messages (a pause, a failure), in order. Sans-IO, as the translator."""

    def __init__(self, task_id: str, base_url: str = ""):
        self.task_id = task_id
        self.translator = A2ATranslator(task_id, base_url)
        self.fold = TaskFold()
        self.history: list[Message] = []
        self._started = False

    def add(self, crumb: dict[str, Any]) -> None:
        kind = crumb["type"]
        if kind == c.AGENT_RUN_START and not self._started:  # a continuation starts again: one input
            self._started = True
            self._user(input_parts(crumb.get("input"), self.translator.base_url))
        elif kind == c.HUMAN_RESUMED:
            self._user([{"data": crumb.get("response")}])
        for event in self.translator(crumb):
            self.fold.add(event)
            if event.__class__ is Status and event.parts:
                self.history.append(Message("agent", event.parts, event.message_id or f"{self.task_id}-{event.state}"))

    def _user(self, parts: list[dict[str, Any]]) -> None:
        count = sum(1 for message in self.history if message.role == "user")
        self.history.append(Message("user", parts, f"{self.task_id}-user-{count + 1}"))


def input_parts(value: Any, base_url: str = "") -> list[dict[str, Any]]:
    """A run's input as the parts of the message that gave it (``parts.run_input`` backwards):
    a text, the tagged parts, a file (``{uri, mimeType?, name?}``), else one data part."""
    if isinstance(value, str):
        return [{"text": value}]
    if isinstance(value, list) and value and all(_is_tagged_part(part) for part in value):
        return [_absolute(part, base_url) for part in value]
    if _is_file(value):
        return [_absolute({"file": value}, base_url)]
    return [{"data": value}]


def _is_tagged_part(part: Any) -> bool:
    if not isinstance(part, dict) or len(part) != 1:
        return False
    key, value = next(iter(part.items()))
    return key == "data" or (key == "text" and isinstance(value, str)) or (key == "file" and _is_file(value))


def _is_file(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("uri"), str) and set(value) <= {"uri", "mimeType", "name"}


def _absolute(part: dict[str, Any], base_url: str) -> dict[str, Any]:
    if "file" not in part:
        return part
    return {"file": {**part["file"], "uri": urljoin(base_url, part["file"]["uri"])}}
