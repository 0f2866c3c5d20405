"""The ``anthropic`` provider: Claude through the Messages API, streamed.

Built on the official ``anthropic`` client (the ``anthropic`` extra), synchronous (its httpx
sockets are cooperative under gevent). ``"anthropic:<model>"`` reads ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL``; ``provider(model=..., base_url=..., params=...)`` gives an agent its own.
Extended thinking is asked for with ``params={"thinking": {"type": "enabled", "budget_tokens":
N}}`` (``max_tokens`` above it): the thinking streams as ``reasoning:delta``, and its signed
blocks are kept in the turn's ``state`` and sent back only within the tool loop that made them,
as the API requires (the runtime's messages never carry thinking).

Each turn opens a client and closes it when the turn ends, as the ``openai`` provider does (pass
``client=`` to reuse one; you own it). A cancel shuts the response's socket down.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
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
    attached,
    base64_text,
    error_type_of,
    interrupt,
    parse_arguments,
    status_failure,
    text_part,
)

#: The Messages API needs a bound on the answer; ``params={"max_tokens": ...}`` sets another.
DEFAULT_MAX_TOKENS = 4096
#: Where ``request.state`` keeps the signed thinking blocks of the tool loop under way, by the
#: id of the first tool call of the turn that thought them.
THINKING_STATE = "anthropicThinking"


class AnthropicProvider(StainlessProvider):
    """Streams Claude messages. ``timeout``, ``max_retries`` and ``client`` as the ``openai``
    provider's; ``params`` (``max_tokens``, ``temperature``, ``thinking``, ...) are merged into
    every request body."""

    name = "anthropic"
    sdk_module, client_class = "anthropic", "Anthropic"

    def _from_environment(self) -> tuple[str | None, str | None]:
        return os.environ.get("ANTHROPIC_BASE_URL"), os.environ.get("ANTHROPIC_API_KEY")

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.AnthropicError,)

    def _turn(self, client: Any, model: str, request: ModelRequest) -> Iterator[ModelEvent]:
        messages = to_messages(request)
        events = client.messages.create(model=model, messages=messages, stream=True, **self._options(request))
        undo = request.signal.on_cancel(lambda: interrupt(events.response, events.close))
        try:
            yield from _Turn(request.state).events(events)
        finally:
            undo()
            events.close()

    def _options(self, request: ModelRequest) -> dict[str, Any]:
        params = dict(self.params)
        options: dict[str, Any] = {"max_tokens": params.pop("max_tokens", DEFAULT_MAX_TOKENS)}
        if request.system:
            options["system"] = request.system
        if request.tools:
            options["tools"] = [_tool(spec) for spec in request.tools]
        if request.trace_headers:
            options["extra_headers"] = request.trace_headers
        if params:
            options["extra_body"] = params  # keys the client library may not know pass as well
        return options

    def _failure(self, exc: Exception) -> Failure:
        sdk = self._sdk
        kind = type(exc).__name__
        if isinstance(exc, sdk.APIStatusError):
            error_type = error_type_of(exc.body)
            if exc.status_code == 200:  # an error event inside the stream
                return status_failure("the model provider failed mid-stream", exc, 200, error_type, None)
            what = f"the model provider answered HTTP {exc.status_code}"
            return status_failure(what, exc, exc.status_code, error_type, exc.response.headers)
        if isinstance(exc, sdk.APITimeoutError):
            return Failure("the model provider timed out", kind, network=True)
        if isinstance(exc, sdk.APIConnectionError):
            return Failure("the connection to the model provider failed", kind, network=True)
        return Failure("the model provider reported an error", kind, detail=str(exc)[:300])


def provider(model: str | None = None, **opts: Any) -> AnthropicProvider:
    """An :class:`AnthropicProvider`; see it for the options."""
    return AnthropicProvider(model, **opts)


# -- request -----------------------------------------------------------------------------------


def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The runtime's messages as Anthropic messages: a turn's tool results in one user message,
    the signed thinking of the tool loop under way before its tool calls."""
    thinking = request.state.get(THINKING_STATE) or {}
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role, content = _message(message, thinking, request)
        if messages and messages[-1]["role"] == role and role == "user" and message["role"] == "tool":
            messages[-1]["content"].extend(content)  # the API wants a turn's results together
        else:
            messages.append({"role": role, "content": content})
    return messages


