"""The plugin: :func:`ai_sdk`, one agent behind the AI SDK's chat transport."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

from flask import Response, g, jsonify

from ... import crumbs as c
from ...crumbs import Frame, error_crumb
from ...errors import CHECKPOINT_ALREADY_RESUMED, CHECKPOINT_NOT_FOUND, BreadError
from ...server import (
    authorize_run,
    client_tail,
    followed_run,
    register_http_route,
    start_run_stream,
    stream_body,
    stream_response,
)
from ...server.guard import Forbidden, json_body, may_reach_run
from ...wire import SSE_BEHIND
from ..answers import latest_runs, paused_run
from .requests import ChatRequest, answer, chat_request, turn_text
from .translator import DONE, UiMessageStreamTranslator, sse

log = logging.getLogger("bread_sync.protocols.ai_sdk")

CONTENT_TYPE = "text/event-stream"
#: The header that tells the AI SDK which stream protocol the response speaks.
PROTOCOL_HEADER = ("x-vercel-ai-ui-message-stream", "v1")
#: An SSE comment: the SDK's parser skips it, proxies see the stream is alive.
HEARTBEAT = b": ping\n\n"
#: A chat's runs a resumed stream follows and a stop cancels.
ACTIVE = ("running", "queued")

ThreadAuthorizer = Callable[[Any, str], bool]


class AI_SDK_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    chat = "ai_sdk.chat"
    #: The resumed stream, GET <path>/<chatId>/stream.
    stream = "ai_sdk.stream"
    #: POST <path>/<chatId>/stop.
    stop = "ai_sdk.stop"


def ai_sdk(agent_id: str, path: str | None = None, authorize_thread: ThreadAuthorizer | None = None) -> AiSdkPlugin:
    """The AI SDK plugin, for ``Config.plugins``: the agent ``agent_id`` for ``useChat``.

    ``POST path`` (action ``ai_sdk.chat``, ``path`` by default ``/ai-sdk/<agent_id>``) takes what
    ``DefaultChatTransport`` sends and answers a UI message stream: its last message is the new
    turn, or the answer to the chat's pause (a tool approval, or an input tool's output). ``GET
    path/<chatId>/stream`` (``ai_sdk.stream``) replays the chat's running run, then follows it
    (``useChat({resume: true})``); 204 when none runs. ``POST path/<chatId>/stop``
    (``ai_sdk.stop``) cancels it. ``authorize_thread(identity, chat_id)`` must return True for
    the chat id (bread's session id), else 403; without it any caller who knows a chat id may
    continue that chat. See docs/http.md.
    """
    return AiSdkPlugin(agent_id, path or f"/ai-sdk/{agent_id}", authorize_thread)


class AiSdkPlugin:
    """See :func:`ai_sdk`."""

    name = "ai_sdk"

    def __init__(self, agent_id: str, path: str, authorize_thread: ThreadAuthorizer | None):
        self.agent_id, self.path, self.authorize_thread = agent_id, path.rstrip("/"), authorize_thread

    def routes(self, blueprint: Any, bread: Any) -> None:
        chat = "<chatId>"
        register_http_route(blueprint, "POST", self.path, AI_SDK_ACTIONS.chat, lambda: self._serve(bread),
                            statuses=(400, 404, 409, 503))  # fmt: skip
        register_http_route(blueprint, "GET", f"{self.path}/{chat}/stream", AI_SDK_ACTIONS.stream,
                            lambda chatId: self._follow(bread, chatId), statuses=(204,))  # fmt: skip
        register_http_route(blueprint, "POST", f"{self.path}/{chat}/stop", AI_SDK_ACTIONS.stop,
                            lambda chatId: self._stop(bread, chatId), statuses=(204,))  # fmt: skip

    def _check_thread(self, chat_id: str) -> None:
        # Only True allows, as with every authorizer: one that forgets to return denies.
        if self.authorize_thread is not None and self.authorize_thread(g.get("bread_identity"), chat_id) is not True:
            raise Forbidden()

    def _serve(self, bread: Any) -> Response:
        given = chat_request(json_body())
        self._check_thread(given.chat_id)
        begin = self._answer(bread, given) if given.answers else self._turn(bread, given)
        run, frames = start_run_stream(begin, heartbeat=getattr(bread.transport, "heartbeat", None))
        return _response(_stream(frames, run.run_id, self._ui_tools(bread)), run.run_id)

    def _ui_tools(self, bread: Any) -> frozenset[str]:
        """The input tools of this agent and of the subagents it may call: the UI answers them."""
        names: set[str] = set()
        seen, agents = set(), [self.agent_id]
        while agents:
            agent_id = agents.pop()
            seen.add(agent_id)
            # A remote agent is another server's: its tools are not this one's to list.
            for tool in getattr(bread.agents.get(agent_id), "tools", None) or []:
                if tool.kind == "input":
                    names.add(tool.name)
                elif tool.kind == "subagent" and tool.delegate not in seen:
                    agents.append(tool.delegate)
        return frozenset(names)

    def _turn(self, bread: Any, given: ChatRequest) -> Callable[[Any], Any]:
        text, session = turn_text(given.last), {"id": given.chat_id}
        return lambda token: bread.run(self.agent_id, text, session=session, signal=token, may_interrupt=may_reach_run)

    def _answer(self, bread: Any, given: ChatRequest) -> Callable[[Any], Any]:
        """How the chat's paused run continues with what the last message answers it. The
        checkpoint is read from the store, so any replica, before or after a restart, resumes
        it; its run must pass the run-ownership hook."""
        paused = paused_run(bread, given.chat_id, self.agent_id)
        if paused is None:
            raise BreadError(CHECKPOINT_NOT_FOUND, f"chat {given.chat_id} has no paused run for an answer")
        authorize_run(paused["id"])
        checkpoint = bread.store.get_checkpoint(paused["checkpointId"])
        if checkpoint is None or checkpoint["status"] != "pending":
            raise BreadError(CHECKPOINT_ALREADY_RESUMED, f"the pause of run {paused['id']} was already answered")
        response = answer(given.last, checkpoint)
        return lambda token: bread.resume(checkpoint["id"], response, signal=token, may_interrupt=may_reach_run)

    def _active_run(self, bread: Any, chat_id: str) -> str | None:
        self._check_thread(chat_id)
        active = latest_runs(bread, chat_id, self.agent_id, ACTIVE)
        return active[0]["id"] if active else None

    def _follow(self, bread: Any, chat_id: str) -> Response:
        """The chat's running run from its start (the SDK replaces the message it holds with
        the replay), then live, to its end or a pause that waits: 204 when none runs."""
        run_id = self._active_run(bread, chat_id)
        if run_id is None or followed_run(run_id, 0) is None:
            return Response(status=204)
        frames = client_tail(run_id, 0, heartbeat=getattr(bread.transport, "heartbeat", None))
        return _response(_stream(_to_waiting_pause(frames, bread.store), run_id, self._ui_tools(bread)), run_id)

    def _stop(self, bread: Any, chat_id: str) -> Response:
        """Cancel the chat's running run: ``{"cancelled": runId}``, 204 when none runs."""
        run_id = self._active_run(bread, chat_id)
        if run_id is None:
            return Response(status=204)
        authorize_run(run_id)
        if not bread.cancel(run_id):  # it ended meanwhile
            return Response(status=204)
        return jsonify(cancelled=run_id)


