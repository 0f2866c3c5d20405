"""The two HTTP wire formats, sans-IO: SSE events and NDJSON lines, both ways.

SSE: each crumb is ``id: <seq>`` + ``data: {"type", "payload"}``; failures with no run are an
``error`` message without an id. NDJSON: one Bread protocol CrumbFrame per line; an empty line
is a heartbeat. Decoders take bytes in any split and return the whole events or frames they complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..crumbs import AGENT_ERROR, Frame, dumps, loads
from ..errors import PROTOCOL_DECODE_ERROR, BreadError
from .frames import BREAD_PROTOCOL_VERSION, crumb_frame_text, decode_frame

SSE_RETRY_MS = 3000
SSE_PING = b": ping\n\n"
#: Why a stream ends before its run does: its client fell too far behind (a comment, which every
#: SSE client skips; an EventSource reconnects with Last-Event-ID and catches up from the log).
SSE_BEHIND = b": behind: reconnect with Last-Event-ID to catch up\n\n"
#: The same, for a stream that has no resume (the MCP and OpenAI-compatible bridges'): no
#: reconnect would catch it up, but its run goes on, read back by the id of its ``Bread-Run-Id``.
SSE_BEHIND_FOR_GOOD = (
    b": behind: this stream does not resume; its run goes on: GET /runs/<id>/wait answers its output,"
    b" <id> being this response's Bread-Run-Id header\n\n"
)
NDJSON_HEARTBEAT = b"\n"


def sse_crumb(frame: Frame) -> bytes:
    # frame.wire is the crumb's JSON, made once at the choke point: wrap it, do not re-encode.
    return f'id: {frame.seq}\ndata: {{"type":{dumps(frame.type)},"payload":{frame.wire}}}\n\n'.encode()


def sse_error(error: BreadError) -> bytes:
    payload = {"type": "error", "payload": {"code": error.code, "message": error.message}}
    return f"data: {dumps(payload)}\n\n".encode()


def sse_retry(ms: int = SSE_RETRY_MS) -> bytes:
    return f"retry: {ms}\n\n".encode()


def ndjson_crumb(frame: Frame) -> bytes:
    return crumb_frame_text(frame, "\n").encode()


def sse_gap(earliest_seq: int) -> bytes:
    return f'event: gap\ndata: {{"earliestSeq":{earliest_seq}}}\n\n'.encode()


def ndjson_failure(error: BreadError, run_id: str) -> bytes:
    # No run was created: a synthetic agent:error frame at seq 0; it is not in any log.
    return ndjson_crumb(Frame(run_id, 0, {"type": AGENT_ERROR, "runId": run_id, "error": error}))


def ndjson_gap(earliest_seq: int, run_id: str) -> bytes:
    return (
        dumps({"v": BREAD_PROTOCOL_VERSION, "type": "gap", "runId": run_id, "earliestSeq": earliest_seq}) + "\n"
    ).encode()


@dataclass(frozen=True)
class Wire:
    """One HTTP wire format: how a streaming response says each thing it has to say."""

    name: str
    content_type: str
    crumb: Callable[[Frame], bytes]
    heartbeat: bytes
    failure: Callable[[BreadError, str], bytes]
    gap: Callable[[int, str], bytes]
    passive_prelude: bytes = b""
    #: SSE also sends an ``error`` event after a logged ``agent:error``; NDJSON needs nothing more.
    error_sidecar: bool = False
    #: The last chunk of a stream whose client fell behind (NDJSON has nothing but frames).
    behind: bytes = b""

    def frame(self, frame: Frame) -> bytes:
        data = self.crumb(frame)
        if self.error_sidecar and frame.type == AGENT_ERROR:
            error = frame.crumb["error"]
            data += sse_error(error if isinstance(error, BreadError) else BreadError.from_wire(error))
        return data


SSE = Wire(
    name="sse",
    content_type="text/event-stream; charset=utf-8",
    crumb=sse_crumb,
    heartbeat=SSE_PING,
    failure=lambda error, run_id: sse_error(error),
    gap=lambda earliest, run_id: sse_gap(earliest),
    passive_prelude=sse_retry(),
    error_sidecar=True,
    behind=SSE_BEHIND,
)

NDJSON = Wire(
    name="ndjson",
    content_type="application/x-ndjson",
    crumb=ndjson_crumb,
    heartbeat=NDJSON_HEARTBEAT,
    failure=ndjson_failure,
    gap=ndjson_gap,
)


@dataclass
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        return loads(self.data)


class LineSplitter:
    """The whole lines of a body fed in any split, at a cost linear in its length: a line's
    parts are held until its newline comes and joined once, rather than re-copied and re-scanned
    with every chunk (a long line would cost its length squared).

    ``max_bytes`` (None: no bound) bounds a line: past it, ``PROTOCOL_DECODE_ERROR`` as soon as
    the bytes show it, so no more than ``max_bytes`` and one chunk is ever held.
    """

    __slots__ = ("max_bytes", "_parts", "_held")

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._held = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, without their ``\\n``."""
        fed = self._held + len(chunk)
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if self._parts and lines:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts, self._held = [], 0
        if rest:
            self._parts.append(rest)
            self._held += len(rest)
        if self.max_bytes is not None and fed > self.max_bytes:  # else no line can be too long
            self._check(lines, self.max_bytes)
        return lines

    def _check(self, lines: list[bytes], max_bytes: int) -> None:
        if self._held > max_bytes or any(len(line) > max_bytes for line in lines):
            raise BreadError(PROTOCOL_DECODE_ERROR, f"a stream's line is longer than {max_bytes} bytes")


