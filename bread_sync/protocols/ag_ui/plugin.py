"""The plugin: :func:`ag_ui`, the AG-UI ingress and the crumb-bus mapper."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    ResumeEntry,
    RunAgentInput,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    TextPart,
    UserMessage,
)
from flask import Response, g
from pydantic import ValidationError

from ... import crumbs as c
from ...crumbs import Frame, error_crumb
from ...errors import CHECKPOINT_ALREADY_RESUMED, CHECKPOINT_NOT_FOUND, INVALID_REQUEST, RUN_NOT_FOUND, BreadError
from ...server import (
    client_tail,
    followed_run,
    register_http_route,
    shown_position,
    start_run_stream,
    stream_body,
    stream_response,
)
from ...server.guard import Forbidden, json_body, may_reach_run, reachable_checkpoint
from ...stores import read_log
from ...wire import SSE_BEHIND
from ...wire.replay import ShownText
from .translator import CONTENT_TYPE, AgUiTransformer, create_ag_ui_transformer, encode

log = logging.getLogger("bread_sync.protocols.ag_ui")

DEFAULT_PATH = "/ag-ui/run"
#: An SSE comment: AG-UI parsers skip it, proxies see the stream is alive.
HEARTBEAT = b": ping\n\n"


class AG_UI_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    run = "ag_ui.run"
    #: The resumable stream, GET <path>/runs/<runId>/stream.
    stream = "ag_ui.stream"


ThreadAuthorizer = Callable[[Any, str], bool]


def ag_ui(
    agent_id: str | None = None,
    path: str = DEFAULT_PATH,
    on_event: Callable[[BaseEvent], None] | None = None,
    authorize_thread: ThreadAuthorizer | None = None,
) -> AgUiPlugin:
    """The AG-UI plugin, for ``Config.plugins``.

    ``agent_id``: serve that agent at ``POST path`` (action ``ag_ui.run``): one plugin, one
    agent; mount another for another agent. A pause ends a stream with an interrupt; a body
    with ``resume`` answers it, and continues the run (or cancels it). ``GET
    path/runs/<runId>/stream`` (action ``ag_ui.stream``) resumes a stream after its
    ``Last-Event-ID``. ``on_event(event)``: called with the AG-UI events of every run of this
    instance, one transformer per run. ``authorize_thread(identity, thread_id)`` must return
    True for the request's ``threadId`` (bread's session id), else 403; without it any caller
    who knows a thread id may continue that session.
    """
    return AgUiPlugin(agent_id, path, on_event, authorize_thread)


class AgUiPlugin:
    """See :func:`ag_ui`."""

    name = "ag_ui"

    def __init__(
        self,
        agent_id: str | None,
        path: str,
        on_event: Callable[[BaseEvent], None] | None,
        authorize_thread: ThreadAuthorizer | None,
    ):
        self.agent_id = agent_id
        self.path = path
        self.on_event = on_event
        self.authorize_thread = authorize_thread
        self._per_run: dict[str, AgUiTransformer] = {}
        if on_event is not None:  # a hook only when there is someone to tell
            self.on_crumb = self._map_crumb

    def routes(self, blueprint: Any, bread: Any) -> None:
        if self.agent_id is not None:
            register_http_route(blueprint, "POST", self.path, AG_UI_ACTIONS.run, lambda: self._serve(bread))
            register_http_route(
                blueprint,
                "GET",
                f"{self.path}/runs/<runId>/stream",
                AG_UI_ACTIONS.stream,
                lambda runId: self._follow(bread, runId),
                statuses=(204, 400, 404),
            )

    def _map_crumb(self, frame: Frame) -> None:
        # A paused run keeps its transformer: its continuation, in this process, goes on with it.
        transformer = self._per_run.get(frame.run_id)
        if transformer is None:
            transformer = self._per_run[frame.run_id] = create_ag_ui_transformer()
        if frame.type in c.TERMINAL:
            del self._per_run[frame.run_id]
        for event in transformer(frame.crumb):
            self.on_event(event)

    def _check_thread(self, thread_id: str) -> None:
        # Only True allows, as with every authorizer: one that forgets to return denies.
        if self.authorize_thread is not None and self.authorize_thread(g.get("bread_identity"), thread_id) is not True:
            raise Forbidden()

    def _serve(self, bread: Any) -> Response:
        body = run_input(json_body())
        self._check_thread(body.thread_id)
        entry = resume_entry(body) if body.resume else None
        text = new_turn(body) if entry is None else None
        given = {"state": body.state, "context": [item.model_dump() for item in body.context or ()]}
        # The snapshots carry the client's state: the one it sent, else the one its thread kept.
        state = body.state if body.state is not None else _thread_state(bread, body.thread_id)
        transformer = create_ag_ui_transformer(body.thread_id, body.run_id, partial(self._answer_schema, bread), state)

        def begin(token: Any) -> Any:
            if entry is not None:
                return self._resume(bread, body.thread_id, entry, token, given)
            return bread.run(
                self.agent_id, text, session={"id": body.thread_id}, signal=token, may_interrupt=may_reach_run, **given
            )

        try:
            run, frames = start_run_stream(begin, heartbeat=getattr(bread.transport, "heartbeat", None))
        except _Cancelled:  # the answer cancelled the paused run: nothing runs, the stream says so
            return _response(_cancelled(transformer), None)
        except BreadError as error:  # no run exists: the failure is the whole stream, at HTTP 200
            return _response(_failure(transformer, error), None)
        return _response(_stream(frames, transformer, run.run_id), run.run_id)

    def _resume(self, bread: Any, thread_id: str, entry: ResumeEntry, token: Any, given: dict[str, Any]) -> Any:
        """Continue the paused run ``entry`` answers. The checkpoint is read from the store, so
        any replica, before or after a restart, resumes it; it must be of this thread, and of a
        run the run-ownership hook allows (another caller's is answered as an unknown one, before
        anything about it is said). ``cancelled`` denies an approval, and cancels the run of an
        input (raising :class:`_Cancelled`)."""
        checkpoint = reachable_checkpoint(bread.store, entry.interrupt_id)
        if checkpoint is None or checkpoint["sessionId"] != thread_id:
            raise BreadError(CHECKPOINT_NOT_FOUND, f"no interrupt {entry.interrupt_id} on this thread")
        used = BreadError(CHECKPOINT_ALREADY_RESUMED, f"interrupt {entry.interrupt_id} was already answered")
        if checkpoint["status"] != "pending":
            raise used
        if entry.status == "cancelled" and checkpoint["kind"] == "input":
            if not bread.cancel(checkpoint["runId"]):
                raise used
            raise _Cancelled()
        response = {"approved": False} if entry.status == "cancelled" else entry.payload
        return bread.resume(entry.interrupt_id, response, signal=token, may_interrupt=may_reach_run, **given)

    def _follow(self, bread: Any, run_id: str) -> Response:
        """The run's events after ``Last-Event-ID`` (or ``?after=``), then live, to its end: its
        past up to there is translated silently, so the stream opens with RUN_STARTED and
        re-opens what was open there."""
        position = shown_position()
        after = position.after
        record = followed_run(run_id, after, check=self._check_followed)
        if record is None:
            return Response(status=204)
        state = _thread_state(bread, record["sessionId"])
        transformer = create_ag_ui_transformer(response_schema=partial(self._answer_schema, bread), state=state)
        for frame in read_log(bread.store, run_id, after):
            transformer(frame.crumb)
        prelude = [encode(event).encode() for event in transformer.reopen()]
        frames = client_tail(run_id, after, heartbeat=getattr(bread.transport, "heartbeat", None))
        return _response(_stream(frames, transformer, run_id, prelude, position), run_id)

    def _check_followed(self, record: dict[str, Any]) -> None:
        # Another agent's run is not this mount's to stream: answered as a run that is not there.
        if record["agentId"] != self.agent_id:
            raise BreadError(RUN_NOT_FOUND, f"no run {record['id']}")
        self._check_thread(record["sessionId"])

    def _answer_schema(self, bread: Any, crumb: dict[str, Any]) -> dict[str, Any] | None:
        # The paused tool's own response schema, when this plugin's agent has that tool.
        agent = bread.agent(self.agent_id)
        for tool in getattr(agent, "tools", None) or []:
            if tool.name == crumb.get("toolName") and tool.response_schema is not None:
                return tool.response_json_schema()
        return None


def run_input(body: dict[str, Any]) -> RunAgentInput:
    """The body as a ``RunAgentInput``, or ``INVALID_REQUEST`` naming what is wrong."""
    try:
        given = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
        raise BreadError(INVALID_REQUEST, "; ".join(problems)) from None
    if not given.thread_id.strip():
        raise BreadError(INVALID_REQUEST, "threadId must not be empty: it is the session's id")
    if given.state is not None and not isinstance(given.state, dict):
        raise BreadError(INVALID_REQUEST, "state must be an object: bread's own keys are merged into it")
    return given


def resume_entry(body: RunAgentInput) -> ResumeEntry:
    """The one resume entry of a continuation: bread pauses a run on one interrupt at a time."""
    if len(body.resume) != 1:
        raise BreadError(INVALID_REQUEST, "resume must hold one entry: bread pauses a run on one interrupt at a time")
    return body.resume[0]


def new_turn(body: RunAgentInput) -> str:
    """The new turn's text: the last message's. Earlier messages are already in the session."""
    if not body.messages:
        raise BreadError(INVALID_REQUEST, "messages must not be empty: its last message is the new turn")
    last = body.messages[-1]
    if not isinstance(last, UserMessage):
        raise BreadError(INVALID_REQUEST, f"the last message must be a user message, not {last.role}")
    if isinstance(last.content, str):
        return last.content
    texts = [part.text for part in last.content if isinstance(part, TextPart)]
    if not texts or len(texts) != len(last.content):
        raise BreadError(INVALID_REQUEST, "the last message must be text: other content parts are not supported")
    return "".join(texts)


def _thread_state(bread: Any, thread_id: str) -> dict[str, Any]:
    return (bread.store.get_session(thread_id) or {}).get("state") or {}


def _stream(
    frames: Iterator[Any],
    transformer: AgUiTransformer,
    run_id: str,
    prelude: list[bytes] | None = None,
    position: ShownText | None = None,
) -> Iterator[bytes]:
    """The response body: ``prelude``, then each frame's events, encoded, the last event of each
    frame's with the ``id`` of the client's position past it (where a resumed stream may start:
    a seq, or ``<seq>:<characters>:<crc32>`` inside a segment, :class:`ShownText`). A stream
    resumed at ``position`` skips the text its client holds. The run is driven elsewhere."""
    seen = position or ShownText()
    held = False  # text the client holds was translated silently
    announced: str | None = None  # the message this stream had said was open before it

    def encode_all(items: list[Any]) -> list[bytes]:
        nonlocal held, announced
        chunks: list[bytes] = []
        for item in items:
            if item.__class__ is not Frame:
                log.warning("AG-UI stream of run %s: frames before seq %s are gone", run_id, item.earliest_seq)
                continue
            dropped, sent = seen.unseen(item)
            for frame in dropped:
                if not held:
                    held, announced = True, transformer.open_message
                transformer(frame.crumb)
            events: list[str] = []
            for frame in sent:
                chunks += [event.encode() for event in events]
                if held and transformer.open_message != announced:  # opened silently: said before its rest
                    chunks += [encode(event).encode() for event in transformer.reopen_message()]
                held = False
                events = transformer.frames(frame.crumb)
            if events:  # the id after all of them: an event before it cannot carry the client past them
                events[-1] = f"id: {seen.event_id}\n{events[-1]}"
            chunks += [event.encode() for event in events]
        return chunks

    return stream_body(
        frames,
        encode_all,
        heartbeat=HEARTBEAT,
        prelude=prelude or (),
        failure=lambda error: _failure(transformer, error, run_id),
        behind=SSE_BEHIND,
        name=f"AG-UI stream of run {run_id}",
    )


class _Cancelled(Exception):
    """An input interrupt answered ``cancelled``: its paused run is cancelled, and nothing runs."""


def _cancelled(transformer: AgUiTransformer) -> Iterator[bytes]:
    thread_id, run_id = transformer.thread_id, transformer.run_id
    yield encode(RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)).encode()
    yield encode(RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=RunFinishedCancelledOutcome())).encode()


def _failure(transformer: AgUiTransformer, error: BreadError, run_id: str = "") -> Iterator[bytes]:
    for event in transformer(error_crumb(run_id, error)):
        yield encode(event).encode()


def _response(body: Iterator[bytes], run_id: str | None) -> Response:
    return stream_response(body, CONTENT_TYPE, run_id)
