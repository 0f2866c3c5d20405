"""OpenTelemetry traces of runs (the ``otel`` extra), with the GenAI semantic conventions.

A run is an ``invoke_agent <agentId>`` span; under it each model call is ``chat <model>``, each
tool call ``execute_tool <name>`` (a subagent's ``invoke_agent`` or a task's ``execute_task``
under the call that made it), each pipeline step ``step <name>`` and each loop iteration
``iteration <n>``. The spans are opened and closed as the run's choke point logs its frame
crumbs (:meth:`OtelRunTrace.committed`), never one per crumb; a ``chat`` span is told of its
call by the loop that reads the model's events (:class:`OtelModelCall`), and nothing is done per
event but by that loop. Parents are passed explicitly, since a run is driven in a greenlet of its
own, not in its request's context.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import crumbs as c
from ..models import Usage

#: W3C trace context, whatever global propagator an application set.
PROPAGATOR = TraceContextTextMapPropagator()
DEFAULT_SERVICE_NAME = "bread-sync"
#: A ``chat`` span's attribute: how the call finished (one reason: a call is one choice).
FINISH_REASONS = "gen_ai.response.finish_reasons"


def tracer(provider: Any = None) -> OtelTracer:
    """A tracer on ``provider`` (an SDK ``TracerProvider``: yours, say with an in-memory exporter),
    else on one made from the standard ``OTEL_*`` variables, which this tracer shuts down on close."""
    if provider is not None:
        return OtelTracer(provider, owned=False)
    made = TracerProvider(resource=_resource())
    for exporter in _exporters():
        made.add_span_processor(BatchSpanProcessor(exporter))
    return OtelTracer(made, owned=True)


def captures_content() -> bool:
    """Whether spans record messages and tool arguments: only when the standard opt-in says so."""
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() == "true"


def _resource() -> Resource:
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create({} if named else {"service.name": DEFAULT_SERVICE_NAME})


def _exporters() -> list[SpanExporter]:
    """``OTEL_TRACES_EXPORTER`` (``otlp``, the default, or ``console``), each configured by its own
    variables (the OTLP one by ``OTEL_EXPORTER_OTLP_*``)."""
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: bread-sync exports traces with 'otlp' or 'console'")
    return exporters


class OtelTracer:
    """The process's tracer: a :class:`OtelRunTrace` per run, on one ``TracerProvider``."""

    def __init__(self, provider: Any, owned: bool):
        self.provider = provider
        self.tracer = provider.get_tracer("bread_sync")
        self.capture = captures_content()
        self._owned = owned

    def run_trace(
        self, run_id: str, session_id: str, agent_id: str, went_on_from: Mapping[str, Any] | None, parent: Any = None
    ) -> OtelRunTrace:
        return OtelRunTrace(self, run_id, session_id, agent_id, went_on_from or {}, parent)

    def incoming(self, headers: Mapping[str, str]) -> Any:
        return PROPAGATOR.extract(headers)

    def attach(self, context: Any) -> Callable[[], None]:
        token = otel_context.attach(context)
        return lambda: otel_context.detach(token)

    def close(self) -> None:
        if self._owned:
            self.provider.shutdown()  # exports what the batch holds


