"""A synchronous MCP client over Streamable HTTP, on httpx and ``mcp-types``' models (no asyncio).

What :func:`~bread_sync.protocols.mcp.mcp_tools` calls a remote server's tools with. One session
per client: opened by the ``initialize`` handshake on first use, its ``Mcp-Session-Id`` sent with
every request, opened again when the server has forgotten it (404). An answer is read within
bounds whoever the server is: a JSON body or one SSE event up to ``max_bytes``, each read within
``timeout`` seconds (an SSE heartbeat counts), a listing in at most ``MAX_LIST_PAGES`` pages.
Every failure is a ``TOOL_FAILED`` that names what went wrong, never the request's headers.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator
from contextlib import contextmanager, suppress
from importlib.metadata import version as package_version
from typing import Any

from ...errors import install_hint

try:
    import httpx2 as httpx
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(f"the MCP client needs httpx2: {install_hint('mcp')}") from exc
from mcp_types import (
    METHOD_NOT_FOUND,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelledNotification,
    CancelledNotificationParams,
    ClientCapabilities,
    ErrorData,
    Implementation,
    InitializedNotification,
    InitializeRequest,
    InitializeRequestParams,
    InitializeResult,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ListToolsRequest,
    ListToolsResult,
    PaginatedRequestParams,
    ProgressNotificationParams,
    Tool,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ValidationError

from ...cancel import CancelToken
from ...crumbs import dumps, loads
from ...errors import TOOL_FAILED, BreadError
from ...models.sdk import interrupt
from ...wire.formats import SSEDecoder
from .plugin import SESSION_HEADER, SSE, VERSION_HEADER

#: Seconds to connect, and between two reads of an answer (the server's heartbeats reset it).
DEFAULT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
#: The most a JSON answer, or one SSE event, may hold.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: The most pages of ``tools/list`` read: a server that pages for ever is refused.
MAX_LIST_PAGES = 50
#: Seconds a notification (a cancel) may take: it is sent as the call is given up on.
NOTIFY_TIMEOUT = 5.0
ACCEPT = f"application/json, {SSE}"
PROGRESS = "notifications/progress"
_DUMP = {"by_alias": True, "exclude_none": True, "mode": "json"}


def mcp_failure(message: str) -> BreadError:
    return BreadError(TOOL_FAILED, f"MCP server: {message}")


class McpClient:
    """A session with one MCP server at ``url`` (its Streamable HTTP endpoint). ``headers`` go
    on every request (an ``Authorization``, say); ``transport`` is httpx's (tests)."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = MAX_MESSAGE_BYTES,
        transport: Any = None,
    ):
        self.url, self.max_bytes = url, max_bytes
        self._settings = {
            "headers": headers,
            "timeout": httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            "transport": transport,
            "follow_redirects": False,
        }
        self._client: Any = None
        self._ids = itertools.count(1)
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    @property
    def _http(self) -> Any:
        # Made at first use, not with the config that names the server: a config is loaded
        # where no call is ever made (a CLI command, a test), and a client costs an SSL context.
        if self._client is None:
            self._client = httpx.Client(**self._settings)
        return self._client

    def close(self) -> None:
        """Close its connections (a later request opens new ones)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # the session

    def _session(self) -> dict[str, str]:
        """The headers of a request in the session, opened first if there is none. No lock: a
        toolset made at import, in gunicorn's master, would hold one of the OS that a greenlet
        keeps across its I/O; two calls that open a session at once each open one, both good."""
        if self.protocol_version is None:
            self._initialize()
        headers = {VERSION_HEADER: self.protocol_version or LATEST_HANDSHAKE_VERSION}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        return headers

    def _initialize(self) -> None:
        params = InitializeRequestParams(
            protocol_version=LATEST_HANDSHAKE_VERSION,
            capabilities=ClientCapabilities(),
            client_info=Implementation(name="bread_sync", version=package_version("bread-sync")),
        )
        request_id = next(self._ids)
        with self._post(_request(request_id, InitializeRequest(params=params)), {}) as response:
            session_id = response.headers.get(SESSION_HEADER)
            result = _read_result(InitializeResult, drained(self._answer(response, request_id, None)))
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise mcp_failure(f"it speaks protocol {result.protocol_version!r}, which this client does not")
        self.session_id, self.protocol_version = session_id, result.protocol_version
        self._notify(InitializedNotification())

    def _forget_session(self, session_id: str | None) -> None:
        if self.session_id == session_id:
            self.session_id = self.protocol_version = None

    # requests

    def list_tools(self) -> list[Tool]:
        """The server's tools, every page of them."""
        tools: list[Tool] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            result = _read_result(
                ListToolsResult, drained(self.exchange(ListToolsRequest(params=params), CancelToken()))
            )
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                return tools
        raise mcp_failure(f"its tools/list went on past {MAX_LIST_PAGES} pages")

    def call_tool(
        self, name: str, arguments: dict[str, Any], signal: CancelToken
    ) -> Generator[ProgressNotificationParams, None, CallToolResult]:
        """Call a tool: its progress notifications as they come, then its result. A call given up
        on before its answer (``signal`` cancelled, this generator closed, the stream broken) is
        cancelled at the server with ``notifications/cancelled``."""
        params = CallToolRequestParams(
            name=name, arguments=arguments, _meta={"progressToken": f"bread-{next(self._ids)}"}
        )
        result = yield from self.exchange(CallToolRequest(params=params), signal)
        return _read_result(CallToolResult, result)

    def exchange(self, message: BaseModel, signal: CancelToken) -> Generator[Any, None, dict[str, Any]]:
        """Send a request; yield the progress it streams; return its result. Sent again, once, in
        a new session when the server answers 404 (it forgot the session: it ran nothing)."""
        for attempt in (1, 2):
            headers = self._session()
            request_id = next(self._ids)
            answered = False
            try:
                with self._post(_request(request_id, message), headers, signal) as response:
                    if response.status_code == 404 and SESSION_HEADER in headers and attempt == 1:
                        answered = True  # the server never saw it in a session: nothing to cancel
                        self._forget_session(headers[SESSION_HEADER])
                        continue
                    result = yield from self._answer(response, request_id, signal)
                    answered = True
                    return result
            finally:
                if not answered:
                    self._cancel(request_id, signal)
        raise AssertionError("unreachable")  # pragma: no cover - the second attempt returns or raises

    def _cancel(self, request_id: int, signal: CancelToken) -> None:
        """Tell the server a request it may still be serving is given up on (never raises: the
        call fails, or the run ends, whatever the server says)."""
        reason = signal.reason.message if signal.cancelled else "the client gave up on the call"
        notice = CancelledNotification(params=CancelledNotificationParams(request_id=request_id, reason=reason))
        with suppress(BreadError):
            self._notify(notice)

    def _notify(self, message: BaseModel) -> None:
        self._send({"jsonrpc": "2.0", **message.model_dump(**_DUMP)})

    def _decline(self, request: JSONRPCRequest) -> None:
        """Answer a request the server sent in its stream (a ping, a sampling or elicitation
        request) with method-not-found: this client offers no capabilities, and a server that
        waits for an answer is not left waiting."""
        error = ErrorData(code=METHOD_NOT_FOUND, message=f"{request.method} is not served by this client")
        with suppress(BreadError):
            self._send(JSONRPCError(jsonrpc="2.0", id=request.id, error=error).model_dump(**_DUMP))

    def _send(self, body: dict[str, Any]) -> None:
        """POST a message that has no answer of its own (a notification, a response)."""
        headers = {VERSION_HEADER: self.protocol_version or LATEST_HANDSHAKE_VERSION}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        with self._translated(None):
            self._http.post(self.url, content=dumps(body), headers=_post_headers(headers), timeout=NOTIFY_TIMEOUT)

    @contextmanager
    def _post(self, body: dict[str, Any], headers: dict[str, str], signal: CancelToken | None = None) -> Iterator[Any]:
        """The streamed response to a POST; a cancel of ``signal`` wakes a read blocked on it."""
        with self._translated(signal):
            with self._http.stream("POST", self.url, content=dumps(body), headers=_post_headers(headers)) as response:
                undo = signal.on_cancel(lambda: interrupt(response, response.close)) if signal else None
                try:
                    yield response
                finally:
                    if undo is not None:
                        undo()

    @contextmanager
    def _translated(self, signal: CancelToken | None) -> Iterator[None]:
        """httpx's failures as ``TOOL_FAILED``; after a cancel, the cancel's reason."""
        try:
            yield
        except httpx.HTTPError as exc:
            if signal is not None and signal.cancelled:
                signal.raise_if_cancelled()
            what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "could not be reached"
            raise mcp_failure(f"{what} ({type(exc).__name__})") from None

    def _answer(self, response: Any, request_id: int, signal: CancelToken | None) -> Generator[Any, None, Any]:
        """The result of request ``request_id`` from its response: a JSON body, or an SSE stream
        of messages (its progress yielded as it comes)."""
        if response.status_code >= 400:
            raise mcp_failure(f"it answered HTTP {response.status_code}")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            # Asked for none: a compressed answer could hold far more than max_bytes once inflated.
            raise mcp_failure("it answered compressed, which was not asked for")
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind == SSE:
            return (yield from self._streamed(response, request_id, signal))
        if kind != "application/json":
            raise mcp_failure(f"it answered {kind or 'no content type'}, not JSON nor an event stream")
        return _outcome(_message(self._bounded_body(response, signal)), request_id)

    def _bounded_body(self, response: Any, signal: CancelToken | None) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise mcp_failure(f"its answer is longer than {self.max_bytes} bytes")
        chunks, size = [], 0
        with self._translated(signal):
            for chunk in response.iter_raw():
                size += len(chunk)
                if size > self.max_bytes:
                    raise mcp_failure(f"its answer is longer than {self.max_bytes} bytes")
                chunks.append(chunk)
        return b"".join(chunks)

    def _streamed(self, response: Any, request_id: int, signal: CancelToken | None) -> Generator[Any, None, Any]:
        decoder = SSEDecoder(max_bytes=self.max_bytes)
        with self._translated(signal):
            for chunk in response.iter_raw():
                try:
                    events = decoder.feed(chunk)
                except BreadError:  # the decoder's PROTOCOL_DECODE_ERROR: an event past the bound
                    raise mcp_failure(f"an event of its stream is longer than {self.max_bytes} bytes") from None
                for event in events:
                    message = _message(event.data.encode()) if event.data else None
                    if isinstance(message, JSONRPCNotification) and message.method == PROGRESS:
                        yield _progress(message)
                    elif isinstance(message, JSONRPCRequest):
                        self._decline(message)
                    elif isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == request_id:
                        return _outcome(message, request_id)
        raise mcp_failure("its stream ended before the answer")


