"""The model seam: a provider turns messages and tool definitions into a stream of events.

A provider module ``models/<name>.py`` exports ``provider(**opts)``. An agent names its model
as ``"provider:name"`` (``"echo"``, ``"openai:gpt-4o-mini"``) or passes a provider object.

A provider that takes files as input lists their media types in ``file_types`` (a collection of
``type/subtype``); one without it takes none, and a run that would send it one is refused first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..cancel import CancelToken
from ..errors import UNKNOWN_PROVIDER, BreadError

PROVIDERS = {
    "echo": "bread_sync.models.echo",
    "script": "bread_sync.models.script",
    "openai": "bread_sync.models.openai",
    "anthropic": "bread_sync.models.anthropic",
    "google": "bread_sync.models.google",
}

#: The fallback chain's module, named as the table names the providers (imported when used).
CHAIN = "bread_sync.models.chain"


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the model's thinking, shown live (``reasoning:delta``), never sent back to it
    by the runtime (a provider that needs its own signed thinking back keeps it in ``state``)."""

    text: str


@dataclass(slots=True)
class ToolInputStart:
    id: str
    name: str


@dataclass(slots=True)
class ToolInputDelta:
    id: str
    delta: str


@dataclass(slots=True)
class ToolCall:
    """A complete tool call; ends any ``tool:input:*`` streaming of the same id."""

    id: str
    name: str
    input: Any


@dataclass(slots=True)
class FileOutput:
    """A file the model generated; the runtime stores it and announces it with ``file:generated``."""

    data: bytes
    mime_type: str
    name: str | None = None


@dataclass(slots=True)
class FileInput:
    """A file a message references (``message["files"]``), read from the blob store for one call."""

    data: bytes
    mime_type: str
    name: str | None = None


@dataclass(slots=True)
class Usage:
    """The tokens one model call used, as its provider reports them (at most once per call,
    usually last); the runtime sums them into the run's ``usage``."""

    input_tokens: int
    output_tokens: int
    #: ``"provider:name"`` of the model that answered, when it is not the agent's own
    #: (a fallback chain's): the run's usage counts the call under it.
    model: str | None = None


ModelEvent = TextDelta | ReasoningDelta | ToolInputStart | ToolInputDelta | ToolCall | FileOutput | Usage


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ModelRequest:
    """One model turn. ``state`` is the provider's own position, kept in checkpoints;
    ``session_state`` and ``context`` are the run's (a tool's ``ctx.state`` and ``ctx.context``)."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec]
    signal: CancelToken
    input: Any = None
    output_format: str = "text"
    state: dict[str, Any] = field(default_factory=dict)
    session_state: dict[str, Any] = field(default_factory=dict)
    context: list[dict[str, Any]] = field(default_factory=list)
    #: The W3C trace context (``traceparent``) a provider adds to the requests it sends for this
    #: call when tracing is on (empty otherwise): the model call's span is their parent.
    trace_headers: dict[str, str] = field(default_factory=dict)
    #: The files the messages reference (each message's ``files``: ``{uri, mimeType}``), by uri.
    files: dict[str, FileInput] = field(default_factory=dict)


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]: ...


def resolve_provider(spec: Any) -> tuple[Provider, str]:
    """``"provider:model"`` or a provider object to ``(provider, model name)``."""
    if not isinstance(spec, str):
        return spec, getattr(spec, "model", spec.name)
    provider_name, _, model_name = spec.partition(":")
    module = PROVIDERS.get(provider_name)
    if module is None:
        raise BreadError(UNKNOWN_PROVIDER, f"unknown model provider {provider_name!r}")
    from ..loading import import_module

    return import_module(module).provider(), model_name or provider_name


def fallback(models: Any, **opts: Any) -> Provider:
    """A provider that tries ``models`` in order, the next after a retryable failure before the
    first token (``rounds``, ``max_wait``, ``backoff``: see :mod:`bread_sync.models.chain`)."""
    from ..loading import import_module

    return import_module(CHAIN).provider(models, **opts)