class OtelRunTrace:
    """The spans of one run (or continuation): the run's span and a stack of the spans open in
    it, each under a key its end crumb names (a call id, a task run id, ...)."""

    def __init__(
        self,
        tracer: OtelTracer,
        run_id: str,
        session_id: str,
        agent_id: str,
        went_on_from: Mapping[str, Any],
        parent: Any,
    ):
        self._tracer = tracer.tracer
        self._capture = tracer.capture
        self._run_id = run_id
        self._session_id = session_id
        self.run = self._tracer.start_span(
            f"invoke_agent {agent_id}",
            context=otel_context.get_current() if parent is None else parent,
            kind=SpanKind.INTERNAL,
            links=[link for link in [_link(went_on_from.get("trace"))] if link is not None],
            attributes=self._agent_attributes(agent_id),
        )
        #: The open spans, innermost last: [key, span, the context of a span started inside it or None].
        #: That context is made once per open span, when a span is first started inside it, not once
        #: per span started: a run's model calls and tool calls are all started inside its span.
        self._open: list[list[Any]] = [["run", self.run, None]]
        #: The attributes of a ``chat`` span, by (provider, model): made once per run, not per call.
        self._chat_attributes: dict[tuple[str, str], dict[str, str]] = {}
        #: The run span's headers, made once: the run's record and a checkpoint keep them.
        self._link = _headers(self.run)
        #: What the run span keeps of its end (its usage, its status), set in one call as it ends:
        #: each attribute set on its own takes the span's lock and checks its value once more.
        self._ended: dict[str, Any] = {}
        #: False when the sampler left the run out (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``):
        #: every span inside it would be non-recording too, so none is made; what goes out carries
        #: the run span's context, which tells the services downstream it was not sampled.
        self._recording = self.run.is_recording()
        #: The call a checkpoint paused on: the human's answer settles it in this continuation.
        self._paused_on = (
            {"toolCallId": went_on_from["toolCallId"], "toolName": went_on_from["toolName"]}
            if "toolName" in went_on_from
            else None
        )

    # -- the contract ------------------------------------------------------------------------

    def abandon(self) -> None:
        # An SDK span reaches its exporter only when it ends: the run's, never ended, goes with
        # this trace (the run logged nothing, so no span was started inside it).
        self._open.clear()

    def committed(self, crumb: dict[str, Any]) -> None:
        handler = HANDLERS.get(crumb["type"]) if self._recording else None
        if handler is not None:
            handler(self, crumb)

    def model_call(
        self, model: str, provider: str, request: Any, stream: Callable[[Any], Iterator[Any]]
    ) -> tuple[Iterator[Any], OtelModelCall | None]:
        if not self._recording:
            request.trace_headers = self.link()
            return stream(request), None
        attributes = self._chat_attributes.get((provider, model))
        if attributes is None:
            attributes = self._chat_attributes[provider, model] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
            }
        span = self._tracer.start_span(
            f"chat {model}", context=self._inside(), kind=SpanKind.CLIENT, attributes=attributes
        )
        if self._capture:
            span.set_attribute("gen_ai.input.messages", _json(request.messages))
        request.trace_headers = _headers(span)
        call = OtelModelCall(span, request.signal, self._capture)
        try:
            events = iter(stream(request))
        except BaseException as error:  # no events to read, so no ModelReading to end the span
            call.failed(error)
            call.ended([], False, [])
            raise
        return _Events(_first_token(span, events), events), call

    def context(self) -> dict[str, str]:
        return _headers(self._open[-1][1])

    def link(self) -> dict[str, str]:
        return dict(self._link)

    def ids(self) -> tuple[str, str]:
        span_context = self._open[-1][1].get_span_context()
        return f"{span_context.trace_id:032x}", f"{span_context.span_id:016x}"

    # -- frames ------------------------------------------------------------------------------

    def _inside(self) -> Any:
        """The context of the innermost open span, the parent of a span started now."""
        innermost = self._open[-1]
        if innermost[2] is None:
            innermost[2] = trace.set_span_in_context(innermost[1])
        return innermost[2]

    def _start(self, key: Any, name: str, attributes: dict[str, Any]) -> None:
        span = self._tracer.start_span(name, context=self._inside(), kind=SpanKind.INTERNAL, attributes=attributes)
        self._open.append([key, span, None])

    def _finish(self, key: Any, record: Callable[[Span], None] | None = None) -> None:
        """End the span of ``key`` (and any left open inside it), ``record(span)`` first; nothing
        when it is not open (its start was in the continuation before this one)."""
        for index in range(len(self._open) - 1, 0, -1):
            if self._open[index][0] == key:
                span = self._open[index][1]
                for _, inner, _ in reversed(self._open[index + 1 :]):
                    inner.end()
                del self._open[index:]
                if record is not None:
                    record(span)
                span.end()
                return

    def _tool_call(self, crumb: dict[str, Any]) -> None:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": crumb["toolName"],
            "gen_ai.tool.call.id": crumb["toolCallId"],
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = _json(crumb["input"])
        self._start(("tool", crumb["toolCallId"]), f"execute_tool {crumb['toolName']}", attributes)

    def _tool_result(self, crumb: dict[str, Any]) -> None:
        def record(span: Span) -> None:
            span.set_attribute("gen_ai.tool.call.result", _json(crumb["output"]))

        self._finish(("tool", crumb["toolCallId"]), record if self._capture else None)

    def _tool_error(self, crumb: dict[str, Any]) -> None:
        self._finish(("tool", crumb["toolCallId"]), lambda span: _fail(span, crumb["error"]))

    def _subagent_start(self, crumb: dict[str, Any]) -> None:
        agent_id = crumb["subagentId"]
        self._start(("subagent", agent_id), f"invoke_agent {agent_id}", self._agent_attributes(agent_id))

    def _subagent_end(self, crumb: dict[str, Any]) -> None:
        self._finish(("subagent", crumb["subagentId"]), lambda span: _fail_if(span, crumb.get("error")))

    def _task_start(self, crumb: dict[str, Any]) -> None:
        attributes = {"bread.task.id": crumb["taskId"], "bread.task.run.id": crumb["taskRunId"]}
        if crumb.get("model"):
            attributes["gen_ai.request.model"] = crumb["model"]
        self._start(("task", crumb["taskRunId"]), f"execute_task {crumb['taskId']}", attributes)

    def _task_end(self, crumb: dict[str, Any]) -> None:
        def record(span: Span) -> None:
            usage = _usage_attributes(crumb.get("usage"))
            if usage:
                span.set_attributes(usage)
            _fail_if(span, crumb.get("error"))

        self._finish(("task", crumb["taskRunId"]), record)

    def _step_end(self, crumb: dict[str, Any]) -> None:
        self._finish(("step", crumb["index"]))

    def _step_start(self, crumb: dict[str, Any]) -> None:
        attributes = {
            "bread.pipeline.id": crumb["pipelineId"],
            "bread.pipeline.step.name": crumb["stepName"],
            "bread.pipeline.step.index": crumb["index"],
        }
        self._start(("step", crumb["index"]), f"step {crumb['stepName']}", attributes)

    def _iteration_start(self, crumb: dict[str, Any]) -> None:
        attributes = {"bread.loop.id": crumb["loopId"], "bread.loop.iteration": crumb["iteration"]}
        self._start(("iteration", crumb["iteration"]), f"iteration {crumb['iteration']}", attributes)

    def _iteration_end(self, crumb: dict[str, Any]) -> None:
        self._finish(("iteration", crumb["iteration"]), lambda span: _fail_if(span, crumb.get("error")))

    def _paused(self, crumb: dict[str, Any]) -> None:
        attributes = {
            "bread.checkpoint.id": crumb["checkpointId"],
            "bread.human.kind": crumb["kind"],
            "gen_ai.tool.name": crumb["toolName"],
            "gen_ai.tool.call.id": crumb["toolCallId"],
        }
        self.run.add_event("paused", attributes)

    def _resumed(self, crumb: dict[str, Any]) -> None:
        self.run.add_event("resumed", {"bread.checkpoint.id": crumb["checkpointId"]})
        if self._paused_on is not None:
            self._tool_call({**self._paused_on, "input": None})

    def _continued(self, crumb: dict[str, Any]) -> None:
        attributes = {"bread.continued.reason": crumb["reason"], "bread.continued.after_seq": crumb["afterSeq"]}
        self.run.add_event("continued", attributes)

    def _run_end(self, crumb: dict[str, Any]) -> None:
        self._ended.update(_usage_attributes(crumb.get("usage")))

    def _run_error(self, crumb: dict[str, Any]) -> None:
        _fail(self.run, crumb["error"])

    def end(self, status: str | None) -> None:
        """End the spans left open (a pause inside them, a run cut short), then the run's."""
        for _, span, _ in reversed(self._open[1:]):
            span.end()
        del self._open[1:]
        self._ended["bread.run.status"] = status or "interrupted"
        self.run.set_attributes(self._ended)
        self.run.end()

    def _agent_attributes(self, agent_id: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_id,
            "gen_ai.agent.id": agent_id,
            "gen_ai.conversation.id": self._session_id,
            "bread.run.id": self._run_id,
        }


