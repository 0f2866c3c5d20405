"""The plugin: :func:`a2a_server`, an agent as an A2A endpoint (its Agent Card and its JSON-RPC
route), in v0.3 or v1.0."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any
from urllib.parse import urljoin

from flask import Response, g, jsonify, request, url_for

from ...crumbs import Frame, dumps, error_crumb
from ...errors import BreadError
from ...runtime import new_id
from ...server import (
    authorize_run,
    client_tail,
    register_http_route,
    shown_position,
    start_run_detached,
    start_run_stream,
    stream_body,
    stream_response,
)
from ...server.guard import NotJson, caller_key, json_value, may_reach_run, may_read_file, may_write_files
from ...stores import page_runs, read_log
from ...wire import SSE_BEHIND
from . import rpc, v03, v10
from .card import card_facts
from .parts import BadParams, check_inline_sizes, pause_answer, run_input
from .push import A2APushes, check_webhook, records_pushes, sender_of
from .rpc import RpcError
from .stream import CONNECTED, CONTENT_TYPE, HEARTBEAT, StreamEncoder, one_event
from .translator import (
    CANCELED,
    INPUT_REQUIRED,
    RUN_STATES,
    TERMINAL_STATES,
    Status,
    TaskFold,
    TaskLog,
    pause_part,
)

log = logging.getLogger("bread_sync.protocols.a2a")

#: ``authorize_context(identity, context_id)``: whether the caller may continue that context.
ContextAuthorizer = Callable[[Any, str], bool]

DIALECTS = {"0.3": v03, "1.0": v10}
DEFAULT_CARD_PATH = "/.well-known/agent-card.json"
DEFAULT_RPC_PATH = "/a2a"
#: The RPC route's own body limit: room for an inline file at the 10 MB limit, in base64.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: Push subscriptions one task may have, by default: each one POSTs every event of the task.
DEFAULT_MAX_PUSH_CONFIGS = 10
#: ListTasks' page size when the client names none, and the most it may ask for.
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100
#: How long a client may keep an Agent Card before it asks again (``Cache-Control: max-age``).
DEFAULT_CARD_MAX_AGE = 300
#: The most messages of its history a task is answered with when ``historyLength`` is not given.
MAX_HISTORY = 100
#: The card's ``version``: the version of the agent, which bread does not track.
AGENT_VERSION = "1.0.0"


class A2A_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    card = "a2a.card"
    rpc = "a2a.rpc"


def a2a_server(
    agent_id: str,
    url: str | None = None,
    card_path: str = DEFAULT_CARD_PATH,
    rpc_path: str = DEFAULT_RPC_PATH,
    spec_version: str = "0.3",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    push_notifications: bool = False,
    allow_private_webhooks: bool = False,
    max_push_configs_per_task: int = DEFAULT_MAX_PUSH_CONFIGS,
    authorize_context: ContextAuthorizer | None = None,
    card_max_age: int = DEFAULT_CARD_MAX_AGE,
) -> A2AServer:
    """The A2A plugin, for ``Config.plugins``: ``agent_id`` served as an A2A agent (``"0.3"`` or
    ``"1.0"``), its Agent Card at ``GET card_path`` (action ``a2a.card``) and its JSON-RPC endpoint
    at ``POST rpc_path`` (action ``a2a.rpc``).

    One mount serves one agent in one version; mount another, with its own paths, for another.
    Every option is in docs/reference.md; the webhook and context rules in docs/security.md.
    """
    if spec_version not in DIALECTS:
        raise ValueError(f"spec_version must be one of {sorted(DIALECTS)}, not {spec_version!r}")
    if isinstance(card_max_age, bool) or not isinstance(card_max_age, int) or card_max_age < 0:
        raise ValueError(f"card_max_age must be a whole number of seconds, 0 or more, not {card_max_age!r}")
    return A2AServer(
        agent_id,
        url,
        card_path,
        rpc_path,
        DIALECTS[spec_version],
        max_body_bytes,
        push_notifications,
        allow_private_webhooks,
        max_push_configs_per_task,
        authorize_context,
        card_max_age,
    )


class A2AServer:
    """See :func:`a2a_server`."""

    name = "a2a"

    def __init__(
        self,
        agent_id: str,
        url: str | None,
        card_path: str,
        rpc_path: str,
        dialect: Any,
        max_body_bytes: int,
        push_notifications: bool,
        allow_private_webhooks: bool,
        max_push_configs_per_task: int,
        authorize_context: ContextAuthorizer | None,
        card_max_age: int = DEFAULT_CARD_MAX_AGE,
    ):
        self.agent_id, self.url = agent_id, url
        self.card_path, self.rpc_path = card_path, rpc_path
        self.dialect = dialect
        self.max_body_bytes = max_body_bytes
        self.push_notifications = push_notifications
        self.allow_private_webhooks = allow_private_webhooks
        self.max_push_configs_per_task = max_push_configs_per_task
        self.authorize_context = authorize_context
        self.card_max_age = card_max_age
        #: Where a pushed file's relative uri is resolved: the origin of ``url``, when given.
        self.base_url = urljoin(url, "/") if url else None
        self._methods: dict[str, Callable[[Any, Any, Any], Any]] = {
            "send": self._send,
            "stream": self._stream,
            "get": self._get,
            "cancel": self._cancel,
            "resubscribe": self._resubscribe,
            "list": self._list,
            "extended_card": self._extended_card,
            "push_set": self._push_set,
            "push_get": self._push_get,
            "push_list": self._push_list,
            "push_delete": self._push_delete,
        }

    def start(self, bread: Any) -> None:
        """Run this process's push sender, and have it deliver this mount's subscriptions (each
        gunicorn worker calls it once it serves; call it yourself under another server)."""
        if self._pushes(bread):
            sender = sender_of(bread)
            sender.mounts[self.rpc_path] = A2APushes(self)
            sender.start()

    def _pushes(self, bread: Any) -> bool:
        return self.push_notifications and records_pushes(bread.store)

    def routes(self, blueprint: Any, bread: Any) -> None:
        register_http_route(
            blueprint, "GET", self.card_path, A2A_ACTIONS.card, lambda: self._card(bread), statuses=(304,)
        )
        register_http_route(
            blueprint,
            "POST",
            self.rpc_path,
            A2A_ACTIONS.rpc,
            lambda: self._rpc(bread),
            statuses=(413,),
            max_body_bytes=self.max_body_bytes,
            args=_authorize_args,
        )

    # -- the card -----------------------------------------------------------------------------

    def _rpc_url(self) -> str:
        if self.url is not None:
            return self.url
        # The endpoint register_http_route named (dots would read as a blueprint's).
        endpoint = f"POST {self.rpc_path}".replace(".", "_")
        return url_for(f"{request.blueprint}.{endpoint}", _external=True)

    def _card(self, bread: Any) -> Any:
        """The Agent Card, cacheable (spec v1.0 8.6.1): ``max-age``, a strong ETag of its bytes,
        304 for a matching ``If-None-Match``."""
        facts = card_facts(bread.agent(self.agent_id), self._rpc_url(), AGENT_VERSION, push=self._pushes(bread))
        response = jsonify(self.dialect.card(facts))
        response.set_etag(hashlib.sha256(response.get_data()).hexdigest())
        response.cache_control.max_age = self.card_max_age
        return response.make_conditional(request)

    # -- the JSON-RPC route -------------------------------------------------------------------

    def _rpc(self, bread: Any) -> Any:
        request_id, op = None, None
        try:
            request_id, method, params = rpc.parse_request(_request_json())
            op = self.dialect.METHODS.get(method)
            self._check_version()
            handle = self._methods.get(op) if op is not None else None
            if op is not None and handle is None:
                raise RpcError(rpc.UNSUPPORTED_OPERATION, f"{method} is not supported by this server")
            if handle is None:
                raise RpcError(rpc.METHOD_NOT_FOUND, f"no method {method}")
            answer = handle(bread, request_id, params)
        except RpcError as error:
            return self._failure(getattr(error, "request_id", request_id), error, op)
        except BadParams as error:
            return self._failure(request_id, RpcError(rpc.INVALID_PARAMS, str(error)), op)
        except BreadError as error:
            return self._failure(request_id, RpcError.of(error), op)
        return answer if isinstance(answer, Response) else jsonify(rpc.success(request_id, answer))

    def _failure(self, request_id: Any, error: RpcError, op: str | None) -> Response:
        """The error answer: JSON, but for a v0.3 streaming method an SSE stream of that one
        event (v0.3 clients read its answer as a stream; v1.0 ones take the JSON)."""
        body = rpc.failure(request_id, error, self.dialect.ERROR_DETAILS)
        if op in self.dialect.ERRORS_AS_EVENTS:
            return Response(one_event(body), content_type=CONTENT_TYPE)
        return jsonify(body)

    def _check_version(self) -> None:
        """A2A-Version: empty means 0.3 (spec 3.6); a version this mount does not serve is -32009."""
        given = request.headers.get("A2A-Version", "").strip() or "0.3"
        if ".".join(given.split(".")[:2]) != self.dialect.VERSION:
            message = f"this endpoint serves A2A {self.dialect.VERSION}, not {given} (send A2A-Version)"
            raise RpcError(rpc.VERSION_NOT_SUPPORTED, message)

    # -- send and stream ----------------------------------------------------------------------

    def _begin(self, bread: Any, params: Any) -> tuple[Callable[[Any], Any], str]:
        """How the run a message starts (or the paused task it answers) begins, and its context
        (session) id."""
        check_inline_sizes(params, self.dialect.INLINE_BYTES)
        try:
            parts, task_id, context_id = self.dialect.read_message(params)
        except ValueError as exc:
            raise BadParams(str(exc)) from None
        if task_id is not None:
            record = self._record(bread, task_id)
            if record["status"] != "paused":
                raise RpcError(rpc.UNSUPPORTED_OPERATION, f"task {task_id} is not waiting for input")
            self._check_context(record["sessionId"])
            checkpoint = bread.store.get_checkpoint(record["checkpointId"])
            answer = pause_answer(parts, checkpoint["kind"])
            return (
                lambda token: bread.resume(checkpoint["id"], answer, signal=token, may_interrupt=may_reach_run),
                record["sessionId"],
            )
        if context_id is not None:
            self._check_context(context_id)
        session_id = context_id or new_id("ses")
        value = run_input(parts, bread.blob_store, caller_key(), partial(self._check_inline_files, bread))
        return (
            lambda token: bread.run(
                self.agent_id,
                value,
                session={"id": session_id},
                signal=token,
                may_interrupt=may_reach_run,
                may_read_file=may_read_file,
            ),
            session_id,
        )

    def _check_inline_files(self, bread: Any, media_types: list[str]) -> None:
        """Inline bytes (of ``media_types``) are stored as an upload is, before the run starts:
        only for a caller who may upload (``file.write``), and only once the agent's model takes
        each one's type, so a message the run would refuse for them stores nothing."""
        if media_types and not may_write_files():
            raise BadParams("inline file bytes are stored as an upload, which this caller may not make (file.write)")
        for media_type in media_types:
            bread.check_file_type(self.agent_id, media_type)

    def _check_context(self, context_id: str) -> None:
        # Only True allows, as with every authorizer: one that forgets to return denies.
        hook = self.authorize_context
        if hook is not None and hook(g.get("bread_identity"), context_id) is not True:
            raise RpcError(rpc.INVALID_PARAMS, f"contextId {context_id} is not one this caller may continue")

    def _launch(self, bread: Any, params: Any, start: Callable[[Any], tuple[Any, Any]]) -> tuple[Any, Any, str]:
        """Start the run a message asks for with ``start(begin)`` (``(run, its tail)``), and
        subscribe the push config it names: ``(run, tail, context id)``."""
        begin, context_id = self._begin(bread, params)
        target = self._send_push(bread, params)
        run, frames = start(begin)
        if target is not None:  # its sender starts from the task's first event: nothing is missed
            self._subscribe(bread, run.run_id, target)
        return run, frames, context_id

    def _start(
        self, bread: Any, request_id: Any, params: Any, to_client: bool = True
    ) -> tuple[Any, Iterator[Any], StreamEncoder]:
        """Start the run a message asks for and tail it (for the client's stream, or for the
        request to read: ``start_run_stream``'s ``to_client``); its encoder, brought up to where
        a continuation starts (so its artifacts are the next turn's)."""
        heartbeat = getattr(bread.transport, "heartbeat", None)
        run, frames, context_id = self._launch(
            bread, params, lambda begin: start_run_stream(begin, heartbeat=heartbeat, to_client=to_client)
        )
        encoder = StreamEncoder(self.dialect, request_id, run.run_id, context_id, self._base_url())
        for frame in read_log(bread.store, run.run_id, run.first_seq - 1):
            encoder.translator(frame.crumb)
        return run, frames, encoder

    def _send_push(self, bread: Any, params: Any) -> dict[str, Any] | None:
        """The push config a message names, checked before its run starts."""
        target = self.dialect.read_send_push(params)
        if target is not None:
            self._check_pushes(bread)
            check_webhook(target["url"], self.allow_private_webhooks)
        return target

    def _send(self, bread: Any, request_id: Any, params: Any) -> Any:
        """message/send: the run to its end or pause, answered as its Task; or, not blocking
        (v0.3 ``blocking: false``, v1.0 ``returnImmediately``), its Task ``working`` at once,
        the run going on detached from the request."""
        if not _valid(self.dialect.read_blocking, params):
            run, _, context_id = self._launch(bread, params, lambda begin: (start_run_detached(begin), None))
            return self.dialect.send_result(self.dialect.task(run.run_id, context_id, Status("working")))
        run, frames, encoder = self._start(bread, request_id, params, to_client=False)
        fold = TaskFold()
        try:
            for items in frames:
                for item in items or ():
                    if item.__class__ is Frame:
                        for event in encoder.translator(item.crumb):
                            fold.add(event)
        finally:
            frames.close()
        task = self.dialect.task(run.run_id, encoder.context_id, fold.status, list(fold.artifacts.values()))
        return self.dialect.send_result(task)

    def _stream(self, bread: Any, request_id: Any, params: Any) -> Response:
        """message/stream: the Task (working), then the run's events to its end or pause."""
        run, frames, encoder = self._start(bread, request_id, params)
        working = self.dialect.task(run.run_id, encoder.context_id, Status("working"))
        encoder.open_with(self.dialect.task_item(working))  # sent with the run's first crumb, once in the log
        return stream_response(_body(encoder, frames, run.run_id, []), CONTENT_TYPE, run.run_id)

    def _base_url(self) -> str:
        return request.host_url

    # -- the task's lifecycle -----------------------------------------------------------------

    def _record(self, bread: Any, task_id: Any) -> dict[str, Any]:
        """The run of task ``task_id``, once the run-ownership hook allowed it; -32001 when there
        is none, or it is another agent's."""
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(rpc.INVALID_PARAMS, "params.id must be a task id (a string)")
        authorize_run(task_id)
        record = bread.store.get_run(task_id)
        if record is None or record["agentId"] != self.agent_id:
            raise RpcError(rpc.TASK_NOT_FOUND, f"no task {task_id}")
        return record

    def _snapshot(self, bread: Any, record: dict[str, Any]) -> dict[str, Any]:
        """The task as its run record says it is now, without its outputs."""
        return self.dialect.task(record["id"], record["sessionId"], self._status(bread, record))

    def _status(self, bread: Any, record: dict[str, Any]) -> Status:
        """The task's status as its run record says it is now; a paused one with its pause's data part."""
        state = RUN_STATES[record["status"]]
        parts = None
        if state == INPUT_REQUIRED and record.get("checkpointId"):
            checkpoint = bread.store.get_checkpoint(record["checkpointId"])
            parts = [pause_part({**checkpoint, "checkpointId": checkpoint["id"]})] if checkpoint else None
        return Status(state, parts, record.get("checkpointId"))

    def _task(self, bread: Any, record: dict[str, Any], history_length: int | None, artifacts: bool = True) -> Any:
        """The task now, with its artifacts (so far) and the last ``history_length`` messages of
        its history (None: up to :data:`MAX_HISTORY`), rebuilt from its run's log. Its status is
        the record's (a cancel lands there first), with the log's message when they agree."""
        if history_length == 0 and not artifacts:
            return self._snapshot(bread, record)
        log = TaskLog(record["id"], self._base_url())
        for frame in read_log(bread.store, record["id"]):
            log.add(frame.crumb)
        folded = log.fold.status
        status = folded if folded.state == RUN_STATES[record["status"]] else self._status(bread, record)
        kept = MAX_HISTORY if history_length is None else history_length
        history = log.history[-kept:] if kept else []
        outputs = list(log.fold.artifacts.values()) if artifacts else []
        return self.dialect.task(record["id"], record["sessionId"], status, outputs, history)

    def _get(self, bread: Any, request_id: Any, params: Any) -> Any:
        """The task with its artifacts and history (``historyLength``: unset, up to
        :data:`MAX_HISTORY` messages; 0 none; N the last N)."""
        record = self._record(bread, _task_id(params))
        return self._task(bread, record, _history_length(self.dialect.read_history_length, params))

    def _cancel(self, bread: Any, request_id: Any, params: Any) -> Any:
        """Cancel the task wherever it runs (any replica sharing the store); the answer is the
        Task as canceled, before its run has unwound."""
        record = self._record(bread, _task_id(params))
        if RUN_STATES[record["status"]] in TERMINAL_STATES or not bread.cancel(record["id"]):
            raise RpcError(rpc.TASK_NOT_CANCELABLE, f"task {record['id']} has ended: it cannot be canceled")
        return self.dialect.task(record["id"], record["sessionId"], Status(CANCELED))

    def _resubscribe(self, bread: Any, request_id: Any, params: Any) -> Response:
        """The task's stream again: ``: connected``, the Task, then its events after
        ``Last-Event-ID`` (or ``?after=``; by default all of them), live to its end or pause."""
        record = self._record(bread, _task_id(params))
        if RUN_STATES[record["status"]] in TERMINAL_STATES:
            raise RpcError(rpc.UNSUPPORTED_OPERATION, f"task {record['id']} has ended: nothing to subscribe to")
        try:
            position = shown_position()
        except BreadError as error:
            raise RpcError(rpc.INVALID_PARAMS, error.message) from None
        run_id, after = record["id"], position.after
        last = bread.store.last_seq(run_id)
        if last < after:
            raise RpcError(rpc.INVALID_PARAMS, f"task {run_id} has no event {after} yet: its log ends at {last}")
        encoder = StreamEncoder(self.dialect, request_id, run_id, record["sessionId"], self._base_url(), position)
        for frame in read_log(bread.store, run_id, after):
            encoder.translator(frame.crumb)  # brings it to the client's position: artifact ids, append
        opening = [CONNECTED, encoder.frame(self.dialect.task_item(self._snapshot(bread, record)))]
        if record["status"] == "paused" and last <= after:  # nothing to replay: the Task says it all
            return stream_response(iter(opening), CONTENT_TYPE, run_id)
        frames = client_tail(run_id, after, heartbeat=getattr(bread.transport, "heartbeat", None), through_pause=False)
        return stream_response(_body(encoder, frames, run_id, opening), CONTENT_TYPE, run_id)

    def _list(self, bread: Any, request_id: Any, params: Any) -> Any:
        """ListTasks (v1.0): this agent's tasks the caller may reach, the last updated first, by
        context and state; ``pageToken`` is where the page starts. ``totalSize`` counts the
        caller's tasks up to this page's last, and one more when there is a next page: exact on
        the last page, and never a task of another's (counting them all would read them all)."""
        try:
            context_id, state, page_size, token, history_length, artifacts = self.dialect.read_list(params)
        except ValueError as exc:
            raise BadParams(str(exc)) from None
        _check_history_length(history_length)
        if not 0 <= page_size <= MAX_PAGE_SIZE:
            raise BadParams(f"pageSize must be at most {MAX_PAGE_SIZE}")
        cursor, counted = _read_page_token(token)
        statuses = None if state is None else [status for status, named in RUN_STATES.items() if named == state]
        size = page_size or DEFAULT_PAGE_SIZE
        page, more = self._reachable(bread, context_id, statuses, cursor, size)
        counted += len(page)
        after = _page_token(page[-1], counted) if more else ""
        tasks = [self._task(bread, r, history_length, artifacts) for r in page]
        return self.dialect.task_list(tasks, after, size, counted + (1 if more else 0))

    def _reachable(
        self, bread: Any, context_id: str | None, statuses: list[str] | None, cursor: Any, size: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``size`` of this agent's runs past ``cursor`` that the caller may reach, and
        whether there is another: the store is read a page at a time until one more is found,
        or it has none left."""
        found: list[dict[str, Any]] = []
        while True:
            rows = page_runs(bread.store, self.agent_id, context_id, statuses, cursor, limit=size + 1)
            for row in rows:
                if may_reach_run(row["id"]):
                    if len(found) == size:
                        return found, True
                    found.append(row)
            if len(rows) <= size:
                return found, False
            cursor = (rows[-1]["updatedAt"], rows[-1]["id"])

    def _extended_card(self, bread: Any, request_id: Any, params: Any) -> Any:
        raise RpcError(rpc.EXTENDED_CARD_NOT_CONFIGURED, "this agent has no extended card")

    # -- push notifications -------------------------------------------------------------------

    def _push_set(self, bread: Any, request_id: Any, params: Any) -> Any:
        """Subscribe a webhook to a task's updates (its id, when not given, is made here)."""
        self._check_pushes(bread)
        config = _valid(self.dialect.read_push_config, params)
        return self.dialect.push_config(self._subscribe(bread, self._record(bread, config["taskId"])["id"], config))

    def _subscribe(self, bread: Any, task_id: str, target: dict[str, Any]) -> dict[str, Any]:
        check_webhook(target["url"], self.allow_private_webhooks)
        config = {**target, "taskId": task_id, "id": target.get("id") or new_id("push"), "mount": self.rpc_path}
        others = [c for c in bread.store.list_push_configs(task_id) if c["id"] != config["id"]]
        if len(others) >= self.max_push_configs_per_task:  # setting an id again replaces it: no more POSTs
            raise BadParams(f"task {task_id} has {len(others)} push notification configs: the most it may have")
        bread.store.save_push_config(config)
        return next(c for c in bread.store.list_push_configs(task_id) if c["id"] == config["id"])

    def _push_ref(self, bread: Any, params: Any) -> tuple[str, list[dict[str, Any]], str | None]:
        """A get, list or delete's task id (a task of this agent), its subscriptions, the one named."""
        self._check_pushes(bread)
        task_id, config_id = _valid(self.dialect.read_push_ref, params)
        task_id = self._record(bread, task_id)["id"]
        return task_id, bread.store.list_push_configs(task_id), config_id

    def _push_get(self, bread: Any, request_id: Any, params: Any) -> Any:
        _, configs, config_id = self._push_ref(bread, params)
        found = [c for c in configs if config_id is None or c["id"] == config_id]
        if not found:
            raise RpcError(rpc.TASK_NOT_FOUND, f"no push notification config {config_id} on this task")
        return self.dialect.push_config(found[0])

    def _push_list(self, bread: Any, request_id: Any, params: Any) -> Any:
        _, configs, _ = self._push_ref(bread, params)
        return self.dialect.push_list(configs)

    def _push_delete(self, bread: Any, request_id: Any, params: Any) -> Any:
        task_id, _, config_id = self._push_ref(bread, params)
        if config_id is None:
            raise BadParams("the push notification config to delete must be named by its id")
        if not bread.store.delete_push_config(task_id, config_id) and not self.dialect.IDEMPOTENT_DELETE:
            raise RpcError(rpc.TASK_NOT_FOUND, f"no push notification config {config_id} on this task")
        return None

    def _check_pushes(self, bread: Any) -> None:
        if not self._pushes(bread):
            raise RpcError(rpc.PUSH_NOT_SUPPORTED, "push notifications are not enabled on this mount")


def _valid(read: Callable[[Any], Any], params: Any) -> Any:
    try:
        return read(params)
    except ValueError as exc:
        raise BadParams(str(exc)) from None


def _history_length(read: Callable[[Any], int | None], params: Any) -> int | None:
    return _check_history_length(_valid(read, params))


def _check_history_length(history_length: int | None) -> int | None:
    if history_length is not None and history_length < 0:
        raise BadParams("historyLength must be 0 or more")
    return history_length


def _task_id(params: Any) -> Any:
    if not isinstance(params, dict):
        raise RpcError(rpc.INVALID_PARAMS, "params must be an object with the task's id")
    return params.get("id")


def _body(encoder: StreamEncoder, frames: Any, run_id: str, opening: list[bytes]) -> Iterator[bytes]:
    """The response body: ``opening``, then each frame's events; a failure once the stream is
    open is its last status update (``failed``). The run is driven elsewhere."""

    def encode(items: list[Any]) -> list[bytes]:
        out = []
        for item in items:
            if item.__class__ is Frame:
                out += encoder.crumb(item)
            else:
                log.warning("A2A stream of task %s: events before seq %s are gone", run_id, item.earliest_seq)
        return out

    def failure(error: BreadError) -> list[bytes]:
        events = encoder.translator(error_crumb(run_id, error))
        return [*encoder.unsent_opening(), *(encoder.event(event) for event in events)]

    return stream_body(
        frames,
        encode,
        heartbeat=HEARTBEAT,
        failure=failure,
        prelude=opening,
        behind=SSE_BEHIND,
        name=f"A2A stream of task {run_id}",
    )


def _page_token(last: dict[str, Any], counted: int) -> str:
    """Where the next page starts (the last task's update time and id), and how many tasks of
    the caller's the pages so far held."""
    return base64.urlsafe_b64encode(dumps([last["updatedAt"], last["id"], counted]).encode()).decode()


def _read_page_token(token: str) -> tuple[tuple[str, str] | None, int]:
    if token == "":
        return None, 0
    try:
        updated_at, run_id, counted = json.loads(base64.urlsafe_b64decode(token))
    except (ValueError, TypeError):  # binascii.Error and JSONDecodeError are ValueErrors
        counted = None
    if not (
        isinstance(counted, int)
        and not isinstance(counted, bool)
        and counted >= 0
        and isinstance(updated_at, str)
        and isinstance(run_id, str)
    ):
        raise BadParams("pageToken must be one this server gave")
    return (updated_at, run_id), counted


def _request_json() -> Any:
    """The body's JSON value, read as every bread route reads one: not JSON in UTF-8 (NaN and
    Infinity too) is -32700; a lone surrogate is ``INVALID_REQUEST``, so -32602. Read once a
    request (the authorize args read it first), as a body may be 16 MiB."""
    if "bread_a2a_json" not in g:
        try:
            g.bread_a2a_json = json_value(g.get("bread_body", b""))
        except NotJson as exc:
            raise RpcError(rpc.PARSE_ERROR, exc.message) from None
    return g.bread_a2a_json


def _authorize_args() -> dict[str, str]:
    """What ``authorize`` gets as ``args`` for a request to the RPC route: its JSON-RPC
    ``method``; nothing for a body without one (the route answers it with an error)."""
    try:
        body = _request_json()
    except (RpcError, BreadError):
        return {}
    method = body.get("method") if isinstance(body, dict) else None
    return {"method": method} if isinstance(method, str) else {}
