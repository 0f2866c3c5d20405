"""The plugin: :func:`mcp_server`, agents and tasks as MCP tools over Streamable HTTP."""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing
from importlib.metadata import version as package_version
from typing import Any, Protocol

from flask import Response, g, request
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CallToolRequest,
    CallToolResult,
    CancelledNotification,
    EmptyResult,
    ErrorData,
    Implementation,
    InitializeRequest,
    InitializeResult,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ListToolsResult,
    Result,
    ServerCapabilities,
    ToolsCapability,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from ...clock import iso_from_epoch, now_iso
from ...crumbs import Frame, dumps
from ...errors import CHECKPOINT_NOT_FOUND, INPUT_INVALID, INTERNAL, BreadError, internal_error
from ...server import register_http_route, start_run_stream, stream_body, stream_response
from ...server.guard import NotJson, caller_key, json_value, may_reach_run, may_read_file, reachable_checkpoint
from ...stores import missing_methods
from ...wire import SSE_BEHIND_FOR_GOOD
from .tools import McpTool, completed, ended, failed, progress, tool_table

log = logging.getLogger("bread_sync.protocols.mcp")

DEFAULT_PATH = "/mcp"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
SSE = "text/event-stream"
#: An SSE comment: MCP clients skip it, proxies see the stream is alive.
HEARTBEAT = b": ping\n\n"
#: Newer clients probe for the 2026-07-28 era first; a handshake-era server refuses at once.
DISCOVER = "server/discover"
CANCELLED = "notifications/cancelled"
_JSON = "application/json"
#: How many sessions one identity may hold: its oldest is ended past it.
DEFAULT_MAX_SESSIONS = 100
#: How long a session may go unused before it ends.
DEFAULT_SESSION_IDLE_SECONDS = 3600.0
#: How stale a session's ``usedAt`` may grow before a request writes it again: one write a
#: minute per busy session, not one per request (a quarter of the idle time, if that is less).
USED_AT_GRAIN_SECONDS = 60.0


class MCP_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    #: Every request to the endpoint: POST (JSON-RPC), DELETE (end the session).
    request = "mcp.request"


def mcp_server(
    path: str = DEFAULT_PATH,
    agents: Iterable[Any] | None = None,
    tasks: Iterable[Any] | None = None,
    name: str = "bread_sync",
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS,
) -> McpPlugin:
    """The MCP plugin, for ``Config.plugins``: the instance's agents and tasks as MCP tools,
    served over Streamable HTTP at ``path`` (action ``mcp.request``).

    ``agents``, ``tasks``: the ids (or the objects) to expose, ``[]`` none; None exposes every
    task and the instance's own agents of those it serves (``Bread.served_agents``). Tools:
    ``agent_<agentId>``, ``task_<taskId>`` and ``resume``. ``name``: the ``serverInfo`` name
    ``initialize`` answers with. A session belongs to the identity that opened it (with auth
    off, every caller is one identity): another is told 404, as for an unknown session. An
    identity holds at most ``max_sessions``, its oldest ended past them; a session unused for
    ``session_idle_seconds`` ends. See docs/http.md and docs/security.md."""
    if max_sessions < 1 or session_idle_seconds <= 0:
        raise ValueError("max_sessions must be at least 1 and session_idle_seconds above 0")
    return McpPlugin(path, _ids(agents), _ids(tasks), name, Sessions(max_sessions, session_idle_seconds))


def _own_served(bread: Any) -> list[Any]:
    # A remote agent has no tool of its own here: its schema and pauses are another server's.
    return [served.agent for served in bread.served_agents() if not served.remote]


def _ids(given: Iterable[Any] | None) -> list[str] | None:
    return None if given is None else [getattr(each, "id", each) for each in given]


