"""The HTTP transport: a bread_sync server's routes, over ``httpx2``.

A run's stream is read with :class:`~bread_sync.wire.reader.RunStreamReader` (either wire, by
the response's Content-Type). When the connection drops, or stays silent past the heartbeat
timeout, before the run has ended, the stream reopens itself as ``GET /runs/<id>/stream`` with
``Last-Event-ID``: the caller sees every durable crumb once and in order, and the text once.
Every send carries a run id (the caller's, or one made here), so a send retried after a failed
connection follows the run the first attempt started instead of starting a second.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import quote, unquote

from ..errors import install_hint

try:
    import httpx2 as httpx
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(f"the HTTP client needs httpx2: {install_hint('client')}") from exc

from ..crumbs import AGENT_ERROR, HUMAN_RESUMED, Frame
from ..errors import FILE_NOT_FOUND, FORBIDDEN, INTERNAL, SERVER_UNREACHABLE, BreadError
from ..wire.reader import HEARTBEAT_TIMEOUT_SECONDS, MAX_LINE_BYTES, RunStreamReader
from .contract import StoredFile, ThreadState, Unsupported, last_turn

#: Seconds a plain request (and a stream's connect) may take.
TIMEOUT_SECONDS = 10.0
#: Attempts in a row, each after the server's retry delay, before a stream or a send gives up.
RECONNECT_ATTEMPTS = 8
RUN_ID_HEADER = "bread-run-id"


class HTTPClientTransport(Unsupported):
    """``url`` is the server's base URL (with its prefix, if it has one). ``api_key`` is sent as
    ``Authorization: Bearer``; ``headers`` go on every request. ``heartbeat_timeout``: the
    silence after which a stream is taken for dead and reopened (None: never).
    ``max_line_bytes``: the longest line (or SSE event) a stream may send; past it the stream
    raises ``PROTOCOL_DECODE_ERROR``."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        heartbeat_timeout: float | None = HEARTBEAT_TIMEOUT_SECONDS,
        timeout: float = TIMEOUT_SECONDS,
        reconnect_attempts: int = RECONNECT_ATTEMPTS,
        client: httpx.Client | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ):
        self.url = url.rstrip("/")
        self.heartbeat_timeout = heartbeat_timeout
        self.max_line_bytes = max_line_bytes
        self.reconnect_attempts = reconnect_attempts
        self.headers = {**({"Authorization": f"Bearer {api_key}"} if api_key else {}), **(headers or {})}
        self._own_client = client is None
        self.http = client or httpx.Client(timeout=timeout)
        self._stream_timeout = httpx.Timeout(timeout, read=heartbeat_timeout)

    # -- plain requests ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        allow: tuple[int, ...] = (),
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> httpx.Response:
        """One request; an answer of 400 or more (but those in ``allow``) raises its BreadError."""
        try:
            headers = {**self.headers, **(headers or {})}
            response = self.http.request(method, self.url + path, headers=headers, **options)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        if response.status_code >= 400 and response.status_code not in allow:
            raise error_of(response)
        return response

    def get_manifest(self) -> dict[str, Any]:
        return {"agents": self.request("GET", "/agents").json()}

    def list_threads(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        query = [("tag", f"{k}:{v}") for k, v in (tags or {}).items()]
        return self.request("GET", "/sessions", params=query).json()

    def delete_thread(self, thread_id: str) -> None:
        self.request("DELETE", f"/sessions/{_segment(thread_id)}")

    def get_thread_state(self, thread_id: str) -> ThreadState | None:
        found = self.request("GET", f"/sessions/{_segment(thread_id)}", allow=(404,))
        session = found.json() if found.status_code == 200 else None
        runs = self.request("GET", "/runs", params={"session": thread_id}).json()
        if session is None and not runs:
            return None
        return ThreadState(thread_id, session, sorted(runs, key=lambda r: r["createdAt"]))

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        found = self.request("GET", f"/runs/{_segment(run_id)}", allow=(404,))
        return found.json() if found.status_code == 200 else None

    def stop_run(self, run_id: str) -> bool:
        return self.request("POST", f"/runs/{_segment(run_id)}/cancel", allow=(404,)).status_code == 200

    def send_background(
        self,
        thread_id: str,
        agent_id: str,
        input: Any,
        *,
        run_id: str | None = None,
        skill: str | None = None,
        webhook: dict[str, Any] | None = None,
    ) -> str:
        """Start a run answered at once (``Prefer: respond-async``); its id."""
        body = {"input": input, "session": {"id": thread_id}, "runId": run_id or f"run_{uuid.uuid4().hex}"}
        body.update({k: v for k, v in (("skill", skill), ("webhook", webhook)) if v is not None})
        path = f"/agents/{_segment(agent_id)}/run"
        return self.request("POST", path, json=body, headers={"Prefer": "respond-async"}).json()["runId"]

    def wait_run(self, run_id: str, timeout: float) -> dict[str, Any]:
        """``GET /runs/<runId>/wait``: the run's report once it ended or paused, or as it stands
        after ``timeout`` seconds (at most the server's 60)."""
        wait = httpx.Timeout(self.http.timeout.connect, read=timeout + self.http.timeout.read)
        path = f"/runs/{_segment(run_id)}/wait"
        return self.request("GET", path, params={"timeout": timeout}, allow=(202,), timeout=wait).json()

    def stop_thread(self, thread_id: str) -> bool:
        state = self.get_thread_state(thread_id)
        active = state.active_run if state else None
        return active is not None and self.stop_run(active["id"])

    def mint_stream_token(self, run_id: str) -> str:
        """A short-lived token that opens this run's passive stream alone (``?token=``), for a
        holder without the credentials: see docs/security.md."""
        return self.request("POST", "/auth/stream-token", json={"runId": run_id}).json()["token"]

    def create_file_url(self, file_id: str) -> str | None:
        path = _file_path(file_id)
        return self.url + path if self.request("HEAD", path, allow=(404,)).status_code == 200 else None

    def upload_file(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]:
        params = {"name": name} if name else None
        return self.request("POST", "/files", content=data, headers={"Content-Type": mime_type}, params=params).json()

    def read_file(self, file_id: str) -> StoredFile:
        response = self.request("GET", _file_path(file_id), allow=(404,))
        if response.status_code == 404:
            raise BreadError(FILE_NOT_FOUND, f"no file {file_id}")
        name = response.headers.get("content-disposition", "").partition("filename*=UTF-8''")[2] or None
        mime = response.headers.get("content-type", "application/octet-stream").partition(";")[0]
        return StoredFile(response.content, mime, name and unquote(name))

    def close(self) -> None:
        if self._own_client:
            self.http.close()

    # -- streams ---------------------------------------------------------------------------------

    def send(
        self, thread_id: str, agent_id: str, input: Any, *, run_id: str | None = None, skill: str | None = None
    ) -> HTTPRunStream:
        run_id = run_id or f"run_{uuid.uuid4().hex}"
        body = {"input": input, "session": {"id": thread_id}, "runId": run_id}
        if skill is not None:
            body["skill"] = skill
        stream = HTTPRunStream(self, run_id, stop_at_pause=True)
        return stream.start(lambda: self._open("POST", f"/agents/{_segment(agent_id)}/run", json=body))

    def regenerate(self, thread_id: str, *, run_id: str | None = None) -> HTTPRunStream:
        agent_id, input = last_turn(self, thread_id)
        return self.send(thread_id, agent_id, input, run_id=run_id)

    def respond_to_action(self, checkpoint_id: str, response: Any) -> HTTPRunStream:
        stream = HTTPRunStream(self, "", stop_at_pause=True, continuing=checkpoint_id)
        path = f"/resume/{_segment(checkpoint_id)}"
        return stream.start(lambda: self._open("POST", path, json={"response": response}))

    def stream_run(self, run_id: str, after: int = 0, token: str | None = None) -> HTTPRunStream:
        """Follow a run from ``after`` through its pauses to its end (``token``: a stream token
        instead of this transport's credentials)."""
        return HTTPRunStream(self, run_id, after=after, token=token).start()

    def _open(
        self, method: str, path: str, *, token: str | None = None, headers: dict[str, str] | None = None, **options: Any
    ) -> _Opened:
        headers = {**self.headers, **(headers or {})}
        if token is not None:
            headers.pop("Authorization", None)
            options["params"] = {"token": token}
        request = self.http.build_request(
            method, self.url + path, headers=headers, timeout=self._stream_timeout, **options
        )
        return _Opened(self.http, request)

    def passive(self, run_id: str, position: int, token: str | None) -> _Opened:
        """``GET /runs/<id>/stream`` past ``position``."""
        path = f"/runs/{_segment(run_id)}/stream"
        return self._open("GET", path, token=token, headers={"Last-Event-ID": str(position)})


class _Opened(AbstractContextManager):
    """A streaming request, sent when entered; its response, closed when left."""

    def __init__(self, http: httpx.Client, request: httpx.Request):
        self.http, self.request = http, request
        self.response: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        self.response = self.http.send(self.request, stream=True)
        return self.response

    def __exit__(self, *exc: Any) -> None:
        if self.response is not None:
            self.response.close()


class HTTPRunStream:
    """One run's stream over HTTP, reopened after a drop or a silence; see the module's doc."""

    def __init__(
        self,
        transport: HTTPClientTransport,
        run_id: str,
        *,
        after: int = 0,
        stop_at_pause: bool = False,
        continuing: str | None = None,
        token: str | None = None,
    ):
        self.transport = transport
        self.run_id = run_id
        self.reader = RunStreamReader(run_id, after, transport.heartbeat_timeout, transport.max_line_bytes)
        self._stop_at_pause = stop_at_pause
        #: A resume's stream holds the continuation only: what a reconnect replays before the
        #: ``human:resumed`` of this checkpoint is the run's past.
        self._continuing = continuing
        self._token = token
        self._opened: _Opened | None = None
        self._response: httpx.Response | None = None
        self._first: list[Any] = []
        self._closed = threading.Event()
        self._source = self._items()
        self._frames = self._read()

    def start(self, first: Any = None) -> HTTPRunStream:
        """Open the first response (``first()``, else the passive stream): a request refused
        raises here. A run route's refusal to start (it comes in the body) raises too. A send
        whose connection fails is sent again, with the same run id."""
        for attempt in range(1, self.transport.reconnect_attempts + 1):
            try:
                self._connect(first or self._passive)
                break
            except BreadError as error:
                if error.code != SERVER_UNREACHABLE or attempt == self.transport.reconnect_attempts:
                    raise
                self._closed.wait(self.reader.reconnect_delay)
        if first is not None:
            self._first = self._until_first_frame()
        return self

    def __iter__(self) -> Iterator[Any]:
        return self._frames

    def close(self) -> None:
        self._closed.set()
        self._frames.close()
        self._disconnect()

    @property
    def done(self) -> bool:
        return self.reader.ended or self._stop_at_pause and self.reader.paused and self._continuing is None

    def _passive(self) -> _Opened:
        return self.transport.passive(self.run_id, self.reader.position, self._token)

    def _connect(self, opener: Any) -> bool:
        """Open a response and make it the current one; False when the run has nothing more."""
        opened = opener()
        try:
            response = opened.__enter__()
        except httpx.TransportError as exc:
            raise unreachable(self.transport.url, exc) from exc
        if response.status_code == 204:
            opened.__exit__(None, None, None)
            self.reader.run_finished()
            return False
        if response.status_code >= 400:
            response.read()
            opened.__exit__(None, None, None)
            raise error_of(response)
        self.run_id = self.run_id or response.headers.get(RUN_ID_HEADER, "")
        self.reader.run_id = self.reader.run_id or self.run_id
        self.reader.connect(response.headers.get("content-type", ""), time.monotonic())
        self._opened, self._response = opened, response
        self._chunks = response.iter_raw()
        return True

    def _disconnect(self) -> None:
        opened, self._opened, self._response = self._opened, None, None
        if opened is not None:
            opened.__exit__(None, None, None)

    def _until_first_frame(self) -> list[Any]:
        first: list[Any] = []
        for item in self._source:
            first.append(item)
            if item.__class__ is Frame:
                break
        if first and first[-1].__class__ is Frame and first[-1].seq == 0 and first[-1].type == AGENT_ERROR:
            self.close()
            raise first[-1].crumb["error"]  # nothing was started: the request's own failure
        return first

    def _read(self) -> Iterator[Any]:
        try:
            yield from self._first
            self._first = []
            # Even when the run has ended: the chunk its first frame came in may hold the rest
            # of it (a server writes what it has at once), and the source yields those first.
            yield from self._source
        finally:
            self._source.close()
            self._disconnect()

    def _items(self) -> Iterator[Any]:
        """Frames across as many connections as it takes, until the run ends (or pauses)."""
        failures = 0
        while not self._closed.is_set() and not self.done:
            if self._response is None:
                failures += 1
                if failures > self.transport.reconnect_attempts:
                    raise BreadError(SERVER_UNREACHABLE, f"lost run {self.run_id}'s stream and could not reopen it")
                self._closed.wait(self.reader.reconnect_delay if failures > 1 else 0)
                try:
                    if not self._connect(self._passive):
                        return
                except BreadError as error:
                    if error.code != SERVER_UNREACHABLE:
                        raise
                    continue
            try:
                for chunk in self._chunks:
                    for item in self.reader.feed(chunk, time.monotonic()):
                        failures = 0
                        if self._continuing is not None and not self._continued(item):
                            continue
                        yield item
                    if self.done:
                        return
            except httpx.TransportError:
                pass  # dropped, or silent past the heartbeat timeout: reopen
            self._disconnect()
            if self.done:
                return

    def _continued(self, item: Any) -> bool:
        """For a resume's stream: True from the ``human:resumed`` of its checkpoint on."""
        if (
            item.__class__ is Frame
            and item.type == HUMAN_RESUMED
            and item.crumb.get("checkpointId") == self._continuing
        ):
            self._continuing = None
            return True
        if item.__class__ is Frame and item.seq == 0:
            return True  # the request's own failure
        return False


def error_of(response: httpx.Response) -> BreadError:
    """The BreadError of a refused request: its ``{"error": {code, message}}``, or the auth
    gate's ``{"error": "Forbidden"}``."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return BreadError(INTERNAL, f"HTTP {response.status_code} from the server")
    if error == "Forbidden":
        return BreadError(FORBIDDEN, "forbidden")
    if isinstance(error, dict):
        return BreadError.from_wire(error)
    return BreadError(INTERNAL, f"HTTP {response.status_code} from the server")


def unreachable(url: str, exc: Exception) -> BreadError:
    return BreadError(SERVER_UNREACHABLE, f"could not reach {url}: {exc.__class__.__name__}")


def _segment(value: str) -> str:
    return quote(value, safe="")


def _file_path(file_id: str) -> str:
    return file_id if file_id.startswith("/files/") else f"/files/{_segment(file_id)}"


def transport(url: str, **options: Any) -> HTTPClientTransport:
    """The HTTP transport to the server at ``url`` (options: see :class:`HTTPClientTransport`)."""
    return HTTPClientTransport(url, **options)


#: The name before issue 25 told the client's transport apart from the server's; kept for one release.
HTTPTransport = HTTPClientTransport
