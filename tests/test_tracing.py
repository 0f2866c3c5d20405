"""OpenTelemetry traces of runs: the span tree of each demo agent, from an in-memory exporter.

The runs go through the public runtime on the demo config; the tracer is the ``otel`` one on a
provider of the test's own (what the ``OTEL_*`` variables would build, with another exporter).
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

import pytest

from bread_sync import tracing
from bread_sync.client import create_agent_client, local
from bread_sync.errors import MODEL_OVERLOADED, RUN_CANCELLED, STORE_BUSY, BreadError
from bread_sync.models.script import provider, say, usage

otel = pytest.importorskip("bread_sync.tracing.otel")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def traced(make_bread, exporter):
    """A Bread on the demo agents whose runs are traced into ``exporter``."""

    def make(**updates):
        spans = TracerProvider()
        spans.add_span_processor(SimpleSpanProcessor(exporter))
        bread = make_bread(**updates)
        bread.tracer = otel.tracer(spans)
        return bread

    return make


def tree(spans) -> list[Any]:
    """The spans as nested ``(name, [children])``, children in the order they started."""
    by_parent: dict[Any, list[Any]] = {}
    ids = {span.context.span_id for span in spans}
    for span in sorted(spans, key=lambda s: s.start_time):
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)

    def nest(parent: Any) -> list[Any]:
        return [(span.name, nest(span.context.span_id)) for span in by_parent.get(parent, [])]

    return nest(None)


def named(spans, name: str):
    (span,) = [span for span in spans if span.name == name]
    return span


def run_status(spans, agent_id: str) -> str:
    return named(spans, f"invoke_agent {agent_id}").attributes["bread.run.status"]


def test_nothing_is_traced_per_text_delta(traced, exporter, monkeypatch):
    """A run's trace is told of its durable crumbs only: the deltas, most of its crumbs, cost it nothing."""
    told = []
    committed = otel.OtelRunTrace.committed
    monkeypatch.setattr(
        otel.OtelRunTrace, "committed", lambda self, crumb: told.append(crumb["type"]) or committed(self, crumb)
    )
    bread = traced()
    result = bread.run("slow", {"count": 50, "delayMs": 0}, mode="sync")

    assert sum(crumb["type"] == "text:delta" for crumb in result.crumbs) == 50
    assert told == ["agent:run:start", "agent:run:end"]
    assert tree(exporter.get_finished_spans()) == [("invoke_agent slow", [("chat script", [])])]


def test_a_run_s_crumbs_and_model_events_pass_through_no_tracer_code(traced):
    """Per delta, tracing runs nothing of the tracing folder: the run's span ends when its driving
    does (Execution.when_ended), and the chat span is told of its call by the loop that reads the
    model's events (ModelCall), entering and leaving tracing.ModelReading once per call: no
    generator around the run's crumbs or around those events, in the seam or in otel.py."""
    folder = os.path.dirname(tracing.__file__) + os.sep
    calls: dict[str, int] = {}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(folder):  # a generator's resume too
            calls[frame.f_code.co_qualname] = calls.get(frame.f_code.co_qualname, 0) + 1

    bread = traced()

    def calls_in_a_run_of(deltas: int) -> dict[str, int]:
        calls.clear()
        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            bread.run("slow", {"count": deltas, "delayMs": 0}, mode="sync")
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        return dict(calls)

    assert calls_in_a_run_of(10) == calls_in_a_run_of(50)
    ten = calls_in_a_run_of(10)
    assert (ten["OtelRunTrace.end"], ten["ModelReading.__exit__"]) == (1, 1)


def test_a_traced_run_leaves_no_cycle_for_the_garbage_collector(traced, monkeypatch):
    """Its trace (and the spans it holds) is freed when the run ends, by reference counting: a
    cycle (a trace holding its own bound methods, a choke point its own) would hold it until a
    full collection, whose pauses grow with what waits for it."""
    bread = traced()
    made = []
    run_trace = bread.tracer.run_trace
    monkeypatch.setattr(bread.tracer, "run_trace", lambda *args: made.append(run_trace(*args)) or made[-1])
    gc.disable()
    try:
        bread.run("slow", {"count": 3, "delayMs": 0}, mode="sync")
        trace = weakref.ref(made.pop())
        assert trace() is None
    finally:
        gc.enable()