class _Refused(Exception):
    """A request answered with a JSON-RPC error at an HTTP error status (no id to answer)."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class McpPlugin:
    """See :func:`mcp_server`."""

    name = "mcp"

    def __init__(
        self, path: str, agents: list[str] | None, tasks: list[str] | None, server_name: str, sessions: Sessions
    ):
        self.path = path
        self.sessions = sessions
        self.agent_ids = agents
        self.task_ids = tasks
        self.server_info = Implementation(name=server_name, version=package_version("bread-sync"))
        self.tools: dict[str, McpTool] = {}
        #: A resume call's name (:func:`call_run_id`) -> the run it continues, while it is served.
        self._continued: dict[str, str] = {}
        self._methods: dict[str, Callable[[Any, str, JSONRPCRequest], Response]] = {
            "ping": lambda bread, session_id, message: _result(message.id, EmptyResult()),
            "tools/list": lambda bread, session_id, message: _result(
                message.id, ListToolsResult(tools=self._listings())
            ),
            "tools/call": self._call,
        }

    def routes(self, blueprint: Any, bread: Any) -> None:
        missing = missing_methods(bread.store, McpSessionStore)
        if missing:
            raise TypeError(f"the MCP plugin keeps its sessions in the store, and this store has no {missing}")
        agents = [bread.agent(i) for i in self.agent_ids] if self.agent_ids is not None else _own_served(bread)
        tasks = [bread.task(i) for i in (self.task_ids if self.task_ids is not None else bread.tasks)]
        self.tools = tool_table(agents, tasks, bread.agents)
        register_http_route(
            blueprint,
            "POST",
            self.path,
            MCP_ACTIONS.request,
            lambda: self._post(bread),
            statuses=(202, 404),
            args=authorize_args,
        )
        register_http_route(
            blueprint,
            "DELETE",
            self.path,
            MCP_ACTIONS.request,
            lambda: self._delete(bread),
            statuses=(204, 404),
            args=authorize_args,
        )

    def _listings(self) -> list[Any]:
        return [tool.listing for tool in self.tools.values()]

    # the endpoint

    def _post(self, bread: Any) -> Response:
        message = None
        try:
            message = _message()
            if isinstance(message, JSONRPCRequest) and message.method == DISCOVER:
                return _error(message.id, METHOD_NOT_FOUND, f"{DISCOVER} is not served: initialize instead")
            if isinstance(message, JSONRPCRequest) and message.method == "initialize":
                return self._initialize(bread, message)
            _check_version()
            session_id = self.sessions.of_caller(bread.store)
        except _Refused as refused:
            # The request's own id once its body was read (MCP basic: an error response has the
            # id of its request); null for a body that is no request.
            return _refusal(refused, message.id if isinstance(message, JSONRPCRequest) else None)
        if not isinstance(message, JSONRPCRequest):  # a notification, or a response to nothing we asked
            if isinstance(message, JSONRPCNotification) and message.method == CANCELLED:
                self._cancelled(bread, session_id, message)
            return Response(status=202)
        method = self._methods.get(message.method)
        if method is None:
            return _error(message.id, METHOD_NOT_FOUND, f"method {message.method!r} is not served")
        return method(bread, session_id, message)

    def _delete(self, bread: Any) -> Response:
        try:
            session_id = self.sessions.of_caller(bread.store)
        except _Refused as refused:
            return _refusal(refused)
        bread.store.delete_mcp_session(session_id)
        return Response(status=204)

    def _initialize(self, bread: Any, message: JSONRPCRequest) -> Response:
        """A new session, at the version the client asked for if it is a handshake version, else
        the newest of them. The session is in the store: any worker or replica knows it."""
        try:
            asked = InitializeRequest.model_validate(message.model_dump(exclude_none=True)).params.protocol_version
        except ValidationError as exc:
            return _error(message.id, INVALID_PARAMS, _problem(exc))
        agreed = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        session_id = self.sessions.open(bread.store, agreed)
        capabilities = ServerCapabilities(tools=ToolsCapability(list_changed=False))
        result = InitializeResult(protocol_version=agreed, server_info=self.server_info, capabilities=capabilities)
        answer = _result(message.id, result)
        answer.headers[SESSION_HEADER] = session_id
        return answer

    # tools/call

    def _call(self, bread: Any, session_id: str, message: JSONRPCRequest) -> Response:
        try:
            params = CallToolRequest.model_validate(message.model_dump(exclude_none=True)).params
        except ValidationError as exc:
            return _error(message.id, INVALID_PARAMS, _problem(exc))
        tool = self.tools.get(params.name)
        if tool is None:
            return _error(message.id, INVALID_PARAMS, f"no tool {params.name!r}")
        arguments = params.arguments or {}
        if tool.kind == "task":
            return _result(message.id, _task_result(bread, tool, arguments))
        call = call_run_id(session_id, message.id)
        if tool.kind == "agent" and bread.store.get_run(call) is not None:
            # An id used before in this session (a client that restarted its count): answering
            # it would attach to that earlier call's run and repeat its answer.
            return _error(message.id, INVALID_REQUEST, f"request id {message.id!r} was already used in this session")
        token = (params.meta or {}).get("progress_token")
        streamed = token is not None and SSE in request.headers.get("Accept", "")
        try:
            begin = self._begin(bread, tool, arguments, call)
            heartbeat = getattr(bread.transport, "heartbeat", None)
            run, frames = start_run_stream(begin, heartbeat=heartbeat, to_client=streamed)
        except BreadError as error:  # no run started
            return _result(message.id, failed(error))
        if run.run_id != call:  # a resume's continuation: its run keeps its own id
            frames = self._continuing(call, run.run_id, frames)
        if streamed:
            return stream_response(_progressed(message.id, tool, frames, token, run.run_id), SSE, run.run_id)
        return _result(message.id, ended(tool, _last_crumb(frames, run.run_id)))

    def _begin(self, bread: Any, tool: McpTool, arguments: dict[str, Any], run_id: str) -> Callable[[Any], Any]:
        """How the call's run starts: a run of the agent named ``run_id``, or the continuation of
        a paused run."""
        if tool.kind == "resume":
            checkpoint_id, response = _resume_arguments(arguments)
            # Another caller's says no more than an unknown checkpoint.
            if reachable_checkpoint(bread.store, checkpoint_id) is None:
                raise BreadError(CHECKPOINT_NOT_FOUND, f"no checkpoint {checkpoint_id}")
            return lambda token: bread.resume(checkpoint_id, response, signal=token, may_interrupt=may_reach_run)
        given = tool.run_input(arguments)
        return lambda token: bread.run(
            tool.target, given, signal=token, run_id=run_id, may_interrupt=may_reach_run, may_read_file=may_read_file
        )

    def _continuing(self, call: str, run_id: str, frames: Iterator[Any]) -> Iterator[Any]:
        """``frames``, with the continued run known by the call's name while they last."""
        self._continued[call] = run_id
        try:
            yield from frames  # closing this closes them
        finally:
            self._continued.pop(call, None)

    def _cancelled(self, bread: Any, session_id: str, message: JSONRPCNotification) -> None:
        """``notifications/cancelled``: the run of the call it names is cancelled, as
        ``POST /runs/<id>/cancel`` would (the run-ownership hook first). An agent call's run is
        found from any worker or replica; a resume's continuation, in the worker serving it. Only a
        call still in flight is cancelled: a late notice (a timeout racing the answer) leaves a
        paused run, or the continuation another call of this worker serves, as it is. A
        notification is never answered with an error: a failure here is logged."""
        try:
            request_id = CancelledNotification.model_validate(message.model_dump(exclude_none=True)).params.request_id
        except ValidationError:
            return
        if request_id is None:
            return
        call = call_run_id(session_id, request_id)
        run_id = self._continued.get(call, call)
        if call not in self._continued and call in self._continued.values():
            return  # an answered call whose run a later resume call continues here
        try:
            record = bread.store.get_run(run_id)
            if record is not None and record["status"] == "running" and may_reach_run(run_id):
                bread.cancel(run_id)
        except Exception:
            log.exception("MCP notifications/cancelled of run %s failed", run_id)


