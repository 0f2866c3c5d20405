"""Events/s of runs with metrics on, and with tracing on (spans exported over OTLP/HTTP to a local
receiver), each beside the same code with both off, in the same process and repetition.

Two workloads, each as one run and as ``--runs`` runs at once, driven as a gunicorn gevent
worker drives runs (this process is monkey-patched), every mode on a fresh SQLite file. Tool-heavy:
a ``script`` agent of ``--calls`` tool calls, ``--deltas`` text deltas before each
(bench/choke_point.py's agent), and ``--run-calls`` calls in each of the runs at once. Text
streaming, the other streaming benchmarks' (bench/http_stream.py, bench/bridge_stream.py): the
demo's ``slow`` agent, ``--text-deltas`` deltas in one run (``--text-rounds`` of them in a row,
one at a time, per sample) and ``--run-text-deltas`` in each of the runs at once, ``delayMs`` 0.
Events/s is crumbs emitted per second of CPU and of wall clock, from the first run's start to
the last one's end; with tracing on, the exporter's last batch is flushed inside that time.
Metrics are in prometheus_client's multiprocess mode, and the garbage collector tuned, as under
gunicorn. The modes take turns in a rotating order, and each ratio is taken within one
repetition. Beside them, where tracing's cost goes: the CPU time of the spans of one model turn
that calls a tool (its ``chat`` and ``execute_tool`` spans, through the run trace the engine
uses), made with no span processor, queued by the batch processor to an exporter that drops
them, exported over OTLP/HTTP, and in a run not sampled (``OTEL_TRACES_SAMPLER``'s
``parentbased_traceidratio``)::

    .venv/bin/python bench/observability.py --repeat 3 --write docs/performance.md
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # before anything opens a socket or a thread: a gevent worker's setting

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, NamedTuple  # noqa: E402

import gevent  # noqa: E402

# Measure the bread_sync of the checkout this script is in, whatever the venv has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
from choke_point import make_agent  # noqa: E402

from bread_sync import Config, ServerSettings, create_bread  # noqa: E402
from bread_sync import crumbs as c  # noqa: E402
from bread_sync.cancel import CancelToken  # noqa: E402
from bread_sync.demo import slow  # noqa: E402
from bread_sync.models import ModelRequest, TextDelta, ToolCall  # noqa: E402
from bread_sync.server.gunicorn_conf import tune_gc  # noqa: E402
from bread_sync.stores import sqlite  # noqa: E402
from bread_sync.tracing import model_ended  # noqa: E402

SCRIPT = "observability.py"
TITLE = "## Metrics and tracing"
MODES = ("off", "metrics", "tracing")
#: Spans the batch processor holds (its default, 2,048, drops most of 200 runs' spans at once).
SPAN_QUEUE = 2**18
AIMS = {"metrics": 1 - 0.03, "tracing": 1 - 0.10}
#: Where a traced turn's span costs are measured: spans made only, queued, exported; and the
#: spans of a run the standard sampler left out (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``).
SPAN_STAGES = (
    "made, no processor",
    "queued, exporter dropping them",
    "exported over OTLP/HTTP",
    "in a run not sampled (parentbased_traceidratio)",
)
#: Model turns traced per measurement of :func:`span_cost`.
SPAN_TURNS = 2000
#: A receiver of OTLP/HTTP: every POST answered 200 with an empty export response, nothing kept.
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class Workload(NamedTuple):
    """``runs`` runs of ``agent`` on ``input``, started at once, ``rounds`` times in a row."""

    runs: int
    agent: Any
    input: Any
    #: A text run of 5,000 deltas lasts some 30 ms: a sample of one would be mostly the machine's noise.
    rounds: int = 1


def workloads(args: argparse.Namespace) -> dict[str, Workload]:
    """The tool-heavy workloads (their labels as they were before the text ones joined them),
    then the text-streaming ones."""
    return {
        "one run": Workload(1, make_agent(args.calls, args.deltas), "go"),
        f"{args.runs} runs at once": Workload(args.runs, make_agent(args.run_calls, args.deltas), "go"),
        f"text, one run of {args.text_deltas:,} deltas": Workload(
            1, slow, {"count": args.text_deltas, "delayMs": 0}, args.text_rounds
        ),
        f"text, {args.runs} runs of {args.run_text_deltas} deltas at once": Workload(
            args.runs, slow, {"count": args.run_text_deltas, "delayMs": 0}
        ),
    }


def start_receiver() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}/v1/traces"


def exporting_provider(endpoint: str) -> Any:
    """A tracer provider whose batch processor exports over OTLP/HTTP to ``endpoint``: one for the
    whole benchmark, as a server process has one, its connection kept from one measurement to the
    next (a fresh exporter's first connection would cost one run of 5,000 deltas some 10%)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    # A queue that holds every span of 200 runs at once: none dropped, so all of them cost.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), max_queue_size=SPAN_QUEUE))
    return provider


def make_bread(mode: str, folder: Path, agents: list[Any], provider: Any) -> tuple[Any, Callable[[], None]]:
    """A runtime with ``mode`` on (tracing to ``provider``), on a fresh SQLite file; and what ends
    its measured time (the provider's last batch exported)."""
    store = sqlite.store(path=folder / f"{mode}-{time.monotonic_ns()}.db")
    server = ServerSettings(metrics=mode == "metrics")
    bread = create_bread(Config(agents=agents, store=store, instance_path=folder, server=server))
    if mode != "tracing":
        return bread, lambda: None
    from bread_sync.tracing import otel

    bread.tracer = otel.tracer(provider)
    return bread, provider.force_flush


def tracer_at(stage: str, endpoint: str) -> tuple[Any, Any]:
    """bread's tracer on a provider of its own at ``stage`` (see SPAN_STAGES), and the provider."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

    from bread_sync.tracing import otel

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    # What OTEL_TRACES_SAMPLER=parentbased_traceidratio makes, for a run its ratio left out.
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(0.0) if stage == SPAN_STAGES[3] else None)
    if stage != SPAN_STAGES[0]:
        exporter = Dropping() if stage == SPAN_STAGES[1] else OTLPSpanExporter(endpoint=endpoint)
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=SPAN_QUEUE))
    return otel.tracer(provider), provider


def span_cost(stage: str, endpoint: str, deltas: int) -> float:
    """CPU seconds per traced model turn of ``deltas`` text deltas and a tool call (a ``chat``
    and an ``execute_tool`` span), the turns' own work (a scripted stream) left out."""
    tracer, provider = tracer_at(stage, endpoint)
    trace = tracer.run_trace("run_bench", "ses_bench", "bench", None)
    request = ModelRequest(model="script", system="", messages=[], tools=[], signal=CancelToken())
    events = [*(TextDelta(f"word{k} ") for k in range(deltas)), ToolCall(id="call", name="noop", input={})]

    def crumbs() -> Any:
        for turn in range(SPAN_TURNS):
            read, call = trace.model_call("script", "script", request, lambda request: iter(events))
            for _ in read:
                pass
            model_ended(read, call, [], True, [])
            yield {"type": c.TOOL_CALL, "toolName": "noop", "toolCallId": f"call_{turn}", "input": {}}
            yield {"type": c.TOOL_RESULT, "toolName": "noop", "toolCallId": f"call_{turn}", "output": {}}

    cpu = time.process_time()
    for crumb in crumbs():
        trace.committed(crumb)
    trace.end("completed")
    provider.force_flush()
    cpu = time.process_time() - cpu
    provider.shutdown()
    return cpu / SPAN_TURNS


def events_per_second(bread: Any, flush: Callable[[], None], workload: Workload) -> tuple[float, float]:
    """The workload's runs at once, each in a greenlet (its rounds one after another): crumbs emitted per second of this
    process's CPU (its threads' too: SQLite's, the exporter's), and per second of wall clock."""
    gc.collect()  # the garbage of the measurement before is not this one's to collect
    cpu, wall = time.process_time(), time.perf_counter()
    results = []
    for _ in range(workload.rounds):
        greenlets = [
            gevent.spawn(bread.run, workload.agent.id, workload.input, mode="sync") for _ in range(workload.runs)
        ]
        gevent.joinall(greenlets, raise_error=True)
        results += [g.value for g in greenlets]
    flush()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert all(r.status == "completed" for r in results), {r.status for r in results}
    events = sum(len(r.crumbs) for r in results)
    return events / cpu, events / wall


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)  # before prometheus_client is imported
    measured = workloads(args)
    rates: dict[str, dict[str, list[tuple[float, float]]]] = {w: {m: [] for m in MODES} for w in measured}
    spans: dict[str, list[float]] = {stage: [] for stage in SPAN_STAGES}
    receiver, endpoint = start_receiver()
    provider = exporting_provider(endpoint)
    tune_gc()  # as a worker's post_worker_init does: a full pass of a larger heap would cost each run more
    load = [harness.load_average()]
    try:
        for rep in range(-1, args.repeat):  # the first round warms up (imports, first connections): not kept
            for name, workload in measured.items():
                for mode in MODES[rep % 3 :] + MODES[: rep % 3]:
                    bread, flush = make_bread(mode, folder, [workload.agent], provider)
                    try:
                        rate = events_per_second(bread, flush, workload)
                    finally:
                        bread.close()
                    if rep >= 0:
                        rates[name][mode].append(rate)
            for stage in SPAN_STAGES:
                cost = span_cost(stage, endpoint, args.deltas)
                if rep >= 0:
                    spans[stage].append(cost)
    finally:
        provider.shutdown()
        receiver.terminate()
        receiver.wait(10)
    load.append(harness.load_average())
    return {"rates": rates, "spans": spans, "load": load}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[harness.Figure]:
    """Per workload and mode, events per CPU second (held to the aim: the machine's other work
    does not move it) and per wall-clock second, each over both off."""
    out = []
    for workload, by_mode in result["rates"].items():
        for mode in ("metrics", "tracing"):
            for index, clock in enumerate(("CPU", "wall-clock")):
                ours, off = [r[index] for r in by_mode[mode]], [r[index] for r in by_mode["off"]]
                ratios = harness.ratios(ours, off)
                aim, met = (
                    (f">= {AIMS[mode]:.2f}x", harness.summary(ratios)[0] >= AIMS[mode]) if index == 0 else ("", None)
                )
                out.append(harness.Figure(f"{workload}, {mode} on: events per {clock} second", ours, "/s",
                                          "both off", off, "/ both off", ratios, aim=aim, met=met))  # fmt: skip
    for stage, costs in result["spans"].items():
        out.append(harness.Figure(f"a traced turn's 2 spans, {stage}: CPU per turn", costs, "us"))
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Tool-heavy (the rows 'one run' and '{args.runs} runs at once'): one run of {args.calls} tool calls, "
        f"{args.deltas} text deltas before each, and {args.runs} runs at once of {args.run_calls} calls each. "
        f"Text streaming (the rows 'text, ...', the workload of bench/http_stream.py and bench/bridge_stream.py): "
        f"the demo's `slow` agent, one run of {args.text_deltas:,} deltas ({args.text_rounds} in a row per sample, "
        f"one at a time) and {args.runs} runs at once of {args.run_text_deltas} deltas each, delayMs 0. Runs "
        "driven by greenlets in one monkey-patched process with the garbage collector tuned as in a worker "
        "(gunicorn_conf.tune_gc), each mode on a fresh SQLite file. Metrics in prometheus_client's multiprocess "
        "mode (as under gunicorn); tracing with the OpenTelemetry SDK's batch processor exporting over OTLP/HTTP to "
        "a receiver in another process, its last batch flushed inside the measured time (its batch processor's "
        f"default settings but a queue of {SPAN_QUEUE:,} spans; protobuf {protobuf_backend()}). Events are counted per "
        "second of this process's CPU time (its threads' included), which other processes on the machine do not "
        "change, and per second of wall clock, which they do. Aims: metrics cost at most 3% of the events/s, "
        f"tracing at most 10%. The last {len(SPAN_STAGES)} rows: the CPU time of the spans of one model turn that "
        f"calls a tool ({SPAN_TURNS:,} turns of {args.deltas} text deltas through one run trace), made with no span "
        "processor, queued by the batch processor to an exporter that drops them, exported over OTLP/HTTP, and "
        "exported over OTLP/HTTP by a provider whose sampler (what OTEL_TRACES_SAMPLER=parentbased_traceidratio "
        "makes) left the run out.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def protobuf_backend() -> str:
    """Which protobuf encodes the OTLP exporter's requests: its version and implementation
    (``upb``, in C, or ``python``, several times slower)."""
    from google.protobuf import __version__
    from google.protobuf.internal import api_implementation

    return f"{__version__}, {api_implementation.Type()}"


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--calls", type=int, default=1000, help="tool calls of the one run (default 1000)")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas before each call (default 10)")
    parser.add_argument("--runs", type=int, default=200, help="runs at once (default 200)")
    parser.add_argument("--run-calls", type=int, default=10, help="tool calls of each of them (default 10)")
    parser.add_argument("--text-deltas", type=int, default=5000, help="deltas of the one text run (default 5000)")
    parser.add_argument(
        "--text-rounds", type=int, default=10, help="the one text run, times in a row per sample (default 10)"
    )
    parser.add_argument(
        "--run-text-deltas", type=int, default=250, help="deltas of each text run at once (default 250)"
    )
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-observability-", bench, report, figures)


if __name__ == "__main__":
    main()
