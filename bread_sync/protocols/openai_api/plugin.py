"""The plugin: :func:`openai_api`, the served agents behind OpenAI-compatible routes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from flask import Response, g, jsonify, request

from ...clock import now_iso
from ...crumbs import Frame, error_crumb
from ...errors import AGENT_NOT_FOUND, INVALID_REQUEST, BreadError
from ...runtime import new_id
from ...server import authorize_run, register_http_route, start_run_stream, stream_body, stream_response
from ...server.guard import Forbidden, json_body, may_reach_run
from ...wire import SSE_BEHIND_FOR_GOOD
from ..answers import paused_run, text_answer
from .requests import Turn, chat_turn, responses_turn
from .translator import DONE, ChatCompletionsTranslator, ResponsesTranslator, error_object

log = logging.getLogger("bread_sync.protocols.openai_api")

DEFAULT_PATH = "/v1"
#: The request header that names a bread session, and the response header that names the run's.
SESSION_HEADER = "Bread-Session-Id"
SSE = "text/event-stream; charset=utf-8"
#: An SSE comment: the OpenAI clients skip it, proxies see the stream is alive.
HEARTBEAT = b": ping\n\n"
#: Who ``GET /v1/models`` says owns the models.
OWNER = "bread_sync"

SessionAuthorizer = Callable[[Any, str], bool]


class OPENAI_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    models = "openai.models"
    chat = "openai.chat"
    responses = "openai.responses"


def openai_api(
    path: str = DEFAULT_PATH,
    agents: Iterable[Any] | None = None,
    authorize_session: SessionAuthorizer | None = None,
) -> OpenAiPlugin:
    """The OpenAI-compatible plugin, for ``Config.plugins``: agents as models.

    Serves ``GET path/models`` and ``GET path/models/<model>`` (action ``openai.models``),
    ``POST path/chat/completions`` (``openai.chat``) and ``POST path/responses``
    (``openai.responses``), streaming and not; a request's ``model`` is an agent's id.
    ``agents``: the ids (or the objects) to serve; None serves the instance's own agents of
    those it serves (``Bread.served_agents``). ``authorize_session(identity, session_id)`` must
    return True for a request's ``Bread-Session-Id``, else 403; without it any caller who knows
    a session id may continue that session. See docs/http.md.
    """
    ids = None if agents is None else [getattr(each, "id", each) for each in agents]
    return OpenAiPlugin(path.rstrip("/"), ids, authorize_session)


@dataclass(frozen=True)
class _Api:
    """What sets the two APIs apart: how a body reads, and how an answer is written."""

    read: Callable[[dict[str, Any]], Turn]
    translator: Callable[[Turn, str, str], Any]
    whole: Callable[[Any], dict[str, Any]]
    epilogue: tuple[bytes, ...]


def _chat_translator(turn: Turn, run_id: str, session_id: str) -> ChatCompletionsTranslator:
    return ChatCompletionsTranslator(
        new_id("chatcmpl"), turn.agent_id, int(time.time()), turn.include_usage, run_id, session_id
    )


def _responses_translator(turn: Turn, run_id: str, session_id: str) -> ResponsesTranslator:
    instructions = "\n\n".join(turn.instructions) or None
    return ResponsesTranslator(new_id("resp"), turn.agent_id, int(time.time()), run_id, session_id, instructions)


CHAT = _Api(chat_turn, _chat_translator, lambda t: t.completion(), (DONE,))
RESPONSES = _Api(responses_turn, _responses_translator, lambda t: t.response(), ())


class OpenAiPlugin:
    """See :func:`openai_api`."""

    name = "openai_api"

    def __init__(self, path: str, agents: list[str] | None, authorize_session: SessionAuthorizer | None):
        self.path, self.agents, self.authorize_session = path, agents, authorize_session

    def routes(self, blueprint: Any, bread: Any) -> None:
        register_http_route(blueprint, "GET", f"{self.path}/models", OPENAI_ACTIONS.models, lambda: self._models(bread))
        register_http_route(
            blueprint,
            "GET",
            f"{self.path}/models/<model>",
            OPENAI_ACTIONS.models,
            lambda model: self._model(bread, model),
            statuses=(404,),
        )
        for suffix, action, api in (("chat/completions", OPENAI_ACTIONS.chat, CHAT),
                                    ("responses", OPENAI_ACTIONS.responses, RESPONSES)):  # fmt: skip
            register_http_route(
                blueprint,
                "POST",
                f"{self.path}/{suffix}",
                action,
                lambda api=api: self._serve(bread, api),
                statuses=(400, 404, 409, 503),
            )

    # -- models -------------------------------------------------------------------------------

    def served(self, bread: Any) -> list[str]:
        """The ids of the agents served as models, in order."""
        # A remote agent is another server's: its pauses and sessions are not this one's to answer.
        own = [served.id for served in bread.served_agents() if not served.remote]
        return own if self.agents is None else [agent for agent in self.agents if agent in own]

    def _models(self, bread: Any) -> Response:
        return jsonify(object="list", data=[_model(agent_id) for agent_id in self.served(bread)])

    def _model(self, bread: Any, model: str) -> Any:
        try:
            self._check_model(bread, model)
        except BreadError as error:
            return error_response(error)
        return jsonify(_model(model))

    def _check_model(self, bread: Any, model: str) -> None:
        if model not in self.served(bread):
            message = f"no model {model!r}: GET {self.path}/models lists them"
            raise BreadError(AGENT_NOT_FOUND, message, {"param": "model"})

    # -- answers ------------------------------------------------------------------------------

    def _serve(self, bread: Any, api: _Api) -> Any:
        try:
            turn = api.read(json_body())
            self._check_model(bread, turn.agent_id)
            session_id, begin = self._begin(bread, turn)
            heartbeat = getattr(bread.transport, "heartbeat", None)
            run, frames = start_run_stream(begin, heartbeat=heartbeat, to_client=turn.stream)
        except BreadError as error:  # no run exists
            return error_response(error)
        translator = api.translator(turn, run.run_id, session_id)
        if turn.stream:
            response = stream_response(_stream(api, frames, translator, run.run_id), SSE, run.run_id)
        else:
            _read_to_end(frames, translator)
            if translator.error is not None:
                error = BreadError(translator.error["code"], translator.error["message"])
                return error_response(error, run.run_id, session_id)
            response = jsonify(api.whole(translator))
            response.headers["Bread-Run-Id"] = run.run_id
        response.headers[SESSION_HEADER] = session_id
        return response

    def _begin(self, bread: Any, turn: Turn) -> tuple[str, Callable[[Any], Any]]:
        """The session the turn is on and how its run begins: on a named session, the answer to
        the session's paused run of this agent or a new run on the session's history; else a
        new run on a new session holding the request's history."""
        context = [{"description": "the client's instructions", "value": text} for text in turn.instructions]
        named = request.headers.get(SESSION_HEADER)
        if named is None:
            session_id, history = new_id("ses"), turn.history
        else:
            session_id, history = self._named_session(named), []
            paused = paused_run(bread, session_id, turn.agent_id)
            if paused is not None:
                authorize_run(paused["id"])
                checkpoint = bread.store.get_checkpoint(paused["checkpointId"])
                answer = text_answer(turn.text, checkpoint["kind"])
                return session_id, lambda token: bread.resume(
                    checkpoint["id"], answer, signal=token, may_interrupt=may_reach_run, context=context
                )

        def begin(token: Any) -> Any:
            if history:  # written once a run slot is had: a refused request leaves no session
                _hold_history(bread, session_id, history)
            return bread.run(
                turn.agent_id, turn.text, session={"id": session_id}, signal=token,
                may_interrupt=may_reach_run, context=context,
            )  # fmt: skip

        return session_id, begin

    def _named_session(self, named: str) -> str:
        session_id = named.strip()
        if not session_id:
            raise BreadError(INVALID_REQUEST, f"{SESSION_HEADER} must not be empty")
        self._check_session(session_id)
        return session_id

    def _check_session(self, session_id: str) -> None:
        # Only True allows, as with every authorizer: one that forgets to return denies.
        hook = self.authorize_session
        if hook is not None and hook(g.get("bread_identity"), session_id) is not True:
            raise Forbidden()