def call_run_id(session_id: str, request_id: Any) -> str:
    """The run of a session's ``tools/call``, named by the session and the request's id, so a
    ``notifications/cancelled`` (which names the request alone) finds it from any process. A
    request id is used once in a session, and the session id is the client's secret."""
    digest = hashlib.sha256(f"{session_id}\0{dumps(request_id)}".encode()).hexdigest()
    return f"run_mcp_{digest[:32]}"


def _task_result(bread: Any, tool: McpTool, arguments: dict[str, Any]) -> CallToolResult:
    """A task called once, in this request; its failure, whatever it is, is the tool's."""
    try:
        return completed(tool, bread.run_task(tool.target, tool.run_input(arguments)))
    except Exception as exc:
        error = internal_error(exc)
        if error.code == INTERNAL:
            log.exception("MCP call of task %s failed", tool.target)
        return failed(error)


def _resume_arguments(arguments: dict[str, Any]) -> tuple[str, Any]:
    checkpoint_id, response = arguments.get("checkpointId"), arguments.get("response")
    if not isinstance(checkpoint_id, str) or "response" not in arguments:
        raise BreadError(INPUT_INVALID, "resume needs a checkpointId (a string) and a response")
    return checkpoint_id, response


class _Seen:
    """The crumbs of a call's run as they pass: the last one, and how many."""

    def __init__(self, run_id: str):
        self.run_id, self.last, self.count = run_id, None, 0

    def take(self, items: list[Any]) -> list[dict[str, Any]]:
        crumbs = []
        for item in items:
            if item.__class__ is Frame:
                crumbs.append(item.crumb)
            else:
                log.warning("MCP call of run %s: frames before seq %s are gone", self.run_id, item.earliest_seq)
        if crumbs:
            self.last, self.count = crumbs[-1], self.count + len(crumbs)
        return crumbs