class OtelModelCall:
    """A ``chat`` span, told of its call by the loop that reads the model's events: what that
    span keeps of them is set once, as it ends (one lock of the span taken, not one per attribute)."""

    __slots__ = ("_span", "_signal", "_capture", "_failure")

    def __init__(self, span: Span, signal: Any, capture: bool):
        self._span = span
        self._signal = signal
        self._capture = capture
        #: How the reading ended early, as the span's attributes (empty: it did not).
        self._failure: dict[str, Any] = {}

    def failed(self, error: BaseException) -> None:
        if not isinstance(error, Exception) or self._signal.cancelled:
            self._failure = {FINISH_REASONS: "cancelled"}
            return
        self._span.record_exception(error)
        self._span.set_status(StatusCode.ERROR, str(error))
        self._failure = {FINISH_REASONS: "error", "error.type": getattr(error, "code", None) or type(error).__name__}

    def ended(self, text: list[str], tool_calls: bool, usage: list[Usage]) -> None:
        ended: dict[str, Any] = {FINISH_REASONS: "tool_calls" if tool_calls else "stop"}
        for event in usage:  # the last report of each figure stands
            ended["gen_ai.usage.input_tokens"] = event.input_tokens
            ended["gen_ai.usage.output_tokens"] = event.output_tokens
            if event.model:  # a fallback chain's: the model that answered
                ended["gen_ai.response.model"] = event.model
        ended.update(self._failure)
        ended[FINISH_REASONS] = (ended[FINISH_REASONS],)
        if self._capture:
            ended["gen_ai.output.messages"] = _json([{"role": "assistant", "content": "".join(text)}])
        self._span.set_attributes(ended)
        self._span.end()


