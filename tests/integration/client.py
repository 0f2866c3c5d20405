"""A small test client: stream a request to a real server and decode what comes back with
bread_sync.wire's sans-IO decoders, for either wire format.

Every read is bounded: httpx's read timeout bounds each chunk, a deadline bounds a whole stream.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from bread_sync.crumbs import to_wire_crumb
from bread_sync.wire import NDJSONDecoder, SSEDecoder, SSEEvent

WIRES = ("sse", "ndjson")
TRANSPORTS = {"sse": "http-sse", "ndjson": "http-chunked"}
MEDIA_TYPES = {"sse": "text/event-stream", "ndjson": "application/x-ndjson"}

TIMEOUT = httpx.Timeout(15.0, connect=5.0)
STREAM_SECONDS = 30.0
#: More reads than any response of these tests needs: a runaway stream fails instead of spinning.
MAX_READS = 100_000
#: No idle keep-alive connections: a server stopping gracefully would wait for them.
LIMITS = httpx.Limits(max_keepalive_connections=0)

RUN_START, RUN_END, AGENT_ERROR = "agent:run:start", "agent:run:end", "agent:error"
TEXT_DELTA, HUMAN_REQUIRED, HUMAN_RESUMED = "text:delta", "human:required", "human:resumed"
TERMINAL = frozenset({RUN_END, AGENT_ERROR})


def new_client() -> httpx.Client:
    """An HTTP client with the suite's timeouts that keeps no idle connection open."""
    return httpx.Client(timeout=TIMEOUT, limits=LIMITS)


def shared_client(connections: int) -> httpx.Client:
    """One client for many threads at once, each request on a connection of its own: making a
    client costs tens of milliseconds of CPU, too much for hundreds of streams."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=0)
    return httpx.Client(timeout=TIMEOUT, limits=limits)


def dumps(value: Any) -> str:
    """Compact JSON, as both wires write it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Event:
    """One decoded message of either wire.

    ``kind`` is ``crumb`` (``data`` is the crumb in its wire form), ``error`` (SSE's ``error``
    event: ``data`` is ``{code, message}``) or ``retry`` (SSE's ``retry:`` field alone).
    ``seq`` is the SSE ``id`` or the NDJSON ``seq``; None when the message had none.
    """

    kind: str
    seq: int | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return self.data["type"] if self.kind == "crumb" else self.kind

    @property
    def durable(self) -> bool:
        return self.kind == "crumb" and self.type != TEXT_DELTA


def _from_sse(message: SSEEvent) -> Event:
    if message.retry is not None and not message.data:
        return Event("retry", None, {"retry": message.retry})
    assert message.event == "message", message
    envelope = json.loads(message.data)
    assert list(envelope) == ["type", "payload"], envelope
    if envelope["type"] == "error" and message.id is None:
        return Event("error", None, envelope["payload"])
    assert envelope["payload"]["type"] == envelope["type"], envelope
    return Event("crumb", None if message.id is None else int(message.id), envelope["payload"])


def _from_ndjson(frame: dict[str, Any]) -> Event:
    assert frame["type"] == "crumb", frame
    crumb = to_wire_crumb(frame["crumb"])  # the decoder rebuilt live errors: back to the wire form
    assert crumb["runId"] == frame["runId"], frame
    return Event("crumb", frame["seq"], crumb)


class Decoder:
    """Bytes in any split -> :class:`Event` s, through the product's own decoders."""

    def __init__(self, wire: str):
        if wire == "sse":
            self._decoder, self._convert = SSEDecoder(), _from_sse
        elif wire == "ndjson":
            self._decoder, self._convert = NDJSONDecoder(), _from_ndjson
        else:
            raise ValueError(f"unknown wire {wire!r}")

    def feed(self, chunk: bytes) -> list[Event]:
        return [self._convert(item) for item in self._decoder.feed(chunk)]