def _model(agent_id: str) -> dict[str, Any]:
    return {"id": agent_id, "object": "model", "created": 0, "owned_by": OWNER}


def _hold_history(bread: Any, session_id: str, history: list[dict[str, str]]) -> None:
    """The conversation the client holds, as the new session's history: the run reads it as the
    turns before its own."""
    at = now_iso()
    bread.store.touch_session(session_id, {"source": "openai"})
    bread.store.append_messages(session_id, [{**message, "at": at} for message in history])


def _read_to_end(frames: Iterator[Any], translator: Any) -> None:
    """Feed the run's crumbs to ``translator`` to its end or pause; closes the tail."""
    with closing(frames):  # type: ignore[type-var]
        for items in frames:
            for item in items or ():
                if item.__class__ is Frame:
                    translator(item.crumb)


def _stream(api: _Api, frames: Iterator[Any], translator: Any, run_id: str) -> Iterator[bytes]:
    """The SSE body: each crumb's chunks, then the API's end. The run is driven elsewhere."""

    def encode_all(items: list[Any]) -> list[bytes]:
        chunks: list[bytes] = []
        for item in items:
            if item.__class__ is not Frame:
                log.warning("OpenAI stream of run %s: frames before seq %s are gone", run_id, item.earliest_seq)
                continue
            chunks += translator.frames(item.crumb)
        return chunks

    return stream_body(
        frames,
        encode_all,
        heartbeat=HEARTBEAT,
        failure=lambda error: [translator.frame(chunk) for chunk in translator(error_crumb(run_id, error))],
        epilogue=lambda: api.epilogue,
        behind=SSE_BEHIND_FOR_GOOD,
        name=f"OpenAI stream of run {run_id}",
    )


def error_response(error: BreadError, run_id: str | None = None, session_id: str | None = None) -> Response:
    """``error`` as OpenAI's error body, at its HTTP status. Once a run existed, the OpenAI
    clients are told not to retry (``x-should-retry: false``): a retry would start another."""
    param = error.context.get("param")
    body = {"error": error_object(error.code, error.message, error.status, param if isinstance(param, str) else None)}
    response = jsonify(body)
    response.status_code = error.status
    if run_id is not None:
        response.headers.update({"Bread-Run-Id": run_id, SESSION_HEADER: session_id or "", "x-should-retry": "false"})
    return response
