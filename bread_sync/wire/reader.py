"""Reading one run's stream across reconnects, sans-IO: the remote-agent relay and the client
both drive it with their own connection loop.

The loop opens a response (a run, resume or passive stream route), calls :meth:`connect` with
its Content-Type, feeds it the body's bytes as they come and delivers what :meth:`feed` returns.
When the body ends or stalls past the heartbeat timeout before the run has ended, it opens
``GET /runs/<id>/stream`` with :attr:`last_event_id` and goes on feeding the same reader.

Across any number of reconnects the caller gets every durable crumb once and in order, never
one the server lacks, and each text segment's text once, under the dedup rule of ``replay.py``.
A caller that holds the run's text keeps it in a :class:`~bread_sync.wire.replay.LiveText`,
which drops the text a continuation (``agent:run:continued``) says was lost.
"""

from __future__ import annotations

from typing import Any

from ..crumbs import AGENT_ERROR, HUMAN_REQUIRED, NOT_DURABLE, TERMINAL, Frame, error_crumb, from_wire_crumb, loads
from ..errors import PROTOCOL_DECODE_ERROR, BreadError
from .formats import NDJSON, SSE, NDJSONDecoder, SSEDecoder, SSEEvent
from .frames import DeltaLines, decode_frame, frame_from_protocol
from .replay import LIVE, LOG, Dedup, Gap

#: Silence after which a stream is taken for dead: three of the server's 15 s heartbeats.
HEARTBEAT_TIMEOUT_SECONDS = 45.0
#: What to wait before a reconnect when the server has not said (SSE ``retry:``).
RECONNECT_DELAY_SECONDS = 1.0
#: The longest line (and SSE event) a stream may send: past it, a server is not sending crumbs.
MAX_LINE_BYTES = 1_048_576

Item = Frame | Gap