class Stream:
    """One HTTP response read incrementally: its events as they arrive and its raw bytes."""

    def __init__(self, response: httpx.Response, wire: str, seconds: float = STREAM_SECONDS):
        self.wire = wire
        self.status = response.status_code
        self.headers = response.headers
        self.request_headers = response.request.headers
        self.raw = bytearray()
        self.events: list[Event] = []
        self.ended = False
        self._chunks = response.iter_raw()
        self._decoder = Decoder(wire)
        self._pending: deque[Event] = deque()
        self._deadline = time.monotonic() + seconds
        self._reads = 0

    @property
    def run_id(self) -> str | None:
        return self.headers.get("bread-run-id")

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    @property
    def streaming(self) -> bool:
        return self.status == 200 and self.media_type == MEDIA_TYPES[self.wire]

    def _read(self) -> bool:
        if self.ended:
            return False
        self._reads += 1
        if time.monotonic() > self._deadline or self._reads > MAX_READS:
            raise TimeoutError(f"the stream was still open after its deadline or {MAX_READS} reads; got {self.types}")
        chunk = next(self._chunks, None)
        if chunk is None:
            self.ended = True
            return False
        self.raw += chunk
        if self.streaming:
            self._pending.extend(self._decoder.feed(chunk))
        return True

    def next_event(self) -> Event | None:
        """The next event, or None once the server closed the response."""
        while not self._pending:
            if not self._read():
                return None
        event = self._pending.popleft()
        self.events.append(event)
        return event

    def until(self, predicate: Callable[[Event], bool], what: str) -> Event:
        """Read up to and including the first event that matches."""
        while (event := self.next_event()) is not None:
            if predicate(event):
                return event
        raise AssertionError(f"the stream ended before {what}; it carried {self.types}")

    def rest(self) -> Stream:
        """Read to the end of the response."""
        while self._read():
            pass
        while self._pending:
            self.events.append(self._pending.popleft())
        return self

    def json(self) -> Any:
        self.rest()
        return json.loads(bytes(self.raw))

    @property
    def text(self) -> str:
        return bytes(self.raw).decode()

    @property
    def crumbs(self) -> list[Event]:
        return [e for e in self.events if e.kind == "crumb"]

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    @property
    def last_crumb(self) -> Event:
        return self.crumbs[-1]


@contextmanager
def open_stream(
    client: httpx.Client,
    method: str,
    url: str,
    wire: str,
    *,
    body: Any = None,
    content: Any = None,
    headers: dict[str, Any] | None = None,
    seconds: float = STREAM_SECONDS,
) -> Iterator[Stream]:
    """Send a request and hand over its response, read incrementally; closed on exit."""
    headers = dict(headers or {})
    if body is not None:
        content = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    with client.stream(method, url, content=content, headers=headers) as response:
        yield Stream(response, wire, seconds)


def fetch(client: httpx.Client, method: str, url: str, wire: str, **options: Any) -> Stream:
    """Send a request and read its whole response."""
    with open_stream(client, method, url, wire, **options) as stream:
        stream.rest()
    return stream


def run(client: httpx.Client, base: str, agent: str, body: dict[str, Any], wire: str, **options: Any) -> Stream:
    return fetch(client, "POST", f"{base}/agents/{agent}/run", wire, body=body, **options)


def resume(client: httpx.Client, base: str, checkpoint_id: str, response: Any, wire: str, **options: Any) -> Stream:
    return fetch(client, "POST", f"{base}/resume/{checkpoint_id}", wire, body={"response": response}, **options)


def passive_url(base: str, run_id: str, after: int | str | None = None) -> str:
    url = f"{base}/runs/{run_id}/stream"
    return url if after is None else f"{url}?after={after}"


def replay(client: httpx.Client, base: str, run_id: str, wire: str, *, after=None, headers=None) -> Stream:
    """The passive stream of a finished run: its log past ``after``."""
    return fetch(client, "GET", passive_url(base, run_id, after), wire, headers=headers)


def log_of(client: httpx.Client, base: str, run_id: str, wire: str) -> list[Event]:
    """A finished run's whole log, through a passive replay from seq 0."""
    stream = replay(client, base, run_id, wire, after=0)
    assert stream.status == 200, (stream.status, stream.text)
    return stream.crumbs


def durable_seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events if e.durable]


def logged_seqs(events: list[Event]) -> list[int]:
    """Seqs of what a log replay carries: durable crumbs and aggregated text entries alike."""
    return [e.seq for e in events if e.kind == "crumb"]


def text_of(events: list[Event]) -> str:
    return "".join(e.data["delta"] for e in events if e.type == TEXT_DELTA)


class Tail(threading.Thread):
    """A stream read on a thread of its own (with its own connection), so a test can act while
    the stream stays open and then see what it relayed."""

    def __init__(
        self,
        url: str,
        wire: str,
        headers: dict[str, str] | None = None,
        seconds: float = STREAM_SECONDS,
        client: httpx.Client | None = None,
    ):
        super().__init__(name=f"tail {url}", daemon=True)
        self.url, self.wire, self.headers, self.seconds = url, wire, headers, seconds
        #: A client to share (see :func:`shared_client`); by default the tail makes its own.
        self.client = client
        self.status: int | None = None
        self.events: list[Event] = []
        self.ended = False
        self.done = False
        self.error: BaseException | None = None
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            with nullcontext(self.client) if self.client is not None else new_client() as client:
                with open_stream(client, "GET", self.url, self.wire, headers=self.headers, seconds=self.seconds) as s:
                    with self._changed:
                        self.status = s.status
                        self._changed.notify_all()
                    while (event := s.next_event()) is not None:
                        with self._changed:
                            self.events.append(event)
                            self._changed.notify_all()
                    with self._changed:
                        self.ended = True
        except BaseException as exc:  # handed to the test thread by finish()
            self.error = exc
        finally:
            with self._changed:
                self.done = True
                self._changed.notify_all()

    def wait_for(self, predicate: Callable[[Event], bool], seconds: float, what: str) -> Event:
        def match() -> Event | None:
            return next((e for e in self.events if predicate(e)), None)

        with self._changed:
            self._changed.wait_for(lambda: match() is not None or self.done, seconds)
            found = match()
        if found is None:
            self._raise()
            raise AssertionError(f"the tail did not deliver {what} within {seconds:g} s; it carried {self.types}")
        return found

    def finish(self, seconds: float) -> list[Event]:
        """Wait for the server to close the stream; its events."""
        self.join(seconds)
        self._raise()
        assert not self.is_alive(), f"the tail was still open after {seconds:g} s; it carried {self.types}"
        assert self.ended
        return self.events

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]


