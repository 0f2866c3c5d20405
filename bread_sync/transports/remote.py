"""Remote agents: an agent of another bread_sync server, called over its HTTP routes.

``http_chunked.remote_agent(url=..., agent_id=...)`` (or ``http_sse.``) names one; a config's
``remote_agents`` maps local ids to them. The run that calls one is relayed by
``engine/remote.py``; this module only speaks HTTP to the other server: it starts, resumes,
follows and cancels the remote run, and reads its stream across reconnects with the sans-IO
:class:`~bread_sync.stream_reader.RunStreamReader`.

The HTTP client is httpx (``pip install "bread-sync[remote]"``): its synchronous client uses
plain sockets, so under the gevent worker, which patches them, a relay waiting for the remote
gives way to the worker's other requests.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from ..crumbs import Frame
from ..errors import RUN_INTERRUPTED, RUN_NOT_FOUND, BreadError
from ..stream_reader import HEARTBEAT_TIMEOUT_SECONDS, RunStreamReader
from ..tails import Gap
from ..wire import Wire

log = logging.getLogger("bread_sync")

#: How long a relay keeps trying to reach a remote that stopped answering before it gives up.
UNREACHABLE_SECONDS = 60.0
CONNECT_SECONDS = 5.0
#: What a non-streaming call (describe, cancel, status) may take.
CALL_SECONDS = 10.0
#: How long a remote agent's description is reused before it is asked for again.
DESCRIBED_SECONDS = 60.0


def _httpx() -> Any:
    try:
        import httpx2 as httpx
    except ImportError as exc:  # pragma: no cover - the extra names the fix
        raise ImportError('remote agents need httpx: pip install "bread-sync[remote]"') from exc
    return httpx


class RemoteAgent:
    """One agent of another bread_sync server, reached at ``url`` (its base URL).

    ``agent_id``: its id there. ``headers``: sent with every request (auth). ``wire``: the
    format its streams are asked for (the remote answers in the format of its own transport;
    the reader reads either). ``heartbeat_timeout``: the silence after which a stream is taken
    for dead and re-opened after the last position relayed.
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
    ):
        self.wire = wire
        self.url = url.rstrip("/")
        self.agent_id = agent_id
        self.headers = {"Accept": wire.content_type, **(headers or {})}
        self.heartbeat_timeout = heartbeat_timeout
        self.unreachable_seconds = unreachable_seconds
        self._client: Any = None
        self._pid = 0
        self._lock = threading.Lock()
        self._described: tuple[float, dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"RemoteAgent({self.agent_id!r} at {self.url})"

    @property
    def client(self) -> Any:
        """The connection pool, made in the process that uses it (never shared across a fork)."""
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                httpx = _httpx()
                timeout = httpx.Timeout(CALL_SECONDS, connect=CONNECT_SECONDS)
                self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)
                self._pid = os.getpid()
            return self._client

    def close(self) -> None:
        """Close this process's connections to the remote."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

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

    def start(self, run_id: str, input: Any, session_id: str, skill: str | None) -> RemoteStream:
        """Start the remote run (under the caller-chosen ``run_id``, so a retry attaches to it) and
        relay its stream to its end or pause."""
        body: dict[str, Any] = {"input": input, "session": {"id": session_id}, "runId": run_id}
        if skill:
            body["skill"] = skill
        opening = ("POST", f"/agents/{quote(self.agent_id, safe='')}/run", body)
        return RemoteStream(self, run_id, 0, opening)

    def resume(self, run_id: str, checkpoint_id: str, response: Any, after: int) -> RemoteStream:
        opening = ("POST", f"/resume/{quote(checkpoint_id, safe='')}", {"response": response})
        return RemoteStream(self, run_id, after, opening)

    def follow(self, run_id: str, after: int) -> RemoteStream:
        """The remote run's stream past ``after``, to its end or pause."""
        return RemoteStream(self, run_id, after, None)

    def _json(self, method: str, path: str) -> Any:
        httpx = _httpx()
        try:
            response = self.client.request(method, path)
        except httpx.TransportError as exc:
            raise BreadError(RUN_INTERRUPTED, f"the remote agent's server did not answer: {self.url}") from exc
        if response.status_code >= 400:
            raise _error_of(response, path)
        return response.json()


class RemoteStream:
    """One remote run's frames to its end or pause, across reconnects: iterate it on one
    greenlet; :meth:`close` from any other stops it at once, a read in flight included (a
    cancel, or a shutdown, need not wait for a remote that stopped answering)."""

    def __init__(self, agent: RemoteAgent, run_id: str, after: int, opening: tuple[str, str, Any] | None):
        self.agent = agent
        self.run_id = run_id
        self.reader = RunStreamReader(run_id, after, heartbeat_timeout=agent.heartbeat_timeout)
        self._opening = opening
        self._closed = False
        self._response: Any = None

    def __iter__(self) -> Iterator[Frame]:
        return self._frames()

    def close(self) -> None:
        self._closed = True
        response = self._response
        if response is not None:
            response.close()

    def _frames(self) -> Iterator[Frame]:
        """Open the opening request (else the passive stream), feed the reader, and re-open the
        passive stream after the reader's position whenever the body ends or stalls before the
        run has ended or paused. Gives up with ``RUN_INTERRUPTED`` after ``unreachable_seconds``
        without a byte, or when the remote has no such run."""
        httpx, agent, reader = _httpx(), self.agent, self.reader
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
            except (httpx.TransportError, httpx.StreamError, OSError):
                pass  # a drop, a silence past the heartbeat timeout, or close(): re-open, or stop
            if reader.ended or reader.paused or self._closed:
                return
            if time.monotonic() - heard > agent.unreachable_seconds:
                raise BreadError(RUN_INTERRUPTED, f"the remote agent's server stopped answering: {agent.url}")
            log.info("remote run %s: its stream ended or went silent; re-opening it after seq %d",
                     self.run_id, reader.position)  # fmt: skip
            time.sleep(min(reader.reconnect_delay, 1.0))

    def _read(self, request: tuple[str, str, Any]) -> Iterator[list[Frame | Gap]]:
        """What the reader makes of each chunk of the response's body (a list per chunk, not
        an item: most chunks bring one frame, and a generator's step costs more than a list)."""
        method, path, body = request
        reader = self.reader
        headers = {"Last-Event-ID": reader.last_event_id} if method == "GET" else {}
        timeout = _httpx().Timeout(CALL_SECONDS, connect=CONNECT_SECONDS, read=self.agent.heartbeat_timeout)
        with self.agent.client.stream(method, path, json=body, headers=headers, timeout=timeout) as response:
            self._response = response
            try:
                if response.status_code == 204:
                    reader.run_finished()
                    return
                if response.status_code >= 400:
                    response.read()
                    raise _error_of(response, "the remote run")
                reader.connect(response.headers.get("content-type", ""), time.monotonic())
                for chunk in response.iter_raw():
                    yield reader.feed(chunk, time.monotonic())
                    if reader.ended or reader.paused:
                        return
            finally:
                self._response = None


def _error_of(response: Any, what: str) -> BreadError:
    """The remote's ``{"error": {code, message}}`` as a BreadError (403's bare string too)."""
    try:
        error = response.json().get("error")
    except ValueError:
        error = None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return BreadError(error["code"], str(error.get("message", "")))
    if response.status_code == 404:
        return BreadError(RUN_NOT_FOUND, f"{what}: not found on the remote server")
    return BreadError(RUN_INTERRUPTED, f"{what}: the remote server answered {response.status_code}")
