"""The run routes (start, resume, follow a run's stream), shared by both HTTP transports; only
the :class:`~bread_sync.wire.Wire` differs. A view starts or finds the run elsewhere and only
tails it; its response generator formats frames and nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from flask import Response

from ..crumbs import Frame, is_delta_frame
from ..errors import AGENT_NOT_FOUND, CHECKPOINT_NOT_FOUND, RUN_NOT_FOUND, BreadError
from ..runtime import Bread, new_id
from ..transports.http import HTTPTransport
from ..wire import SSE, Wire
from ..wire.replay import Gap
from .actions import HTTP_ACTIONS, register_http_route
from .background import accepted, check_webhook, prefers_async, subscribe_webhook, wait_for_run
from .guard import accepts, authorize_run, may_reach_run, may_read_file, reachable_checkpoint, valid_body
from .schemas import PipelineRunBody, ResumeBody, RunBody, WebhookRef
from .streams import (
    client_tail,
    followed_run,
    start_run_detached,
    start_run_stream,
    stream_body,
    stream_position,
    stream_response,
)

RunBodies = TypeVar("RunBodies", RunBody, PipelineRunBody)


def mount(app: Any, bread: Bread, transport: HTTPTransport) -> None:
    """Serve the streaming routes of ``transport``'s wire on ``app`` (a blueprint)."""
    views, a = _Views(transport, bread), HTTP_ACTIONS
    # Path params carry the names http-api.md gives authorize's args (args.id, args.runId).
    register_http_route(app, "POST", "/agents/<id>/run", a.run_start, lambda id: views.run(id))
    register_http_route(app, "POST", "/pipelines/<id>/run", a.pipeline_start, lambda id: views.pipeline(id))
    register_http_route(
        app, "POST", "/resume/<checkpointId>", a.run_resume, lambda checkpointId: views.resume(checkpointId)
    )
    register_http_route(app, "GET", "/runs/<runId>/stream", a.run_stream, lambda runId: views.passive(runId))
    register_http_route(app, "POST", "/runs/<runId>/cancel", a.run_cancel, lambda runId: views.cancel(runId))
    register_http_route(app, "GET", "/runs/<runId>/wait", a.run_read, wait_for_run, statuses=(202,))