class _Events(chain):
    """A traced model call's events: the first through :func:`_first_token`, the rest straight
    from the provider's stream (a chain is C: no frame of ours per event). Its ``close`` is the
    stream's (None when it has none), which the loop reading it calls as it would an untraced
    call's (:func:`bread_sync.tracing.model_ended`)."""

    __slots__ = ("close",)

    def __init__(self, first: Iterator[Any], stream: Iterator[Any]):
        self.close = getattr(stream, "close", None)


def _first_token(span: Span, events: Iterator[Any]) -> Iterator[Any]:
    """The first of ``events``, noted on the span as it comes (the time to first token)."""
    for event in events:
        span.add_event("first_token")
        yield event
        return


#: What each frame crumb does to a run's spans. A table of the class's functions, not of a trace's
#: bound methods: those would make each trace a cycle, which only the garbage collector frees,
#: holding its spans until it does.
HANDLERS: dict[str, Callable[[OtelRunTrace, dict[str, Any]], None]] = {
    c.TOOL_CALL: OtelRunTrace._tool_call,
    c.TOOL_RESULT: OtelRunTrace._tool_result,
    c.TOOL_ERROR: OtelRunTrace._tool_error,
    c.SUBAGENT_RUN_START: OtelRunTrace._subagent_start,
    c.SUBAGENT_RUN_END: OtelRunTrace._subagent_end,
    c.TASK_START: OtelRunTrace._task_start,
    c.TASK_END: OtelRunTrace._task_end,
    c.PIPELINE_STEP_START: OtelRunTrace._step_start,
    c.PIPELINE_STEP_END: OtelRunTrace._step_end,
    c.LOOP_ITERATION_START: OtelRunTrace._iteration_start,
    c.LOOP_ITERATION_END: OtelRunTrace._iteration_end,
    c.HUMAN_REQUIRED: OtelRunTrace._paused,
    c.HUMAN_RESUMED: OtelRunTrace._resumed,
    c.AGENT_RUN_CONTINUED: OtelRunTrace._continued,
    c.AGENT_RUN_END: OtelRunTrace._run_end,
    c.AGENT_ERROR: OtelRunTrace._run_error,
}


def _fail(span: Span, error: Any) -> None:
    """Record a crumb's error (a BreadError in process, ``{code, message}`` on the wire)."""
    code = getattr(error, "code", None) or (error.get("code") if isinstance(error, dict) else None) or "error"
    message = getattr(error, "message", None) or (error.get("message") if isinstance(error, dict) else "") or ""
    span.set_status(StatusCode.ERROR, f"{code}: {message}")
    span.set_attribute("error.type", code)
    span.add_event("exception", {"exception.type": code, "exception.message": message})


def _fail_if(span: Span, error: Any) -> None:
    if error:
        _fail(span, error)


def _usage_attributes(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A run's or task's usage (a crumb's ``usage``, or None) as its span's attributes."""
    if not usage:
        return {}
    return {
        "gen_ai.usage.input_tokens": usage["inputTokens"],
        "gen_ai.usage.output_tokens": usage["outputTokens"],
        "bread.usage.models": sorted(usage.get("byModel") or ()),  # which answered
    }


def _headers(span: Span) -> dict[str, str]:
    """The W3C headers naming ``span``, formatted from its context: what the propagator's
    ``inject`` writes, without the context it makes and parses again (a model call's cost)."""
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return {}
    carrier = {
        "traceparent": f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
    }
    if span_context.trace_state:
        carrier["tracestate"] = span_context.trace_state.to_header()
    return carrier


def _link(headers: Mapping[str, str] | None) -> Link | None:
    """A link to the span a checkpoint or a run's record names (None when it names none)."""
    if not headers:
        return None
    span_context = trace.get_current_span(PROPAGATOR.extract(dict(headers))).get_span_context()
    return Link(span_context) if span_context.is_valid else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
