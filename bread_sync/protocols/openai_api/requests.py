"""The request bodies: a chat completion's or a response's, read as one :class:`Turn` of an agent.

Sans-IO (pydantic only), so the plugin checks a body before any run exists. Only what bread
uses is read; the sampling settings (``temperature``, ``max_tokens``, ...) and client ``tools``
are left out, since the agent's own model settings and tools are what run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import INVALID_REQUEST, BreadError


@dataclass
class Turn:
    """What a request asks: the agent (``model``), the new turn's ``text``, the conversation
    before it (``[{role, content}]``, user and assistant texts), the client's system texts,
    and how to answer."""

    agent_id: str
    text: str
    history: list[dict[str, str]] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _ChatPart(_Body):
    type: Literal["text"]
    text: str


class _ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_ChatPart] | None = None


class _StreamOptions(_Body):
    include_usage: bool = False


class ChatRequest(_Body):
    model: str
    messages: Annotated[list[_ChatMessage], Field(min_length=1)]
    stream: bool | None = False
    stream_options: _StreamOptions | None = None
    n: Literal[1] | None = None


class _InputPart(_Body):
    type: Literal["input_text", "output_text"]
    text: str


class _InputMessage(_Body):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[_InputPart]


class ResponsesRequest(_Body):
    model: str
    input: str | Annotated[list[_InputMessage], Field(min_length=1)]
    instructions: str | None = None
    stream: bool | None = False
    previous_response_id: None = None


def chat_turn(body: dict[str, Any]) -> Turn:
    """A ``POST /chat/completions`` body as a turn; ``INVALID_REQUEST`` naming what is wrong."""
    given = _validated(ChatRequest, body)
    for index, message in enumerate(given.messages):
        if message.role in ("tool", "function") or message.content is None:
            raise BreadError(
                INVALID_REQUEST,
                "tool messages and tool calls are not taken: the agent's own tools run on the server",
                {"param": f"messages.{index}"},
            )
    said = [(m.role, _text(m.content)) for m in given.messages]
    include_usage = given.stream_options is not None and given.stream_options.include_usage
    return _turn(given.model, said, [], given.stream is True, include_usage, "messages")


def responses_turn(body: dict[str, Any]) -> Turn:
    """A ``POST /responses`` body as a turn; ``INVALID_REQUEST`` naming what is wrong."""
    given = _validated(ResponsesRequest, body)
    items = [_InputMessage(role="user", content=given.input)] if isinstance(given.input, str) else given.input
    said = [(item.role, _text(item.content)) for item in items]
    instructions = [given.instructions] if given.instructions else []
    return _turn(given.model, said, instructions, given.stream is True, True, "input")


def _turn(
    agent_id: str, said: list[tuple[str, str]], instructions: list[str], stream: bool, usage: bool, param: str
) -> Turn:
    *before, (role, text) = said
    if role != "user":
        raise BreadError(INVALID_REQUEST, f"the last message must be the user's, not {role}'s", {"param": param})
    history = [{"role": r, "content": t} for r, t in before if r in ("user", "assistant")]
    instructions = [*instructions, *(t for r, t in before if r in ("system", "developer"))]
    return Turn(agent_id, text, history, instructions, stream, usage)


def _text(content: str | list[Any]) -> str:
    return content if isinstance(content, str) else "".join(part.text for part in content)


def _validated(model: type[_Body], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise BreadError(INVALID_REQUEST, problems, {"param": str(loc[0]) if loc else None}) from None