def drained(steps: Generator[Any, None, Any]) -> Any:
    """What a generator returns, whatever it yields on the way (progress no one shows)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def _request(request_id: int, message: BaseModel) -> dict[str, Any]:
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, **message.model_dump(**_DUMP)).model_dump(**_DUMP)


def _post_headers(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Accept": ACCEPT, "Accept-Encoding": "identity", "Content-Type": "application/json"}


def _message(data: bytes) -> Any:
    try:
        return jsonrpc_message_adapter.validate_python(loads(data.decode()))
    except (ValueError, ValidationError):
        raise mcp_failure("it answered something that is no JSON-RPC message") from None


def _outcome(message: Any, request_id: int) -> dict[str, Any]:
    """A response's result; its error as ``TOOL_FAILED`` with the server's message."""
    if isinstance(message, JSONRPCError) and message.id in (request_id, None):
        raise BreadError(TOOL_FAILED, f"MCP server: {message.error.message}", {"mcpCode": message.error.code})
    if not isinstance(message, JSONRPCResponse) or message.id != request_id:
        raise mcp_failure("it answered another request")
    return message.result


def _read_result(model: type[Any], result: dict[str, Any]) -> Any:
    try:
        return model.model_validate(result)
    except ValidationError:
        raise mcp_failure(f"its answer is no {model.__name__}") from None


def _progress(message: JSONRPCNotification) -> ProgressNotificationParams:
    try:
        return ProgressNotificationParams.model_validate(message.params or {})
    except ValidationError:
        raise mcp_failure("it sent a progress notification that is none") from None