def test_a_new_runs_record_names_its_span_when_made_not_by_an_update(traced, exporter, monkeypatch):
    bread = traced()
    updates = []
    update_run = bread.store.update_run
    monkeypatch.setattr(bread.store, "update_run", lambda *a, **kw: updates.append(kw) or update_run(*a, **kw))
    result = bread.run("echo", "hi", mode="sync")

    run = named(exporter.get_finished_spans(), "invoke_agent echo")
    traceparent = f"00-{run.context.trace_id:032x}-{run.context.span_id:016x}-{run.context.trace_flags:02x}"
    assert bread.store.get_run(result.run_id)["trace"] == {"traceparent": traceparent}
    assert not [fields for fields in updates if "trace" in fields]  # one UPDATE of the row fewer per run


def test_echo_is_one_run_span_with_one_model_call(traced, exporter):
    bread = traced()
    result = bread.run("echo", "hello there", mode="sync", session="ses_1")

    spans = exporter.get_finished_spans()
    assert tree(spans) == [("invoke_agent echo", [("chat echo", [])])]
    run = named(spans, "invoke_agent echo")
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == run.attributes["gen_ai.agent.id"] == "echo"
    assert run.attributes["gen_ai.conversation.id"] == "ses_1"
    assert run.attributes["bread.run.id"] == result.run_id
    assert run.attributes["bread.run.status"] == "completed"
    chat = named(spans, "chat echo")
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "echo"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert [event.name for event in chat.events] == ["first_token"]
    assert "gen_ai.input.messages" not in chat.attributes  # content is opt-in


def test_the_writer_pauses_in_its_tool_call_and_the_resume_links_to_the_paused_span(traced, exporter):
    bread = traced()
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    checkpoint_id = paused.checkpoint["checkpointId"]
    first = exporter.get_finished_spans()
    assert tree(first) == [("invoke_agent writer", [("chat script", []), ("execute_tool publish", [])])]
    run = named(first, "invoke_agent writer")
    assert run.attributes["bread.run.status"] == "paused"
    (pause,) = [event for event in run.events if event.name == "paused"]
    assert pause.attributes["bread.checkpoint.id"] == checkpoint_id
    assert pause.attributes["gen_ai.tool.name"] == "publish"
    exporter.clear()

    bread.resume(checkpoint_id, {"approved": True}, mode="sync")

    second = exporter.get_finished_spans()
    # the call it paused on runs in the resume, under a span of its own
    assert tree(second) == [("invoke_agent writer", [("execute_tool publish", []), ("chat script", [])])]
    resumed = named(second, "invoke_agent writer")
    assert resumed.attributes["bread.run.status"] == "completed"
    assert [link.context.span_id for link in resumed.links] == [run.context.span_id]
    assert [event.name for event in resumed.events] == ["resumed"]


def test_the_in_process_client_hands_out_a_runs_last_crumb_with_its_span_ended(traced, exporter):
    """Its runs are driven on threads of their own; a caller that stops at the last crumb (the
    CLI, which then closes the Bread and exits) finds the run's span ended, not ending after."""
    bread = traced()
    with create_agent_client(local.transport(bread)) as client:
        for _ in range(20):  # the race lost the span most times, not every time
            exporter.clear()
            paused = client.thread().send("writer", {"topic": "bread"})
            assert paused.wait_until_idle().status == "paused"
            assert run_status(exporter.get_finished_spans(), "writer") == "paused"
            exporter.clear()
            assert paused.respond({"approved": True}).wait_until_idle().status == "completed"
            assert run_status(exporter.get_finished_spans(), "writer") == "completed"


