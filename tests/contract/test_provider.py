"""The model-provider contract, over echo, script, openai, anthropic and google.

Each provider is given the same answer to play (its own wire, from a local server, for those
built on an SDK) and must yield the same events: text deltas that join into the answer, a tool
call streamed as ``ToolInputStart``, its ``ToolInputDelta``s (the JSON of its input) and the
``ToolCall``, at most one ``Usage`` after them, and nothing once cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from bread_sync import CancelToken
from bread_sync.models import (
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    ToolSpec,
    Usage,
    resolve_provider,
)
from bread_sync.models import script as script_provider

from .. import test_anthropic_provider as claude
from .. import test_google_provider as gemini
from .. import test_openai_provider as gpt
from ..fake_provider import Stream

ANSWER = ["Hello ", "world."]
CALL = ("call_1", "add", {"a": 2, "b": 3})
USED = (11, 4)


@dataclass
class Harness:
    """How one provider is made to play an answer: ``play(text, call)`` returns the provider;
    ``tools``: whether it calls tools; ``usage``: whether it reports usage."""

    name: str
    play: Callable[[list[str], tuple[str, str, dict] | None], Any]
    tools: bool = True
    usage: bool = True


def _echo(server: Any) -> Harness:
    return Harness("echo", lambda text, call: resolve_provider("echo")[0], tools=False, usage=False)


def _script(server: Any) -> Harness:
    def play(text: list[str], call: Any) -> Any:
        steps: list[Any] = [script_provider.say(text)] if text else []
        if call:
            steps.append(script_provider.call(call[1], call[2], id=call[0]))
        return script_provider.provider([*steps, script_provider.usage(*USED)])

    return Harness("script", play)


def _openai(server: Any) -> Harness:
    def play(text: list[str], call: Any) -> Any:
        chunks = gpt.tool_call(call[0], call[1], json.dumps(call[2])) if call else gpt.text(*text)
        server.play(Stream([*chunks, gpt.usage_chunk(*USED)]))
        return gpt.llm(server, max_retries=0)

    return Harness("openai", play)


def _anthropic(server: Any) -> Harness:
    def play(text: list[str], call: Any) -> Any:
        blocks = [claude.tool_use(call[0], call[1], json.dumps(call[2]))] if call else [claude.text(*text)]
        server.play(claude.message(*blocks, input_tokens=USED[0], output_tokens=USED[1]))
        return claude.llm(server)

    return Harness("anthropic", play)


def _google(server: Any) -> Harness:
    def play(text: list[str], call: Any) -> Any:
        parts = [gemini.call_part(call[1], call[2], call[0])] if call else [{"text": t} for t in text]
        chunks = [gemini.chunk(part) for part in parts]
        chunks[-1] = gemini.chunk(parts[-1], usage=(USED[0], USED[1], 0))
        server.play(gemini.answer(*chunks))
        return gemini.llm(server)

    return Harness("google", play)


HARNESSES = {"echo": _echo, "script": _script, "openai": _openai, "anthropic": _anthropic, "google": _google}


@pytest.fixture(params=list(HARNESSES))
def harness(request, provider_server):
    if request.param in ("openai", "anthropic", "google"):
        pytest.importorskip({"openai": "openai", "anthropic": "anthropic", "google": "google.genai"}[request.param])
    return HARNESSES[request.param](provider_server)


def turn(provider: Any, signal: CancelToken | None = None, tools: bool = False) -> list[Any]:
    specs = [ToolSpec("add", "Add two numbers.", {"type": "object"})] if tools else []
    messages = [{"role": "user", "content": "".join(ANSWER)}]  # what echo plays back
    request = ModelRequest("m", "", messages, specs, signal or CancelToken())
    return list(provider.stream(request))


def test_text_streams_as_deltas_that_join_into_the_answer(harness):
    events = turn(harness.play(ANSWER, None))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(ANSWER)
    assert not [e for e in events if isinstance(e, ToolCall | ReasoningDelta)]
    assert harness.name == "echo" or len([e for e in events if isinstance(e, TextDelta)]) == len(ANSWER)


def test_usage_is_reported_once_after_the_content(harness):
    events = turn(harness.play(ANSWER, None))

    used = [e for e in events if isinstance(e, Usage)]
    if not harness.usage:
        assert used == []
        return
    assert [(u.input_tokens, u.output_tokens) for u in used] == [USED]
    assert isinstance(events[-1], Usage)


def test_a_tool_call_streams_its_input_before_the_call(harness):
    if not harness.tools:
        pytest.skip(f"{harness.name} calls no tools")
    events = turn(harness.play([], CALL), tools=True)

    content = [e for e in events if not isinstance(e, Usage)]
    start, *deltas, call = content
    assert isinstance(start, ToolInputStart) and (start.id, start.name) == CALL[:2]
    assert all(isinstance(d, ToolInputDelta) and d.id == CALL[0] for d in deltas) and deltas
    assert json.loads("".join(d.delta for d in deltas)) == CALL[2]
    assert isinstance(call, ToolCall) and (call.id, call.name, call.input) == CALL


def test_a_cancelled_call_yields_nothing(harness):
    token = CancelToken()
    token.cancel()

    assert turn(harness.play(ANSWER, None), signal=token) == []


def test_every_provider_has_a_name_its_model_is_known_by(harness):
    provider = harness.play(ANSWER, None)

    assert provider.name == harness.name
    if harness.name not in ("echo", "script"):
        assert resolve_provider(f"{harness.name}:m")[0].name == harness.name