def _last_crumb(frames: Generator[Any, None, None], run_id: str) -> dict[str, Any] | None:
    """The last crumb of a call's run, read to its end (or pause); closes the tail."""
    seen = _Seen(run_id)
    with closing(frames):
        for items in frames:
            if items is not None:
                seen.take(items)
    return seen.last


def _progressed(request_id: Any, tool: McpTool, frames: Iterator[Any], token: Any, run_id: str) -> Iterator[bytes]:
    """The SSE body of a call with a progress token: a ``notifications/progress`` per crumb,
    then the call's response. The run is driven elsewhere."""
    seen = _Seen(run_id)

    def notify(items: list[Any]) -> list[bytes]:
        first = seen.count + 1
        return [_event(progress(token, first + i, crumb)) for i, crumb in enumerate(seen.take(items))]

    return stream_body(
        frames,
        notify,
        heartbeat=HEARTBEAT,
        name=f"MCP call of run {run_id}",
        failure=lambda error: [_event(_response_body(request_id, failed(error)))],
        epilogue=lambda: [_event(_response_body(request_id, ended(tool, seen.last)))],
        behind=SSE_BEHIND_FOR_GOOD,
    )


def _event(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {dumps(message)}\n\n".encode()


# the envelope


def _message() -> Any:
    """The request's JSON-RPC message; :class:`_Refused` (400) when it is none: -32700 for a body
    that is not JSON (an empty one too), -32602 for a lone surrogate in it, -32600 for JSON that
    is not one JSON-RPC message (a batch, a bare value)."""
    try:
        body = json_value(g.get("bread_body", b""))
    except NotJson as exc:
        raise _Refused(400, PARSE_ERROR, exc.message) from None
    except BreadError as exc:
        raise _Refused(400, INVALID_PARAMS, exc.message) from None
    try:
        message = jsonrpc_message_adapter.validate_python(body)
    except ValidationError:
        message = None
    # A request whose id is no string or integer would read as a notification, and go unanswered.
    if message is None or ("id" in body and isinstance(message, JSONRPCNotification)):
        raise _Refused(400, INVALID_REQUEST, "the body is not a JSON-RPC 2.0 message")
    return message


def _check_version() -> None:
    given = request.headers.get(VERSION_HEADER)
    if given is not None and given not in HANDSHAKE_PROTOCOL_VERSIONS:
        supported = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)
        raise _Refused(400, INVALID_REQUEST, f"unsupported {VERSION_HEADER} {given!r}: this server speaks {supported}")


class McpSessionStore(Protocol):
    """The role the MCP bridge needs of a store: keeping its sessions (its ``Mcp-Session-Id``).

    Kept in the store so that every worker and replica sharing it knows them; the first-party
    stores play this role. A record is ``{id, protocolVersion, createdAt, owner, usedAt}``:
    ``owner`` a key of the identity that opened it, ``usedAt`` when it last served."""

    def create_mcp_session(self, record: dict[str, Any]) -> bool:
        """Insert a session record; False (and no change) when the id exists."""

    def get_mcp_session(self, session_id: str) -> dict[str, Any] | None: ...

    def delete_mcp_session(self, session_id: str) -> bool:
        """End a session; False when there was none of that id."""

    def touch_mcp_session(self, session_id: str, used_at: str) -> bool:
        """Set a session's ``usedAt``; False when there is none of that id."""

    def evict_mcp_sessions(self, owner: str, keep: int) -> int:
        """Delete the sessions of ``owner`` but the ``keep`` it opened last; how many."""

    def expire_mcp_sessions(self, used_before: str) -> int:
        """Delete the sessions last used before ``used_before``; how many."""


