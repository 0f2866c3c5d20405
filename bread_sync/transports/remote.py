"""Remote agents: an agent of another bread_sync server, called over its HTTP routes.

``http_chunked.remote_agent(url=..., agent_id=...)`` (or ``http_sse.``) names one; a config's
``remote_agents`` maps local ids to them. The run that calls one is relayed by
``engine/relay.py``; this module only speaks HTTP to the other server: it starts, resumes,
follows and cancels the remote run, and reads its stream across reconnects with the sans-IO
:class:`~bread_sync.wire.reader.RunStreamReader`.

It speaks through the standard library's ``http.client`` (why: docs/performance.md, "Remote
agents") on plain sockets, which the gevent worker makes cooperative, and reads no proxy
settings from the environment: a remote agent is reached directly.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import quote, urlsplit

from ..crumbs import Frame
from ..errors import PROTOCOL_DECODE_ERROR, RUN_INTERRUPTED, RUN_NOT_FOUND, BreadError
from ..wire import Wire
from ..wire.reader import HEARTBEAT_TIMEOUT_SECONDS, MAX_LINE_BYTES, RunStreamReader
from ..wire.replay import Gap

log = logging.getLogger("bread_sync")

#: How long a relay keeps trying to reach a remote that stopped answering before it gives up.
UNREACHABLE_SECONDS = 60.0
CONNECT_SECONDS = 5.0
#: What a non-streaming call (describe, cancel, status) may take.
CALL_SECONDS = 10.0
#: How long a remote agent's description is reused before it is asked for again.
DESCRIBED_SECONDS = 60.0
#: The longest answer read whole (a description, a cancel's or a status's answer, an error).
MAX_BODY_BYTES = 1_048_576


#: What one read of a stream's body may take: a chunk (a crumb), or what is there of it.
READ_BYTES = 65_536
#: What a failed connection raises: the socket's errors, and a reply that is no HTTP.
UNREACHABLE = (OSError, http.client.HTTPException)


class RemoteAgent:
    """One agent of another bread_sync server, reached at ``url`` (its base URL).

    ``agent_id``: its id there. ``headers``: sent with every request (auth). ``wire``: the
    format its streams are asked for (the remote answers in the format of its own transport;
    the reader reads either). ``heartbeat_timeout``: the silence after which a stream is taken
    for dead and re-opened after the last position relayed. ``max_line_bytes``: the longest
    line (or SSE event) of a stream, ``max_body_bytes``: the longest answer read whole; past
    either, ``PROTOCOL_DECODE_ERROR`` (a remote cannot make the caller hold what it likes).
    """

    def __init__(
        self,
        wire: Wire,
        *,
        url: str,
        agent_id: str,
        headers: dict[str, str] | None = None,
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT_SECONDS,
        unreachable_seconds: float = UNREACHABLE_SECONDS,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        self.wire = wire
        self.url = url.rstrip("/")
        self.agent_id = agent_id
        self.headers = {"Accept": wire.content_type, **(headers or {})}
        self.heartbeat_timeout = heartbeat_timeout
        self.unreachable_seconds = unreachable_seconds
        self.max_line_bytes = max_line_bytes
        self.max_body_bytes = max_body_bytes
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a remote agent's url is http:// or https:// and a host, not {url!r}")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError(
                f"a remote agent's url is a base URL with no credentials or query: {url!r} (headers= carries auth)"
            )
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path
        # One per agent: a default context loads the system's certificates, tens of ms each time.
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._described: tuple[float, dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"RemoteAgent({self.agent_id!r} at {self.url})"

    # -- calls ------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The remote's ``GET /agents/<id>`` (its summary, input schema and skills), kept for
        :data:`DESCRIBED_SECONDS`: ``GET /agents`` and a model's every turn (for a subagent's
        parameters) ask for it."""
        now = time.monotonic()
        if self._described is None or now - self._described[0] > DESCRIBED_SECONDS:
            self._described = (now, self._json("GET", f"/agents/{quote(self.agent_id, safe='')}"))
        return self._described[1]

    def input_schema(self) -> dict[str, Any]:
        """The remote agent's input JSON Schema; ``{}`` when it takes any input."""
        return self.describe().get("inputSchema") or {}

    def run_status(self, run_id: str) -> str | None:
        """The remote run's status, or None when the remote has no such run."""
        try:
            return self._json("GET", f"/runs/{quote(run_id, safe='')}")["status"]
        except BreadError as exc:
            if exc.code == RUN_NOT_FOUND:
                return None
            raise

    def cancel(self, run_id: str) -> bool:
        """Ask the remote to cancel its run; False when it had no live or paused run by that id."""
        try:
            self._json("POST", f"/runs/{quote(run_id, safe='')}/cancel")
            return True
        except BreadError as exc:
            if exc.code == RUN_NOT_FOUND:
                return False
            raise

    def start(
        self, run_id: str, input: Any, session_id: str, skill: str | None, trace: dict[str, str] | None = None
    ) -> RemoteStream:
        """Start the remote run (under the caller-chosen ``run_id``, so a retry attaches to it) and
        relay its stream to its end or pause. ``trace``: the caller's trace context headers, which
        make the remote run's span a child of the caller's."""
        body: dict[str, Any] = {"input": input, "session": {"id": session_id}, "runId": run_id}
        if skill:
            body["skill"] = skill
        opening = ("POST", f"/agents/{quote(self.agent_id, safe='')}/run", body)
        return RemoteStream(self, run_id, 0, opening, trace)

    def resume(
        self, run_id: str, checkpoint_id: str, response: Any, after: int, trace: dict[str, str] | None = None
    ) -> RemoteStream:
        opening = ("POST", f"/resume/{quote(checkpoint_id, safe='')}", {"response": response})
        return RemoteStream(self, run_id, after, opening, trace)

    def follow(self, run_id: str, after: int) -> RemoteStream:
        """The remote run's stream past ``after``, to its end or pause."""
        return RemoteStream(self, run_id, after, None)

    def _json(self, method: str, path: str) -> Any:
        try:
            with self.request(method, path, read_timeout=CALL_SECONDS) as response:
                status, body = response.status, self.read_body(response, path)
        except UNREACHABLE as exc:
            raise BreadError(RUN_INTERRUPTED, f"the remote agent's server did not answer: {self.url}") from exc
        if status >= 400:
            raise _error_of(status, body, path)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise BreadError(RUN_INTERRUPTED, f"{path}: the remote server's answer is not JSON") from exc

    def read_body(self, response: http.client.HTTPResponse, what: str) -> bytes:
        """The whole body of ``response``, read no further than :attr:`max_body_bytes` and one
        read past it: a longer one is ``PROTOCOL_DECODE_ERROR``."""
        parts, size = [], 0
        while size <= self.max_body_bytes and (part := response.read1(READ_BYTES)):
            parts.append(part)
            size += len(part)
        if size > self.max_body_bytes:
            raise BreadError(
                PROTOCOL_DECODE_ERROR, f"{what}: the remote's answer is longer than {self.max_body_bytes} bytes"
            )
        return b"".join(parts)

    @contextmanager
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        read_timeout: float | None,
        connected: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[http.client.HTTPResponse]:
        """One request on a connection of its own, closed when left: its response, whose reads
        wait ``read_timeout`` seconds at most (None: for ever). ``body``: sent as JSON.
        ``connected(abort)`` is called once connected, before the request is sent: ``abort()``
        then stops it from another greenlet or thread, a read in flight included."""
        conn: http.client.HTTPConnection
        if self._tls is not None:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=CONNECT_SECONDS, context=self._tls)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=CONNECT_SECONDS)
        try:
            conn.connect()
            if connected is not None:
                connected(partial(_shut_down, conn.sock))  # the response reads it, whatever conn does
            sent = {**self.headers, **(headers or {})}
            data = None if body is None else json.dumps(body).encode()
            if data is not None:
                sent["Content-Type"] = "application/json"
            conn.request(method, self._prefix + path, body=data, headers=sent)
            conn.sock.settimeout(read_timeout)
            with conn.getresponse() as response:
                yield response
        finally:
            conn.close()