class RunStreamReader:
    """Where a reader of one run stands: its position, what it has shown, and how the run is.

    ``after`` is the position already held (0: from the start). ``heartbeat_timeout`` is the
    silence, in seconds of the clock the caller passes in, after which :meth:`timed_out` says
    the connection is dead (None: never). ``max_line_bytes``: the longest line (or SSE event)
    :meth:`feed` takes; past it, ``PROTOCOL_DECODE_ERROR``, having held no more than that and a chunk.
    """

    def __init__(
        self,
        run_id: str = "",
        after: int = 0,
        heartbeat_timeout: float | None = HEARTBEAT_TIMEOUT_SECONDS,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        self.run_id = run_id
        self.heartbeat_timeout = heartbeat_timeout
        self.max_line_bytes = max_line_bytes
        #: The SSE ``retry:`` the server last sent, in seconds.
        self.reconnect_delay = RECONNECT_DELAY_SECONDS
        #: The terminal crumb (``agent:run:end`` or ``agent:error``) once it has come.
        self.end: Frame | None = None
        #: The pending ``human:required`` crumb while the run is paused at it.
        self.pause: Frame | None = None
        self._dedup = Dedup(after)
        self._finished = False  # the server said the run had nothing more (204)
        self._decoder: SSEDecoder | NDJSONDecoder | None = None
        self._heard_at: float | None = None
        #: the text of each type of delta a reconnect may send again
        self._resent: dict[str, str] | None = None
        self._deltas = DeltaLines(run_id) if run_id else None  # once the run's id is known

    @property
    def position(self) -> int:
        """The last log position delivered: what a reconnect resumes after."""
        return self._dedup.last

    @property
    def last_event_id(self) -> str:
        return str(self._dedup.last)

    @property
    def ended(self) -> bool:
        """The run has ended: no reconnect has anything more to bring."""
        return self.end is not None or self._finished

    @property
    def paused(self) -> bool:
        return self.pause is not None

    @property
    def error(self) -> BreadError | None:
        """The error the run (or the request, when no run was made) ended with."""
        return self.end.crumb["error"] if self.end is not None and self.end.type == AGENT_ERROR else None

    def connect(self, content_type: str, now: float) -> None:
        """A response of the run's stream begins (the first, or a reconnect): its body is read
        with the codec its Content-Type names, from a fresh decoder."""
        media = content_type.partition(";")[0].strip().lower()
        if media == SSE.content_type.partition(";")[0]:
            self._decoder = SSEDecoder(max_bytes=self.max_line_bytes)
        elif media == NDJSON.content_type:
            self._decoder = NDJSONDecoder(self.max_line_bytes)
        else:
            raise BreadError(PROTOCOL_DECODE_ERROR, f"not a run stream: Content-Type {content_type!r}")
        self._heard_at = now
        shown = {kind: self._dedup.segment_text(kind) for kind in NOT_DURABLE}
        self._resent = {kind: text for kind, text in shown.items() if text} or None

    def feed(self, chunk: bytes, now: float) -> list[Item]:
        """The frames (and gaps) of ``chunk`` the caller has not had, in order. Any bytes, a
        heartbeat too, count as a sign of life."""
        if self._decoder is None:
            raise RuntimeError("call connect() with the response's Content-Type before feed()")
        self._heard_at = now
        if isinstance(self._decoder, NDJSONDecoder):
            decoded = [self._from_ndjson(line) for line in self._decoder.lines(chunk)]
        else:
            decoded = [self._from_sse(event) for event in self._decoder.feed(chunk)]
        return [item for item in decoded if item is not None]

    def run_finished(self) -> None:
        """The passive stream answered 204: the run finished with nothing past :attr:`position`.
        A reader that has not seen the terminal crumb has no more to see."""
        self._finished = True

    def timed_out(self, now: float) -> bool:
        """Nothing has come for longer than the heartbeat timeout: reconnect."""
        return (
            self.heartbeat_timeout is not None
            and self._heard_at is not None
            and (now - self._heard_at > self.heartbeat_timeout)
        )

    def read_timeout(self, now: float) -> float | None:
        """Seconds the next read may wait before :meth:`timed_out` turns true."""
        if self.heartbeat_timeout is None or self._heard_at is None:
            return self.heartbeat_timeout
        return max(0.0, self._heard_at + self.heartbeat_timeout - now)

    def _from_ndjson(self, line: bytes) -> Item | None:
        delta = self._deltas.frame(line) if self._deltas is not None else None
        if delta is not None:
            return self._text(delta)
        data = decode_frame(line)
        if data["type"] == "gap":
            return Gap(data["earliestSeq"])
        if data["seq"] == 0 and data["crumb"]["type"] == AGENT_ERROR:
            return self._failure(data["crumb"]["error"])  # no run was made, or the stream broke
        return self._accept(frame_from_protocol(data))

    def _from_sse(self, event: SSEEvent) -> Item | None:
        if event.retry is not None:
            self.reconnect_delay = event.retry / 1000
        kind = event.event
        if not event.data or kind != "message" and kind != "gap":
            return None  # a bare retry: field, or an event kind this reader does not know
        try:
            data = loads(event.data)
            if kind == "gap":
                return Gap(_seq(data["earliestSeq"]))
            if event.id is None:
                return self._sse_error(data) if data.get("type") == "error" else None
            crumb = from_wire_crumb(data["payload"])
            frame = Frame(crumb.get("runId", self.run_id), _seq(event.id), crumb)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BreadError(PROTOCOL_DECODE_ERROR, "a stream event is not a crumb") from exc
        return self._accept(frame)

    def _sse_error(self, data: dict[str, Any]) -> Item | None:
        if self.end is not None:
            return None  # the sidecar of the agent:error just delivered
        return self._failure(BreadError.from_wire(data["payload"]))

    def _failure(self, error: BreadError) -> Frame:
        # Either wire's failure outside the log, as NDJSON's synthetic agent:error at seq 0.
        self.end = Frame(self.run_id, 0, error_crumb(self.run_id, error))
        return self.end

    def _accept(self, frame: Frame) -> Frame | None:
        if not self.run_id:
            self.run_id = frame.run_id
            self._deltas = DeltaLines(frame.run_id)
        if frame.crumb["type"] in NOT_DURABLE:
            return self._text(frame)
        accepted = self._dedup.accept(frame, LIVE)
        if accepted is not None:
            self._resent = None
            kind = accepted.crumb["type"]
            self.pause = accepted if kind == HUMAN_REQUIRED else None
            if kind in TERMINAL:
                self.end = accepted
        return accepted

    def _text(self, frame: Frame) -> Frame | None:
        # Live deltas carry the last durable seq; a delta past it is the log's aggregate of a
        # segment, replayed by a passive stream.
        if frame.seq > self._dedup.last:
            self._resent = None
            return self._dedup.accept(frame, LOG)
        if self._resent and frame.seq == self._dedup.durable:
            unseen = self._skip_resent(frame)
            return None if unseen is None else self._dedup.live_text(unseen)
        return self._dedup.live_text(frame)

    def _skip_resent(self, frame: Frame) -> Frame | None:
        """A delta of the segments in flight at a reconnect: the part of it that repeats the text
        of its type already shown is dropped, once, from the segment's start."""
        pending = self._resent or {}
        kind, delta = frame.crumb["type"], frame.crumb["delta"]
        resent = pending.get(kind, "")
        if resent.startswith(delta) and resent:
            pending[kind] = resent[len(delta) :]
            self._resent = {k: v for k, v in pending.items() if v} or None
            return None
        pending.pop(kind, None)
        self._resent = pending or None
        if delta.startswith(resent):
            return Frame(frame.run_id, frame.seq, {**frame.crumb, "delta": delta[len(resent) :]})
        return frame


def _seq(value: str | int) -> int:
    if value.__class__ is str and value.isascii() and value.isdigit():  # an SSE id, the usual case
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise BreadError(PROTOCOL_DECODE_ERROR, f"{value!r} is not a seq")
