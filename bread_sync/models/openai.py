"""The ``openai`` provider: any OpenAI-compatible chat-completions endpoint, streamed.

OpenAI, Azure, vLLM, Ollama, llama.cpp, LM Studio, OpenRouter, ... through the official ``openai``
client (the ``openai`` extra). ``"openai:<model>"`` reads ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``; ``provider(model=..., base_url=...)`` gives an agent its own endpoint.

Each turn opens a client and closes it when the turn ends: a ``"provider:model"`` name builds a
provider per turn, so a pooled client could never be closed (pass ``client=`` to reuse one; you
own it). Tool arguments that are not JSON reach the runtime as their raw text. A cancel shuts the
response's socket down, which wakes a read blocked in another thread (closing it would not);
one that comes before the response headers takes effect once they do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import (
    FileInput,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    ToolSpec,
    Usage,
)
from .sdk import (
    Failure,
    StainlessProvider,
    arguments_text,
    attached,
    base64_text,
    detail_of,
    error_type_of,
    interrupt,
    new_call_id,
    parse_arguments,
    status_failure,
    text_part,
)


class OpenAIProvider(StainlessProvider):
    """Streams chat completions. ``timeout`` bounds each network wait (a number of seconds, with
    connecting capped at 5 s, or an ``openai.Timeout``); ``max_retries`` is the client library's
    retry count for failed requests (429, 5xx, dropped connections); ``params`` (``temperature``,
    ``max_tokens``, a server's own keys) are merged into every request body."""

    name = "openai"
    sdk_module, client_class = "openai", "OpenAI"

    def _from_environment(self) -> tuple[str | None, str | None]:
        return os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.OpenAIError, json.JSONDecodeError)

    def _turn(self, client: Any, model: str, request: ModelRequest) -> Iterator[ModelEvent]:
        chunks = client.chat.completions.create(
            model=model, messages=to_messages(request), stream=True, **self._options(request)
        )
        undo = request.signal.on_cancel(lambda: interrupt(chunks.response, chunks.close))
        try:
            yield from _events(chunks)
        finally:
            undo()
            chunks.close()

    def _options(self, request: ModelRequest) -> dict[str, Any]:
        # the API then sends the call's token counts in a last chunk with no choices
        options: dict[str, Any] = {"stream_options": {"include_usage": True}}
        if request.tools:
            options["tools"] = [_tool(spec) for spec in request.tools]
        if request.output_format == "json":
            options["response_format"] = {"type": "json_object"}
        if request.trace_headers:
            options["extra_headers"] = request.trace_headers
        if self.params:
            # extra_body passes keys the client library does not know (a server's own) as well
            options["extra_body"] = self.params
        return options

    def _failure(self, exc: Exception) -> Failure:
        openai = self._sdk
        if isinstance(exc, openai.APIStatusError):
            what = f"the model provider answered HTTP {exc.status_code}"
            return status_failure(what, exc, exc.status_code, error_type_of(exc.body), exc.response.headers)
        if isinstance(exc, openai.APITimeoutError):
            return Failure("the model provider timed out", type(exc).__name__, network=True)
        if isinstance(exc, openai.APIConnectionError):
            return Failure("the connection to the model provider failed", type(exc).__name__, network=True)
        if isinstance(exc, json.JSONDecodeError):
            return Failure("the model provider sent a malformed stream", type(exc).__name__)
        body = getattr(exc, "body", None)  # an error inside the stream
        what = "the model provider reported an error"
        return Failure(what, type(exc).__name__, error_type=error_type_of(body), detail=detail_of(body))


def provider(model: str | None = None, **opts: Any) -> OpenAIProvider:
    """An :class:`OpenAIProvider`; see it for the options."""
    return OpenAIProvider(model, **opts)


# -- request -----------------------------------------------------------------------------------


def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The runtime's messages as OpenAI chat messages, the system prompt first."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    return messages + [_message(m, request) for m in request.messages]


def _message(message: dict[str, Any], request: ModelRequest) -> dict[str, Any]:
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": message["toolCallId"], "content": message["content"]}
    if message["role"] == "assistant" and message.get("toolCalls"):
        return {
            "role": "assistant",
            "content": message["content"] or None,
            "tool_calls": [_tool_call(call) for call in message["toolCalls"]],
        }
    if message.get("files"):
        parts = [_file_part(media_type, file) for media_type, file in attached(message, request)]
        return {"role": message["role"], "content": parts + text_part(message)}
    return {"role": message["role"], "content": message["content"]}


def _file_part(media_type: str, file: FileInput) -> dict[str, Any]:
    """An image as an ``image_url`` part, anything else (a PDF) as a ``file`` part: data URLs."""
    url = f"data:{media_type};base64,{base64_text(file.data)}"
    if media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": file.name or "file", "file_data": url}}


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = arguments_text(call["input"])  # the model gets back exactly what it sent
    return {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": arguments}}


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function = {"name": spec.name, "parameters": spec.parameters}
    if spec.description:
        function["description"] = spec.description
    return {"type": "function", "function": function}


# -- response ----------------------------------------------------------------------------------


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False
    sent: int = 0  # how much of ``arguments`` went out as deltas


def _events(chunks: Any) -> Iterator[ModelEvent]:
    calls: dict[int, _PendingCall] = {}
    used = None
    for chunk in chunks:
        used = getattr(chunk, "usage", None) or used
        for choice in chunk.choices:  # empty on a usage-only or content-filter chunk
            delta = choice.delta
            if delta is None:
                continue
            # a server's own field (DeepSeek, vLLM, llama.cpp: reasoning_content; OpenRouter, Ollama: reasoning)
            reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
            if isinstance(reasoning, str) and reasoning:
                yield ReasoningDelta(reasoning)
            if delta.content:
                yield TextDelta(delta.content)
            for part in delta.tool_calls or ():
                yield from _tool_part(calls.setdefault(part.index, _PendingCall()), part)
    for index in sorted(calls):
        call = calls[index]
        yield ToolCall(call.id or new_call_id(), call.name, parse_arguments(call.arguments))
    if used is not None:
        yield Usage(used.prompt_tokens or 0, used.completion_tokens or 0)


def _tool_part(call: _PendingCall, part: Any) -> Iterator[ModelEvent]:
    function = part.function
    call.id = call.id or part.id or ""
    call.name = call.name or (function and function.name) or ""
    call.arguments += (function and function.arguments) or ""
    if not call.name:
        return  # a server may name the call after its first fragment: hold the arguments
    if not call.started:
        call.id = call.id or new_call_id()
        call.started = True
        yield ToolInputStart(call.id, call.name)
    if len(call.arguments) > call.sent:
        yield ToolInputDelta(call.id, call.arguments[call.sent :])
        call.sent = len(call.arguments)
