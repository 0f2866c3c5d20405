"""The tracing seam: what the engine tells a tracer of a run, at its boundaries only.

Tracing is OpenTelemetry's (``tracing/otel.py``, the ``otel`` extra), on when the extra is
installed and the standard variables ask for it (:func:`tracer_from_environment`). Off, a
runtime's ``tracer`` is None and the engine does nothing for it: no span, no check per crumb.
On, each run (or continuation) gets a :class:`RunTrace`, which the run's choke point tells of
each durable crumb it logs, for the spans their frames open and close (a tool call, a subagent, a
task, a pipeline step, a loop iteration), and which starts a span for each model call, told of
its end by the loop that reads its events. Nothing is traced per text delta, nor per model event:
they are most of a run's crumbs, and a span's work on each would cost more than the delta's own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from ..errors import install_hint

log = logging.getLogger("bread_sync")


class RunTrace(Protocol):
    """The spans of one run, or of one continuation of it (a resume, a run carried on)."""

    def end(self, status: str | None) -> None:
        """The run's driving ended with ``status`` (the driver's final word; None: it never
        began): the spans left open end, then the run's. Told by the driving's end, not by a
        generator around the run's crumbs: tracing costs nothing per crumb."""

    def abandon(self) -> None:
        """Drop the run's span unended, so it is never exported: the run was never this
        process's (another opened its id first, after the span was started for its record)."""

    def committed(self, crumb: dict[str, Any]) -> None:
        """A durable crumb the run's choke point logged: the spans its frame opens or closes.
        Told by the choke point, which never tells it of a delta: tracing costs nothing per delta."""

    def model_call(
        self, model: str, provider: str, request: Any, stream: Callable[[Any], Iterator[Any]]
    ) -> tuple[Iterator[Any], ModelCall | None]:
        """The events of ``stream(request)``, the request's ``trace_headers`` set first to the call's
        span, and that span (None when the run records none): its first token noted as it comes,
        nothing done per event after it; the loop reading them tells it the rest (:class:`ModelCall`).
        A ``stream`` that raises as it is called ends that span with its error, then raises it."""

    def context(self) -> dict[str, str]:
        """The W3C headers (``traceparent``) of the innermost open span: what a request this run
        sends out (a model provider's, a remote agent's) carries."""

    def ids(self) -> tuple[str, str]:
        """The hex trace id and span id of the innermost open span: what a log record made now names."""

    def link(self) -> dict[str, str]:
        """The run span's context, kept with the run's record (``stores.TRACE_FIELD``) and with a
        checkpoint: a run carried on, or a resume, links to it."""


class ModelCall(Protocol):
    """A model call's span, told of the call by the loop that reads its events, as that loop
    handles them already: nothing is done for the span per event."""

    def failed(self, error: BaseException) -> None:
        """The reading ended with ``error``. A cancel (the run's signal set) or its reader gone (a
        ``GeneratorExit``, a greenlet killed: not an ``Exception``) is said as a cancel; any other
        is the call's error."""

    def ended(self, text: list[str], tool_calls: bool, usage: list[Any]) -> None:
        """The call is over and its stream closed: ``text``, what it said, ``tool_calls``, whether it
        called a tool, and ``usage``, the :class:`~bread_sync.models.Usage` events it reported."""


class Tracer(Protocol):
    """Makes a :class:`RunTrace` per run; one per process (its exporter's batch is flushed on close)."""

    def run_trace(
        self, run_id: str, session_id: str, agent_id: str, went_on_from: Mapping[str, Any] | None, parent: Any = None
    ) -> RunTrace:
        """``went_on_from``: the checkpoint (a resume) it goes on from, or the ``trace`` of the
        record of a run carried on, which its span links to; ``parent``: the caller's context
        (:meth:`incoming`), else the one current where the run opens."""

    def incoming(self, headers: Mapping[str, str]) -> Any:
        """The context a request's ``traceparent`` names; made current around the request (:meth:`attach`)."""

    def attach(self, context: Any) -> Callable[[], None]:
        """Make ``context`` current in this greenlet; returns the undo."""

    def close(self) -> None: ...


class ModelReading:
    """A model call's events, read inside ``with``: as the block ends, its span is told how (a
    failure, a cancel) and its stream closed, then the span ended with what the block gathered
    in ``text``, ``tool_calls`` and ``usage`` (:func:`model_ended`). Per call, not per event:
    the block reads the events themselves, so tracing adds no frame of ours per event."""

    __slots__ = ("_events", "_call", "_text", "_tool_calls", "_usage")

    def __init__(
        self, events: Iterator[Any], call: ModelCall | None, text: list[str], tool_calls: list[Any], usage: list[Any]
    ):
        self._events = events
        self._call = call
        self._text = text
        self._tool_calls = tool_calls
        self._usage = usage

    def __enter__(self) -> Iterator[Any]:
        return self._events

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        try:
            if error is not None and self._call is not None:
                self._call.failed(error)
        finally:
            model_ended(self._events, self._call, self._text, bool(self._tool_calls), self._usage)


def model_call(
    trace: RunTrace | None,
    provider: Any,
    model_name: str,
    request: Any,
    text: list[str],
    tool_calls: list[Any],
    usage: list[Any],
) -> ModelReading:
    """A model call (the provider's stream, its span when traced), its events read inside
    ``with``; the lists are what the block gathers of them for the span: what it said, the
    tool calls, the :class:`~bread_sync.models.Usage` events."""
    if trace is None:
        return ModelReading(provider.stream(request), None, text, tool_calls, usage)
    events, call = trace.model_call(model_name, provider.name, request, provider.stream)
    return ModelReading(events, call, text, tool_calls, usage)


def model_ended(
    events: Iterator[Any], call: ModelCall | None, text: list[str], tool_calls: bool, usage: list[Any]
) -> None:
    """A model call over, as the loop that read its events tells it: its stream closed (a reader
    that stopped early leaves it open), then its span told (:meth:`ModelCall.ended`)."""
    close = getattr(events, "close", None)
    try:
        if close is not None:
            close()
    finally:  # a stream that fails to close still ends its span
        if call is not None:
            call.ended(text, tool_calls, usage)


def enabled() -> bool:
    """Whether the standard variables ask for traces: an OTLP endpoint or an exporter named
    (not ``none``), and not ``OTEL_SDK_DISABLED=true``."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(exporter or (endpoint or "").strip())


def tracer_from_environment() -> Tracer | None:
    """The process's tracer when the variables ask for one and the ``otel`` extra is installed;
    None otherwise (a warning when asked for without the extra)."""
    if not enabled():
        return None
    try:
        from . import otel
    except ImportError:
        log.warning(f"OTEL_* variables ask for traces but the otel extra is missing: {install_hint('otel')}")
        return None
    return otel.tracer()