def _message(message: dict[str, Any], thinking: Mapping[str, list[Any]], request: ModelRequest) -> tuple[str, Any]:
    if message["role"] == "tool":
        result = {"type": "tool_result", "tool_use_id": message["toolCallId"], "content": message["content"]}
        if message.get("error"):
            result["is_error"] = True
        return "user", [result]
    calls = message.get("toolCalls")
    if message["role"] == "assistant" and calls:
        blocks = list(thinking.get(calls[0]["id"], ()))
        if message["content"]:
            blocks.append({"type": "text", "text": message["content"]})
        blocks += [_tool_use(call) for call in calls]
        return "assistant", blocks
    if message.get("files"):
        blocks = [_file_block(media_type, file) for media_type, file in attached(message, request)]
        return message["role"], blocks + text_part(message)
    return message["role"], message["content"]


def _file_block(media_type: str, file: FileInput) -> dict[str, Any]:
    """An image as an ``image`` block, anything else (a PDF) as a ``document`` block: base64."""
    source = {"type": "base64", "media_type": media_type, "data": base64_text(file.data)}
    return {"type": "image" if media_type.startswith("image/") else "document", "source": source}


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    value = call["input"]
    # the API takes an object: arguments that were not JSON go back wrapped, as text
    tool_input = value if isinstance(value, dict) else {"arguments": value}
    return {"type": "tool_use", "id": call["id"], "name": call["name"], "input": tool_input}


def _tool(spec: ToolSpec) -> dict[str, Any]:
    tool = {"name": spec.name, "input_schema": spec.parameters}
    if spec.description:
        tool["description"] = spec.description
    return tool


# -- response ----------------------------------------------------------------------------------


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    text: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""


class _Turn:
    """Reads one streamed message into model events; keeps its signed thinking in ``state``."""

    def __init__(self, state: dict[str, Any]):
        self.state = state
        self.blocks: dict[int, _Block] = {}
        self.input_tokens = self.output_tokens = 0
        self.calls: list[str] = []

    def events(self, stream: Any) -> Iterator[ModelEvent]:
        for event in stream:
            yield from self._read(event)
        self._keep_thinking()
        yield Usage(self.input_tokens, self.output_tokens)

    def _read(self, event: Any) -> Iterator[ModelEvent]:
        kind = event.type
        if kind == "message_start":
            self._count(event.message.usage)
        elif kind == "message_delta":
            self._count(event.usage)
        elif kind == "content_block_start":
            yield from self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(self.blocks[event.index], event.delta)
        elif kind == "content_block_stop":
            yield from self._stop(self.blocks[event.index])

    def _count(self, usage: Any) -> None:
        if usage is None:
            return
        # cumulative counts: the last one seen is the call's; cached input is input all the same
        inputs = [getattr(usage, name, None) for name in ("input_tokens", "cache_creation_input_tokens")]
        inputs.append(getattr(usage, "cache_read_input_tokens", None))
        if any(value is not None for value in inputs):
            self.input_tokens = max(self.input_tokens, sum(value or 0 for value in inputs))
        self.output_tokens = getattr(usage, "output_tokens", None) or self.output_tokens

    def _start(self, index: int, content: Any) -> Iterator[ModelEvent]:
        block = self.blocks[index] = _Block(content.type)
        if content.type == "tool_use":
            block.id, block.name = content.id, content.name
            self.calls.append(block.id)
            yield ToolInputStart(block.id, block.name)
        elif content.type == "redacted_thinking":
            block.data = content.data
        elif content.type == "text" and content.text:
            yield TextDelta(content.text)
        elif content.type == "thinking" and content.thinking:
            block.text.append(content.thinking)
            yield ReasoningDelta(content.thinking)

    def _delta(self, block: _Block, delta: Any) -> Iterator[ModelEvent]:
        kind = delta.type
        if kind == "text_delta":
            yield TextDelta(delta.text)
        elif kind == "input_json_delta":
            if delta.partial_json:
                block.text.append(delta.partial_json)
                yield ToolInputDelta(block.id, delta.partial_json)
        elif kind == "thinking_delta":
            block.text.append(delta.thinking)
            yield ReasoningDelta(delta.thinking)
        elif kind == "signature_delta":
            block.signature += delta.signature

    def _stop(self, block: _Block) -> Iterator[ModelEvent]:
        if block.type == "tool_use":
            yield ToolCall(block.id, block.name, parse_arguments("".join(block.text)))

    def _keep_thinking(self) -> None:
        """The signed thinking goes back with this turn's tool calls, for as long as their loop
        lasts: a turn with no call ends the loop, and the API needs none of it after."""
        if not self.calls:
            self.state.pop(THINKING_STATE, None)
            return
        thinking = [_thinking_block(b) for b in self.blocks.values() if b.type in ("thinking", "redacted_thinking")]
        if thinking:
            self.state.setdefault(THINKING_STATE, {})[self.calls[0]] = thinking


def _thinking_block(block: _Block) -> dict[str, Any]:
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return {"type": "thinking", "thinking": "".join(block.text), "signature": block.signature}