def test_the_managers_subagent_and_task_are_under_the_tool_calls_that_made_them(traced, exporter):
    bread = traced()
    bread.run("manager", "go", mode="sync")

    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_agent manager",
            [
                ("chat script", []),
                ("execute_tool echo", [("invoke_agent echo", [("chat echo", [])])]),
                ("chat script", []),
                ("execute_tool word-count", [("execute_task word-count", [("chat script", [])])]),
                ("chat script", []),
            ],
        )
    ]


def test_each_loop_iteration_and_pipeline_step_is_a_span(traced, exporter):
    bread = traced()
    bread.run("counter", {"until": 2}, mode="sync")
    assert tree(exporter.get_finished_spans()) == [
        ("invoke_agent counter", [("iteration 1", [("chat script", [])]), ("iteration 2", [("chat script", [])])])
    ]
    exporter.clear()

    paused = bread.run_pipeline("draft-then-echo", {"topic": "rye"}, mode="sync")
    bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")

    first, second = sorted(
        (span for span in exporter.get_finished_spans() if span.parent is None), key=lambda s: s.start_time
    )
    spans = exporter.get_finished_spans()
    runs = tree(spans)
    assert runs == [
        ("invoke_agent draft-then-echo", [("step writer", [("chat script", []), ("execute_tool publish", [])])]),
        (
            "invoke_agent draft-then-echo",
            [("execute_tool publish", []), ("chat script", []), ("step echo", [("chat echo", [])])],
        ),
    ]
    assert first.attributes["bread.run.status"] == "paused"
    assert second.attributes["bread.run.status"] == "completed"


def test_a_tool_error_and_a_failed_run_are_recorded_on_their_spans(traced, exporter, make_bread):
    from bread_sync import Agent, Config
    from bread_sync.models.script import call

    failing = Agent(id="f", model=provider([call("missing", {}), say("x")]))
    bread = traced(config=Config(agents=[failing]))
    bread.run("f", "go", mode="sync")
    tool = named(exporter.get_finished_spans(), "execute_tool missing")
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.attributes["error.type"] == "TOOL_FAILED"


def test_usage_and_content_on_the_model_call_span(traced, exporter, monkeypatch):
    from bread_sync import Agent, Config

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    agent = Agent(id="u", model=provider([say("Hi."), usage(12, 3)]))
    bread = traced(config=Config(agents=[agent]))
    bread.run("u", "hello", mode="sync")
    spans = exporter.get_finished_spans()
    chat = named(spans, "chat script")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 3
    assert "hello" in chat.attributes["gen_ai.input.messages"]
    assert "Hi." in chat.attributes["gen_ai.output.messages"]
    run = named(spans, "invoke_agent u")
    assert run.attributes["gen_ai.usage.input_tokens"] == 12


def model_down(convo):
    """A script step whose model fails mid-stream: what a provider's error raises."""
    raise BreadError(MODEL_OVERLOADED, "the model is overloaded")


def test_a_model_call_that_ends_in_tool_calls_says_so(traced, exporter):
    bread = traced()
    bread.run("writer", {"topic": "bread"}, mode="sync")  # its turn calls publish
    assert named(exporter.get_finished_spans(), "chat script").attributes[otel.FINISH_REASONS] == ("tool_calls",)


def test_a_model_call_that_fails_is_an_error_on_its_span_with_what_it_said_before(traced, exporter, monkeypatch):
    from bread_sync import Agent, Config

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    agent = Agent(id="f", model=provider([say("Half an"), usage(7, 2), model_down]))
    bread = traced(config=Config(agents=[agent]))
    assert bread.run("f", "go", mode="sync").status == "failed"

    chat = named(exporter.get_finished_spans(), "chat script")
    assert chat.attributes[otel.FINISH_REASONS] == ("error",)
    assert chat.attributes["error.type"] == MODEL_OVERLOADED
    assert chat.status.status_code == StatusCode.ERROR
    assert [event.name for event in chat.events] == ["first_token", "exception"]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 7 and chat.attributes["gen_ai.usage.output_tokens"] == 2
    assert "Half an" in chat.attributes["gen_ai.output.messages"]