@dataclass
class SSEDecoder:
    """The event-stream parsing algorithm of the HTML standard, fed bytes in any split.

    Comments (heartbeats) are skipped; ``last_event_id`` is what a reconnect would send.
    ``max_bytes`` (None: no bound) bounds a line and an event's fields together:
    ``PROTOCOL_DECODE_ERROR`` past it.
    """

    last_event_id: str | None = None
    max_bytes: int | None = None
    _lines: LineSplitter = field(init=False)
    _event_bytes: int = 0
    _pending_cr: bool = False
    _data: list[str] = field(default_factory=list)
    _event: str = ""
    _retry: int | None = None
    _id_seen: bool = False

    def __post_init__(self) -> None:
        self._lines = LineSplitter(self.max_bytes)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        # Lines are split as bytes and decoded whole: a newline byte is never part of a
        # multi-byte UTF-8 sequence, so no incremental decoder is needed.
        if not chunk:
            return []
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith(b"\r")
        if b"\r" in chunk:  # the buffer kept from before is normalised already
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = []
        for line in self._lines.feed(chunk):
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line[0] != 0x3A:  # a line starting with ":" is a comment (a heartbeat): skipped
                self._count(len(line))
                self._field(line.decode())
        return events

    def _count(self, size: int) -> None:
        # An event of many short data lines would grow as surely as one long line.
        self._event_bytes += size
        if self.max_bytes is not None and self._event_bytes > self.max_bytes:
            raise BreadError(PROTOCOL_DECODE_ERROR, f"a stream's event is longer than {self.max_bytes} bytes")

    def _field(self, line: str) -> None:
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_event_id, self._id_seen = value, True
        elif name == "retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> SSEEvent | None:
        data, event, retry, id_seen = self._data, self._event, self._retry, self._id_seen
        self._data, self._event, self._retry, self._id_seen = [], "", None, False
        self._event_bytes = 0
        if not data:
            return SSEEvent("", event or "message", None, retry) if retry is not None else None
        return SSEEvent("\n".join(data), event or "message", self.last_event_id if id_seen else None, retry)


class NDJSONDecoder:
    """Splits an NDJSON body into decoded Bread protocol frames; empty lines are heartbeats.
    ``max_bytes`` (None: no bound) bounds a line: ``PROTOCOL_DECODE_ERROR`` past it."""

    def __init__(self, max_bytes: int | None = None):
        self._lines = LineSplitter(max_bytes)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        return [decode_frame(line) for line in self.lines(chunk)]

    def lines(self, chunk: bytes) -> list[bytes]:
        """The frames' lines ``chunk`` completes, undecoded (heartbeats left out)."""
        return [line.rstrip(b"\r") for line in self._lines.feed(chunk) if line.strip()]