def _to_waiting_pause(frames: Iterator[Any], store: Any) -> Iterator[Any]:
    """A tail through the run's past pauses (answered: its log goes on) that ends at the pause
    that waits, as a live stream ends there."""
    with closing(frames):  # type: ignore[type-var]
        for items in frames:
            yield items
            for item in items or ():
                if item.__class__ is Frame and item.type == c.HUMAN_REQUIRED and _waits(store, item.crumb):
                    return


def _waits(store: Any, crumb: dict[str, Any]) -> bool:
    # The checkpoint is saved just after its crumb is sent: not there yet, it waits.
    checkpoint = store.get_checkpoint(crumb["checkpointId"])
    return checkpoint is None or checkpoint["status"] == "pending"


def _stream(frames: Iterator[Any], run_id: str, ui_tools: frozenset[str]) -> Iterator[bytes]:
    """The response body: each crumb's chunks as SSE frames, then ``[DONE]``. The run is driven
    elsewhere."""
    translator = UiMessageStreamTranslator(ui_tools)

    def encode_all(items: list[Any]) -> list[bytes]:
        chunks: list[bytes] = []
        for item in items:
            if item.__class__ is not Frame:
                log.warning("AI SDK stream of run %s: frames before seq %s are gone", run_id, item.earliest_seq)
                continue
            chunks += translator.frames(item.crumb)
        return chunks

    def failure(error: BreadError) -> list[bytes]:
        return [*(sse(chunk) for chunk in translator(error_crumb(run_id, error))), DONE]

    return stream_body(
        frames,
        encode_all,
        heartbeat=HEARTBEAT,
        failure=failure,
        epilogue=lambda: (DONE,),
        behind=SSE_BEHIND,
        name=f"AI SDK stream of run {run_id}",
    )


def _response(body: Iterator[bytes], run_id: str) -> Response:
    response = stream_response(body, CONTENT_TYPE, run_id)
    response.headers[PROTOCOL_HEADER[0]] = PROTOCOL_HEADER[1]
    return response
