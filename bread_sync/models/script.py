"""The ``script`` provider: plays steps written in Python. Deterministic, no network.

The reference model of the tests and the demo agents::

    script.provider([say("Drafting."), call("publish", {"title": "bread"}),
                     lambda convo: say("Published." if convo.last_tool_ok else "Not published.")])

A step is ``say``, ``call``, ``file``, ``usage`` or a callable of the :class:`Conversation` that returns steps
(or None). A model turn plays steps up to and including a run of ``call`` steps; the next turn
continues from there; a ``usage`` step reports the tokens the turn it ends used. The position
lives in ``request.state``, so a checkpoint carries it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import (
    FileOutput,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    Usage,
)

_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class say:  # noqa: N801 - reads as a verb in a script
    """Stream text: a string is split into words, a list is streamed chunk by chunk."""

    text: str | Sequence[str]
    delay: float = 0.0

    def chunks(self) -> list[str]:
        return _WORDS.findall(self.text) if isinstance(self.text, str) else list(self.text)


@dataclass(frozen=True)
class think(say):  # noqa: N801
    """Stream reasoning (``reasoning:delta``), as a model that thinks before it answers."""


@dataclass(frozen=True)
class call:  # noqa: N801
    """Call a tool with this input; streams the input as ``tool:input:*`` first."""

    tool: str
    input: Any
    id: str | None = None


@dataclass(frozen=True)
class file:  # noqa: N801
    """Emit a generated file (stored through the blob store, announced as ``file:generated``)."""

    data: bytes
    mime_type: str
    name: str | None = None


@dataclass(frozen=True)
class usage:  # noqa: N801
    """Report the tokens this turn used, as a real provider does at the end of its stream."""

    input_tokens: int
    output_tokens: int


Step = say | call | file | usage | Callable[["Conversation"], Any]


class Conversation:
    """What a callable step sees: the run's input and the messages so far."""

    def __init__(self, request: ModelRequest):
        self.input = request.input
        self.messages = request.messages

    @property
    def last_tool_message(self) -> dict[str, Any] | None:
        return next((m for m in reversed(self.messages) if m["role"] == "tool"), None)

    @property
    def last_tool_ok(self) -> bool:
        message = self.last_tool_message
        return message is not None and not message.get("error")

    @property
    def last_tool_output(self) -> Any:
        message = self.last_tool_message
        return None if message is None else json.loads(message["content"])


class ScriptProvider:
    name = "script"

    def __init__(self, steps: Sequence[Step]):
        self.steps = list(steps)

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        if request.signal.cancelled:
            return  # as any provider: a call cancelled before it began plays nothing
        convo = Conversation(request)
        called = False
        while (position := request.state.get("step", 0)) < len(self.steps):
            step = self.steps[position]
            if called and not isinstance(step, call | usage):
                return  # the turn ends after its tool calls; the next turn resumes here
            for k, played in enumerate(_expand(step, convo)):
                yield from _play(played, request, f"call_{position}_{k}")
                called = called or isinstance(played, call)
            request.state["step"] = position + 1

    def __repr__(self) -> str:
        return f"script({len(self.steps)} steps)"


def _expand(step: Step, convo: Conversation) -> list[say | call | file | usage]:
    if isinstance(step, say | call | file | usage):
        return [step]
    produced = step(convo)
    if produced is None:
        return []
    return list(produced) if isinstance(produced, list | tuple) else [produced]


def _play(step: say | call | file | usage, request: ModelRequest, default_id: str) -> Iterator[ModelEvent]:
    if isinstance(step, usage):
        yield Usage(step.input_tokens, step.output_tokens)
        return
    if isinstance(step, file):
        yield FileOutput(step.data, step.mime_type, step.name)
        return
    if isinstance(step, say):
        delta = ReasoningDelta if isinstance(step, think) else TextDelta
        for i, chunk in enumerate(step.chunks()):
            if i and step.delay and request.signal.wait(step.delay):
                return
            yield delta(chunk)
        return
    call_id = step.id or default_id
    arguments = json.dumps(step.input)
    yield ToolInputStart(call_id, step.tool)
    yield ToolInputDelta(call_id, arguments)
    yield ToolCall(call_id, step.tool, step.input)


def provider(steps: Sequence[Step] = ()) -> ScriptProvider:
    return ScriptProvider(steps)