class Sessions:
    """The endpoint's sessions, kept in the store: each bound to the identity that opened it, at
    most ``cap`` per identity, ended after ``idle_seconds`` unused."""

    def __init__(self, cap: int, idle_seconds: float):
        self.cap, self.idle_seconds = cap, idle_seconds
        self.grain_seconds = min(USED_AT_GRAIN_SECONDS, idle_seconds / 4)

    def open(self, store: McpSessionStore, version: str) -> str:
        """A new session of the caller's; the caller's oldest beyond the cap, and every session
        idle too long, are deleted (after the insert, so that callers opening sessions at once
        in several processes still leave the newest ``cap``)."""
        now = time.time()
        owner, session_id = caller_key(), f"mcp_{secrets.token_urlsafe(24)}"
        store.create_mcp_session(
            {
                "id": session_id,
                "protocolVersion": version,
                "createdAt": now_iso(),
                "owner": owner,
                "usedAt": iso_from_epoch(now),
            }
        )
        store.evict_mcp_sessions(owner, self.cap)
        store.expire_mcp_sessions(iso_from_epoch(now - self.idle_seconds))
        return session_id

    def of_caller(self, store: McpSessionStore) -> str:
        """The request's session id: 400 without one, 404 for one unknown, ended, expired or
        another identity's (which cannot tell it from an unknown one)."""
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            raise _Refused(400, INVALID_REQUEST, f"the {SESSION_HEADER} header is missing: initialize first")
        record, now = store.get_mcp_session(session_id), time.time()
        if record is None or record.get("owner") != caller_key():
            raise _no_session()
        if record["usedAt"] < iso_from_epoch(now - self.idle_seconds):
            store.delete_mcp_session(session_id)
            raise _no_session()
        if record["usedAt"] < iso_from_epoch(now - self.grain_seconds):
            store.touch_mcp_session(session_id, iso_from_epoch(now))
        return session_id


def _no_session() -> _Refused:
    return _Refused(404, INVALID_REQUEST, "no such session: it ended, or never was; initialize again")


def authorize_args() -> dict[str, str]:
    """What ``authorize`` gets as ``args`` for a request to the endpoint: its JSON-RPC ``method``,
    and a ``tools/call``'s ``tool``; nothing for a body that is no request or notification (the
    endpoint refuses it) nor for a ``DELETE``."""
    try:
        message = _message()
    except _Refused:
        return {}
    if not isinstance(message, JSONRPCRequest | JSONRPCNotification):
        return {}
    args = {"method": message.method}
    tool = (message.params or {}).get("name")
    if message.method == "tools/call" and isinstance(tool, str):
        args["tool"] = tool
    return args


def _problem(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()[:5])


#: Result fields of the 2026-07-28 era, which this server does not speak: no version it
#: negotiates defines them (mcp-types fills them with defaults, as ``ttlMs: 0``).
_NEWER_FIELDS = frozenset({"result_type", "ttl_ms", "cache_scope"})


def _response_body(request_id: Any, result: Result) -> dict[str, Any]:
    payload = result.model_dump(by_alias=True, exclude_none=True, exclude=_NEWER_FIELDS, mode="json")
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=payload).model_dump(by_alias=True)


def _result(request_id: Any, result: Result) -> Response:
    return Response(dumps(_response_body(request_id, result)), status=200, content_type=_JSON)


def _error(request_id: Any, code: int, message: str, status: int = 200) -> Response:
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
    return Response(error.model_dump_json(by_alias=True, exclude_unset=True), status=status, content_type=_JSON)


def _refusal(refused: _Refused, request_id: Any = None) -> Response:
    return _error(request_id, refused.code, refused.message, refused.status)