def test_a_model_call_whose_stream_cannot_start_is_an_error_on_its_ended_span(traced, exporter):
    """A provider's ``stream`` that raises as it is called, before there are events to read: the
    run fails as it would untraced, and its call's span still ends, with the error."""
    from bread_sync import Agent, Config

    class Refusing:
        name = "refusing"

        def stream(self, request):
            raise BreadError(MODEL_OVERLOADED, "the model is overloaded")

    bread = traced(config=Config(agents=[Agent(id="r", model=Refusing())]))
    result = bread.run("r", "go", mode="sync")
    assert (result.status, result.error.code) == ("failed", MODEL_OVERLOADED)

    chat = named(exporter.get_finished_spans(), "chat refusing")
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes[otel.FINISH_REASONS] == ("error",)
    assert chat.attributes["error.type"] == MODEL_OVERLOADED


def test_a_task_s_model_call_that_fails_is_an_error_on_its_span_and_its_tokens_still_count(exporter):
    """A task reads its model's events as an agent's turn does (tracing.ModelReading): the same span."""
    from pydantic import BaseModel

    from bread_sync import CancelToken
    from bread_sync.tasks import Task
    from bread_sync.usage import RunUsage

    class Words(BaseModel):
        text: str

    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    trace = otel.tracer(spans).run_trace("run_1", "ses_1", "t", None)
    task = Task(id="t", input_schema=Words, output_schema=Words, model=provider([say('{"te'), usage(4, 1), model_down]))
    used = RunUsage()
    with pytest.raises(BreadError):
        task.call({"text": "go"}, CancelToken(), used, trace)

    chat = named(exporter.get_finished_spans(), "chat script")
    assert chat.attributes[otel.FINISH_REASONS] == ("error",)
    assert chat.attributes["error.type"] == MODEL_OVERLOADED
    assert chat.attributes["gen_ai.usage.input_tokens"] == 4
    assert used.to_wire()["inputTokens"] == 4


def test_a_model_call_its_run_stops_reading_is_cancelled_on_its_span(traced, exporter):
    bread = traced()
    run = bread.run("slow", {"count": 50, "delayMs": 0})
    while next(run)["type"] != "text:delta":
        pass
    run.close()  # the caller went away mid-answer

    chat = named(exporter.get_finished_spans(), "chat script")
    assert chat.attributes[otel.FINISH_REASONS] == ("cancelled",)
    assert chat.status.status_code != StatusCode.ERROR and "error.type" not in chat.attributes
    assert [event.name for event in chat.events] == ["first_token"]


def test_a_model_call_s_stream_is_closed_before_its_span_ends(traced, exporter):
    """A provider's clean-up (its HTTP response let go) is inside its call's span, traced or not."""
    from bread_sync import Agent, Config
    from bread_sync.models import TextDelta

    ended_when_closed = []

    class Talking:
        name = "talking"

        def stream(self, request):
            try:
                yield from (TextDelta(f"word{k} ") for k in range(50))
            finally:
                ended_when_closed.append([span.name for span in exporter.get_finished_spans()])

    bread = traced(config=Config(agents=[Agent(id="t", model=Talking())]))
    run = bread.run("t", "go")
    while next(run)["type"] != "text:delta":
        pass
    run.close()

    assert ended_when_closed == [[]]
    assert named(exporter.get_finished_spans(), "chat talking").attributes[otel.FINISH_REASONS] == ("cancelled",)