# -- what the tests check again and again -------------------------------------------------------


def assert_error_body(response: httpx.Response | Stream, status: int, code: str) -> dict[str, Any]:
    """A non-streaming error answer: ``status`` with ``{"error": {"code", "message"}}``, nothing else."""
    if isinstance(response, httpx.Response):
        actual, text = response.status_code, response.text
    else:
        actual, text = response.status, response.rest().text
    assert actual == status, (actual, text[:500])
    body = json.loads(text)
    assert list(body) == ["error"] and sorted(body["error"]) == ["code", "message"], body
    assert body["error"]["code"] == code, body
    return body["error"]


def failure_of(stream: Stream, wire: str) -> dict[str, Any]:
    """A streaming answer that created no run: HTTP 200 carrying one failure and nothing else
    (SSE: an ``error`` event without an id; NDJSON: one synthetic agent:error frame at seq 0).
    Returns ``{code, message}``."""
    assert stream.status == 200 and stream.streaming, (stream.status, stream.headers, stream.text)
    assert len(stream.events) == 1, stream.types
    event = stream.events[0]
    if wire == "sse":
        assert event.kind == "error" and event.seq is None, event
        assert sorted(event.data) == ["code", "message"], event
        assert stream.text == f"data: {dumps({'type': 'error', 'payload': event.data})}\n\n"
        return event.data
    assert event.type == AGENT_ERROR and event.seq == 0, event
    return {k: event.data["error"][k] for k in ("code", "message")}


def run_error_of(stream: Stream, wire: str) -> dict[str, Any]:
    """A run that existed and failed: its last crumb is a logged agent:error; SSE then adds an
    ``error`` event ``{code, message}`` without an id. Returns the crumb's error."""
    crumbs = stream.crumbs
    assert crumbs and crumbs[-1].type == AGENT_ERROR and crumbs[-1].seq and crumbs[-1].seq > 0, stream.types
    error = crumbs[-1].data["error"]
    if wire == "sse":
        assert stream.events[-1].kind == "error" and stream.events[-1].seq is None, stream.types
        assert stream.events[-1].data == {"code": error["code"], "message": error["message"]}
    else:
        assert stream.events[-1] == crumbs[-1]
    return error


WRITER_FIRST_LEG = [
    RUN_START, TEXT_DELTA, TEXT_DELTA, TEXT_DELTA, TEXT_DELTA, TEXT_DELTA,
    "tool:input:start", "tool:input:delta", "tool:input:end", "tool:call", HUMAN_REQUIRED,
]  # fmt: skip


def pause_writer(client: httpx.Client, base: str, wire: str, topic: str = "bread") -> tuple[str, str, Stream]:
    """Run the demo ``writer`` to its approval pause; (run id, checkpoint id, the response)."""
    stream = run(client, base, "writer", {"input": {"topic": topic}}, wire)
    assert stream.status == 200, stream.text
    assert stream.types == WRITER_FIRST_LEG, stream.types
    assert durable_seqs(stream.events) == [1, 3, 4, 5, 6, 7]
    paused = stream.last_crumb.data
    assert (paused["kind"], paused["toolName"], paused["input"]) == ("approval", "publish", {"title": topic})
    assert paused["runId"] == stream.run_id
    return stream.run_id, paused["checkpointId"], stream


def assert_continuation(stream: Stream, run_id: str, output: str = "Published.") -> None:
    """A resume's response: human:resumed ... agent:run:end, seqs continuing the log after 7."""
    assert stream.status == 200, stream.text
    assert stream.run_id == run_id
    assert stream.types[0] == HUMAN_RESUMED and stream.types[-1] == RUN_END, stream.types
    assert stream.types == [HUMAN_RESUMED, "tool:result", TEXT_DELTA, RUN_END], stream.types
    assert [e.seq for e in stream.events] == [8, 9, 9, 11]
    assert stream.last_crumb.data["output"] == output


def assert_log(log: list[Event], run_id: str) -> None:
    """A finished run's log: seqs 1..n with no gap, one start, one terminal crumb, at the end."""
    assert logged_seqs(log) == list(range(1, len(log) + 1)), logged_seqs(log)
    types = [e.type for e in log]
    assert types.count(RUN_START) == 1 and types[0] == RUN_START, types
    assert sum(t in TERMINAL for t in types) == 1 and types[-1] in TERMINAL, types
    assert {e.data["runId"] for e in log} == {run_id}
