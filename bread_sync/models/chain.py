"""The ``fallback`` provider: a chain of models, the next tried when one fails before answering.

Made by ``bread_sync.models.fallback``::

    Agent(id="writer", model=fallback(["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"]))

A retryable failure (a rate limit, an overload, a timeout, a dropped connection, a 5xx) before a
model's first event moves on to the next model; once every model failed, the chain goes round
again (``rounds`` times in all), after a back-off that honours the first model's
``Retry-After`` (bounded by ``max_wait``). A failure after the first event is the run's error:
no half answer is spliced with another model's. Any other failure (a bad key, a context too
long) is the run's error at once. Each call's usage names the model that answered, so the run's
``usage.byModel`` says which did.

The chain does the retrying: a model named by a string gets a client that does not retry on its
own (``max_retries=0``); a provider object passed in keeps its own settings.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import BreadError
from ..usage import model_key
from . import ModelEvent, ModelRequest, Usage, resolve_provider
from .sdk import is_retryable

log = logging.getLogger("bread_sync")

#: The first back-off between rounds, doubled at each; a Retry-After longer than it wins.
BACKOFF = 0.5
MAX_WAIT = 30.0


class FallbackProvider:
    """Tries ``models`` (``"provider:model"`` names or provider objects) in order; see the module."""

    name = "fallback"

    def __init__(self, models: Sequence[Any], *, rounds: int = 2, max_wait: float = MAX_WAIT, backoff: float = BACKOFF):
        if not models:
            raise ValueError("fallback() needs at least one model")
        if rounds < 1:
            raise ValueError("fallback(rounds=...) is at least 1")
        self.models = list(models)
        self.rounds = rounds
        self.max_wait = max_wait
        self.backoff = backoff
        #: how GET /agents and usage name the chain: its models' names
        self.model = ",".join(_spec_name(spec) for spec in self.models)

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        failures: list[BreadError] = []
        for round_ in range(self.rounds):
            if round_ and request.signal.wait(self._delay(round_, failures)):
                return  # cancelled while waiting
            failures = []
            for spec in self.models:
                provider, model_name = _resolve(spec)
                answered = model_key(provider.name, model_name)
                events = iter(provider.stream(dataclasses.replace(request, model=model_name)))
                try:
                    first = next(events, None)
                except BreadError as exc:
                    if not is_retryable(exc):
                        raise
                    log.warning("model %s failed before answering (%s): trying the next", answered, exc.code)
                    failures.append(exc)
                    continue
                if first is None and request.signal.cancelled:
                    return  # nobody answered: the run ends cancelled
                yield from _named(first, events, answered)
                return
        raise failures[-1]

    @functools.cached_property  # a name's provider is made anew each time it is resolved
    def file_types(self) -> frozenset[str]:
        """The media types every model of the chain takes: a file goes to whichever answers."""
        taken = [frozenset(getattr(_resolve(spec)[0], "file_types", ())) for spec in self.models]
        return frozenset.intersection(*taken)

    def _delay(self, round_: int, failures: list[BreadError]) -> float:
        """The back-off before a new round: doubling, at least the first model's Retry-After, bounded."""
        asked = failures[0].context.get("retryAfter") if failures else None
        delay = self.backoff * 2 ** (round_ - 1)
        if isinstance(asked, int | float):
            delay = max(delay, float(asked))
        return min(delay, self.max_wait)

    def __repr__(self) -> str:
        return f"fallback({self.model!r})"


def provider(models: Sequence[Any] = (), **opts: Any) -> FallbackProvider:
    return FallbackProvider(models, **opts)


def _named(first: ModelEvent | None, events: Iterator[ModelEvent], answered: str) -> Iterator[ModelEvent]:
    """The answering model's events from its first on, its usage under its own name (none
    reported: zero tokens, so the run still names the model that answered)."""
    reported = False
    try:
        for event in itertools.chain((first,) if first is not None else (), events):
            if isinstance(event, Usage):
                reported = True
                event = Usage(event.input_tokens, event.output_tokens, event.model or answered)
            yield event
        if not reported:
            yield Usage(0, 0, answered)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _resolve(spec: Any) -> tuple[Any, str]:
    provider, model_name = resolve_provider(spec)
    if isinstance(spec, str) and hasattr(provider, "max_retries"):
        provider.max_retries = 0  # a new provider of our own: the chain retries, its client not
    return provider, model_name


def _spec_name(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    return f"{getattr(spec, 'name', 'custom')}:{getattr(spec, 'model', None) or ''}".rstrip(":")