class RemoteStream:
    """One remote run's frames to its end or pause, across reconnects: iterate it on one
    greenlet; :meth:`close` from any other stops it at once, a read in flight included (a
    cancel, or a shutdown, need not wait for a remote that stopped answering)."""

    def __init__(
        self,
        agent: RemoteAgent,
        run_id: str,
        after: int,
        opening: tuple[str, str, Any] | None,
        trace: dict[str, str] | None = None,
    ):
        self.agent = agent
        self.trace = trace or {}
        self.run_id = run_id
        self.reader = RunStreamReader(run_id, after, agent.heartbeat_timeout, agent.max_line_bytes)
        self._opening = opening
        self._closed = False
        self._abort: Callable[[], None] | None = None

    def __iter__(self) -> Iterator[Frame]:
        return self._frames()

    def close(self) -> None:
        self._closed = True
        abort = self._abort
        if abort is not None:
            abort()

    def _frames(self) -> Iterator[Frame]:
        """Open the opening request (else the passive stream), feed the reader, and re-open the
        passive stream after the reader's position whenever the body ends or stalls before the
        run has ended or paused. Gives up with ``RUN_INTERRUPTED`` after ``unreachable_seconds``
        without a byte, or when the remote has no such run."""
        agent, reader = self.agent, self.reader
        heard = time.monotonic()
        while not (reader.ended or reader.paused or self._closed):
            request = self._opening or ("GET", f"/runs/{quote(self.run_id, safe='')}/stream", None)
            self._opening = None  # a POST is sent once: its retry is the passive stream
            try:
                for items in self._read(request):
                    heard = time.monotonic()  # any bytes, a heartbeat too: the remote answers
                    for item in items:
                        if item.__class__ is Frame:
                            yield item
            except UNREACHABLE:
                pass  # a drop, a silence past the heartbeat timeout, or close(): re-open, or stop
            if reader.ended or reader.paused or self._closed:
                return
            if time.monotonic() - heard > agent.unreachable_seconds:
                raise BreadError(RUN_INTERRUPTED, f"the remote agent's server stopped answering: {agent.url}")
            log.info(
                "remote run %s: its stream ended or went silent; re-opening it after seq %d",
                self.run_id,
                reader.position,
            )
            time.sleep(min(reader.reconnect_delay, 1.0))

    def _read(self, request: tuple[str, str, Any]) -> Iterator[list[Frame | Gap]]:
        """What the reader makes of each chunk of the response's body (a list per chunk, not
        an item: most chunks bring one frame, and a generator's step costs more than a list)."""
        method, path, body = request
        reader = self.reader
        headers = {"Last-Event-ID": reader.last_event_id} if method == "GET" else self.trace
        timeout = self.agent.heartbeat_timeout
        with self.agent.request(
            method, path, body, headers, read_timeout=timeout, connected=self._connected
        ) as response:
            try:
                if response.status == 204:
                    reader.run_finished()
                    return
                if response.status >= 400:
                    raise _error_of(response.status, self.agent.read_body(response, path), "the remote run")
                reader.connect(response.getheader("content-type", ""), time.monotonic())
                while (chunk := response.read1(READ_BYTES)) and not self._closed:
                    # (closed: what was read past the shutdown is not the stream's any more)
                    yield reader.feed(chunk, time.monotonic())
                    if reader.ended or reader.paused:
                        return
            finally:
                self._abort = None

    def _connected(self, abort: Callable[[], None]) -> None:
        self._abort = abort
        if self._closed:  # closed while connecting: stop before anything is sent
            abort()


def _shut_down(sock: socket.socket) -> None:
    """Wake a read in flight on ``sock`` in another greenlet or thread with an error, at once (a
    close from there would race the reader's own buffer); the reader closes the connection."""
    try:
        # The plain socket's shutdown: a TLS socket's own would drop its TLS state, and a read
        # past it would return the raw ciphertext.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already


def _error_of(status: int, body: bytes, what: str) -> BreadError:
    """The remote's ``{"error": {code, message}}`` as a BreadError (403's bare string too)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return BreadError(error["code"], str(error.get("message", "")))
    if status == 404:
        return BreadError(RUN_NOT_FOUND, f"{what}: not found on the remote server")
    return BreadError(RUN_INTERRUPTED, f"{what}: the remote server answered {status}")