def test_a_model_call_whose_stream_fails_to_close_still_ends_its_span(traced, exporter):
    from bread_sync import Agent, Config
    from bread_sync.models import TextDelta

    class Failing:
        name = "failing"

        def stream(self, request):
            try:
                yield from (TextDelta(f"word{k} ") for k in range(50))
            finally:
                raise OSError("the connection broke while closing")

    bread = traced(config=Config(agents=[Agent(id="f", model=Failing())]))
    run = bread.run("f", "go")
    while next(run)["type"] != "text:delta":
        pass
    with pytest.raises(OSError):  # the provider's failure is its caller's to see
        run.close()

    assert named(exporter.get_finished_spans(), "chat failing").end_time is not None
    # and the run is still let go, ended as one its caller stopped pulling
    assert run.run_id not in bread.cancels.live_run_ids()
    ended = bread.store.get_crumbs(run.run_id)[-1].crumb
    assert (ended["type"], ended["error"]["code"]) == ("agent:error", "RUN_INTERRUPTED")


def test_a_model_call_whose_run_is_cancelled_between_its_events_is_cancelled_on_its_span(traced, exporter):
    from bread_sync import CancelToken

    bread = traced()
    token = CancelToken()
    run = bread.run("slow", {"count": 50, "delayMs": 0}, signal=token)
    while next(run)["type"] != "text:delta":
        pass
    token.cancel()
    assert list(run)[-1]["error"].code == RUN_CANCELLED

    assert named(exporter.get_finished_spans(), "chat script").attributes[otel.FINISH_REASONS] == ("cancelled",)


def test_a_run_span_is_given_its_usage_and_status_in_one_call_as_it_ends(traced, exporter, monkeypatch):
    """Each attribute set on its own takes the span's lock and checks its value once more (the
    SDK's cost, per run): the run's end sets its usage and status at once."""
    from opentelemetry.sdk.trace import Span

    from bread_sync import Agent, Config

    calls = []
    for name in ("set_attribute", "set_attributes"):
        method = getattr(Span, name)
        monkeypatch.setattr(
            Span,
            name,
            lambda self, *args, _name=name, _method=method: calls.append((self.name, _name)) or _method(self, *args),
        )
    agent = Agent(id="u", model=provider([say("Hi."), usage(12, 3)]))
    bread = traced(config=Config(agents=[agent]))
    bread.run("u", "hello", mode="sync")

    run = named(exporter.get_finished_spans(), "invoke_agent u")
    assert run.attributes["bread.run.status"] == "completed"
    assert run.attributes["gen_ai.usage.output_tokens"] == 3
    assert [call for call in calls if call[0] == "invoke_agent u"] == [("invoke_agent u", "set_attributes")]