class _Views:
    def __init__(self, transport: HTTPTransport, bread: Bread):
        self.transport = transport
        self.wire = transport.wire
        self.bread = bread

    def run(self, agent_id: str) -> Response:
        req = _run_body(RunBody)
        # Only a client's own runId can be a retry to look for; without one the run gets a new id.
        return self._start(
            _reported_id(req),
            req.webhook,
            lambda token: self.bread.run(
                self._served(agent_id),
                req.input,
                session=_session(req),
                skill=req.skill,
                run_id=req.runId,
                signal=token,
                session_policy=req.sessionPolicy,
                may_interrupt=may_reach_run,
                after=req.after,
                may_read_file=may_read_file,
            ),
        )

    def _served(self, agent_id: str) -> str:
        """``agent_id``, when this server serves it: an agent ``Config.entrypoints`` leaves out
        (a subagent, say) is answered as an unknown one."""
        if not self.bread.serves(agent_id):
            raise BreadError(AGENT_NOT_FOUND, f"no agent {agent_id!r}")
        return agent_id

    def pipeline(self, pipeline_id: str) -> Response:
        req = _run_body(PipelineRunBody)
        return self._start(
            _reported_id(req),
            req.webhook,
            lambda token: self.bread.run_pipeline(
                pipeline_id,
                req.input,
                session=_session(req),
                run_id=req.runId,
                signal=token,
                after=req.after,
                may_read_file=may_read_file,
            ),
        )

    def resume(self, checkpoint_id: str) -> Response:
        req = valid_body(ResumeBody)
        # Looked up as the caller may know it, before the continuation claims it: another
        # caller's checkpoint fails to start exactly as an unknown one does.
        checkpoint = reachable_checkpoint(self.bread.store, checkpoint_id)
        run_id = checkpoint["runId"] if checkpoint else None

        def begin(token: Any) -> Any:
            if checkpoint is None:
                raise BreadError(CHECKPOINT_NOT_FOUND, f"no checkpoint {checkpoint_id}")
            return self.bread.resume(checkpoint_id, req.response, signal=token, may_interrupt=may_reach_run)

        return self._start(lambda: run_id, req.webhook, begin)

    def _start(
        self, failed_id: Callable[[], str | None], webhook: WebhookRef | None, begin: Callable[[Any], Any]
    ) -> Any:
        """Start a run with ``begin`` and stream it, or with ``Prefer: respond-async`` answer
        202 at once; ``failed_id()`` is the run id a failure to start reports (made only then:
        a run that starts has its own). A webhook is checked before the run, and subscribed
        once it exists."""
        check_webhook(webhook)
        background = prefers_async()
        try:
            if background:
                run, frames = start_run_detached(begin), None
            else:
                run, frames = start_run_stream(begin, heartbeat=self.transport.heartbeat)
        except BreadError as error:
            run_id = failed_id()
            if background:  # nothing was created: a JSON error, at its status
                raise
            # Nothing was created: the failure is the whole stream, at HTTP 200.
            return self._response(iter([self.wire.failure(error, run_id or "")]), run_id)
        subscribe_webhook(run.run_id, webhook)
        if background:
            return accepted(run.run_id)
        return self._response(self._frames(frames, self.wire), run.run_id)

    def passive(self, run_id: str) -> Response:
        after = stream_position()
        if followed_run(run_id, after) is None:
            return Response(status=204)
        frames = client_tail(run_id, after, heartbeat=self.transport.heartbeat)
        # An EventSource names text/event-stream: it gets SSE whatever the configured wire.
        wire = SSE if accepts("text/event-stream") else self.wire
        return stream_response(self._frames(frames, wire, passive=True), wire.content_type, run_id)

    def cancel(self, run_id: str) -> Any:
        authorize_run(run_id)
        if not self.bread.cancel(run_id):
            raise BreadError(RUN_NOT_FOUND, f"no live or paused run {run_id}")
        return {"ok": True, "runId": run_id}

    def _frames(self, lists: Iterator[Any], wire: Wire, passive: bool = False) -> Iterator[bytes]:
        """The response body: one chunk per event, in ``wire``'s format (a passive stream's
        with the wire's prelude)."""
        writing = _writing(wire)
        return stream_body(
            lists,
            writing.encode,
            heartbeat=wire.heartbeat,
            behind=wire.behind,
            prelude=writing.prelude if passive else (),
            failure=writing.failure,
        )

    def _response(self, body: Iterator[bytes], run_id: str | None) -> Response:
        return stream_response(body, self.wire.content_type, run_id)


class _Writing:
    """How a stream is written in one wire, made once per wire: each of thousands of idle
    streams holds its two callables, not closures, bound methods and a prelude of its own."""

    __slots__ = ("encode", "failure", "prelude")

    def __init__(self, wire: Wire):
        self.encode: Callable[[list[Any]], list[bytes]] = functools.partial(_encode_all, wire)
        self.failure: Callable[[BreadError], list[bytes]] = functools.partial(_failure, wire)
        self.prelude = (wire.passive_prelude,) if wire.passive_prelude else ()


@functools.cache
def _writing(wire: Wire) -> _Writing:
    return _Writing(wire)


def _encode_all(wire: Wire, items: list[Any]) -> list[bytes]:
    # Most items are deltas, which the wire encodes alone (no error sidecar).
    crumb = wire.crumb
    return [crumb(item) if is_delta_frame(item) else _encode(wire, item) for item in items]


def _failure(wire: Wire, error: BreadError) -> list[bytes]:
    return [wire.failure(error, "")]


def _encode(wire: Wire, item: Frame | Gap) -> bytes:
    return wire.gap(item.earliest_seq, "") if item.__class__ is Gap else wire.frame(item)


def _run_body(model: type[RunBodies]) -> RunBodies:
    """A run request's body, whose ``runId``, when it gives one, the run-ownership hook allows
    this caller, new or not: before anything is looked up or written, so a refusal says nothing of
    whether the run exists, and no caller starts a run under an id that names another's (which
    the other's request with that id would then attach to)."""
    req = valid_body(model)
    if req.runId is not None:
        authorize_run(req.runId)
    return req


def _reported_id(req: RunBody | PipelineRunBody) -> Callable[[], str]:
    # A failure to start reports the client's runId, else an id made then: a run that starts has its own.
    return lambda: req.runId or new_id("run")


def _session(req: RunBody | PipelineRunBody) -> dict[str, Any] | None:
    return req.session.model_dump(exclude_none=True) if req.session else None