def test_a_run_opened_in_a_context_is_its_child():
    exporter = InMemorySpanExporter()
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = otel.tracer(spans)
    incoming = tracer.incoming({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    run = tracer.run_trace("run_1", "ses_1", "echo", None, parent=incoming)
    run.end("completed")
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"


def test_a_run_the_sampler_left_out_makes_no_span_inside_it_and_sends_its_own_context():
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

    from bread_sync import crumbs as c
    from bread_sync.cancel import CancelToken
    from bread_sync.models import ModelRequest

    tracer = otel.tracer(TracerProvider(sampler=ParentBasedTraceIdRatio(0.0)))  # what the variables make
    run = tracer.run_trace("run_1", "ses_1", "echo", None)
    request = ModelRequest(model="m", system="", messages=[], tools=[], signal=CancelToken())

    events, call = run.model_call("m", "script", request, lambda request: iter([]))
    assert call is None and list(events) == []  # no chat span
    run.committed({"type": c.TOOL_CALL, "toolName": "noop", "toolCallId": "call_1", "input": {}})

    # a model call's request, and a log line in the tool call, name the run's own span (not sampled)
    _, _, span_id, flags = run.link()["traceparent"].split("-")
    assert request.trace_headers == run.link() and int(flags, 16) & 1 == 0  # the sampled flag clear
    assert run.ids()[1] == span_id


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_the_standard_variables_turn_tracing_on_and_off(environ, on, monkeypatch):
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert tracing.enabled() is on


def test_tracing_is_off_by_default(make_bread):
    assert make_bread().tracer is None


def ended_span(exporter, name: str, count: int = 1) -> list[Any]:
    """The finished spans called ``name``, once ``count`` of them ended: a run's span ends just
    after its last crumb, which the response may have sent first."""
    deadline = time.monotonic() + 10
    while len(found := [span for span in exporter.get_finished_spans() if span.name == name]) < count:
        assert time.monotonic() < deadline, [span.name for span in exporter.get_finished_spans()]
        time.sleep(0.01)
    return found


def test_a_requests_traceparent_is_the_parent_of_the_run_and_of_its_resume(traced, exporter):
    from bread_sync.server import create_server

    client = create_server(traced(transport="http-sse")).test_client()
    run_parent, resume_parent = "a1" * 16, "c3" * 16

    paused = client.post(
        "/agents/writer/run",
        json={"input": {"topic": "rye"}},
        headers={"traceparent": f"00-{run_parent}-{'b2' * 8}-01"},
    ).get_data(as_text=True)
    (checkpoint_id,) = set(re.findall(r'"checkpointId": ?"(cp_[0-9a-f]+)"', paused))
    headers = {"traceparent": f"00-{resume_parent}-{'d4' * 8}-01"}
    client.post(f"/resume/{checkpoint_id}", json={"response": {"approved": True}}, headers=headers).get_data()

    first, second = sorted(ended_span(exporter, "invoke_agent writer", 2), key=lambda span: span.start_time)
    assert (f"{first.context.trace_id:032x}", f"{first.parent.span_id:016x}") == (run_parent, "b2" * 8)
    assert (f"{second.context.trace_id:032x}", f"{second.parent.span_id:016x}") == (resume_parent, "d4" * 8)
    assert [link.context.span_id for link in second.links] == [first.context.span_id]


def test_a_bridges_request_traceparent_is_the_parent_of_its_run(traced, exporter):
    pytest.importorskip("ag_ui")
    from bread_sync.server import create_server

    client = create_server(traced(transport="http-sse")).test_client()
    body = {"threadId": "t1", "runId": "r1", "messages": [{"id": "m", "role": "user", "content": "hi"}]}
    client.post("/ag-ui/run", json=body, headers={"traceparent": f"00-{'e5' * 16}-{'f6' * 8}-01"}).get_data()

    (run,) = ended_span(exporter, "invoke_agent echo")
    assert (f"{run.context.trace_id:032x}", f"{run.parent.span_id:016x}") == ("e5" * 16, "f6" * 8)


def test_a_run_id_another_process_created_first_exports_no_span_here(traced, exporter, monkeypatch):
    # Every worker's tick opens the schedule's run under one id: the one whose record is made
    # first runs it; the others never had the run and must not export a span for it.
    from bread_sync.schedules import Schedule

    bread = traced()
    create_run = bread.store.create_run

    def created_meanwhile(record):
        create_run({**record, "owner": "another:1:process"})  # between the check and the create
        return create_run(record)

    monkeypatch.setattr(bread.store, "create_run", created_meanwhile)
    assert bread.run_scheduled(Schedule("echo", "hi"), datetime(2026, 12, 4, 22, 0, tzinfo=UTC)) is None

    assert exporter.get_finished_spans() == ()
    monkeypatch.undo()
    bread.run("echo", "hi", mode="sync")  # the tracer goes on tracing the runs it has
    assert [span.name for span in exporter.get_finished_spans()] == ["chat echo", "invoke_agent echo"]


def test_a_runs_span_ends_even_when_its_abandon_fails(traced, exporter, monkeypatch):
    # The caller stops pulling and the store refuses the abandon's writes: the span still ends.
    bread = traced()
    run = bread.run("slow", {"count": 3, "delayMs": 0})
    next(run)

    def busy(*args, **kwargs):
        raise BreadError(STORE_BUSY, "the store is busy")

    monkeypatch.setattr(bread.store, "update_run", busy)
    run.close()  # said, not raised (tests/test_cancel.py)

    assert named(exporter.get_finished_spans(), "invoke_agent slow").attributes["bread.run.status"] == "interrupted"
