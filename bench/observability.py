"""Events/s of runs with metrics on, and with tracing on (spans exported over OTLP/HTTP to a local
receiver), each beside the same code with both off, in the same process and repetition.

Two workloads, driven as a gunicorn gevent worker drives runs (this process is monkey-patched):
one run of a ``script`` agent (``--calls`` tool calls, ``--deltas`` text deltas before each,
bench/choke_point.py's agent) and ``--runs`` runs of a smaller one at once (``--run-calls``
calls each), every mode on a fresh SQLite file. Events/s is crumbs emitted over wall-clock
seconds, from the first run's start to the last one's end; with tracing on, the exporter's last
batch is flushed inside that time. Metrics are in prometheus_client's multiprocess mode, as under
gunicorn. The modes take turns in a rotating order, and each ratio is taken within one
repetition. Beside them, where tracing's cost goes: the CPU time of the spans of one model turn
that calls a tool (its ``chat`` and ``execute_tool`` spans, through the run trace the engine
uses), made with no span processor, queued by the batch processor to an exporter that drops
them, and exported over OTLP/HTTP::

    .venv/bin/python bench/observability.py --repeat 3 --write docs/performance.md
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # before anything opens a socket or a thread: a gevent worker's setting

import argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

# Measure the bread_sync of the checkout this script is in, whatever the venv has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
from choke_point import make_agent  # noqa: E402

from bread_sync import Config, ServerSettings, create_bread  # noqa: E402
from bread_sync import crumbs as c  # noqa: E402
from bread_sync.cancel import CancelToken  # noqa: E402
from bread_sync.models import ModelRequest, TextDelta, ToolCall  # noqa: E402
from bread_sync.stores import sqlite  # noqa: E402

SCRIPT = "observability.py"
TITLE = "## Metrics and tracing"
MODES = ("off", "metrics", "tracing")
#: Spans the batch processor holds (its default, 2,048, drops most of 200 runs' spans at once).
SPAN_QUEUE = 2**18
AIMS = {"metrics": 1 - 0.03, "tracing": 1 - 0.10}
#: Where a traced turn's span costs are measured: spans made only, queued, exported.
SPAN_STAGES = ("made, no processor", "queued, exporter dropping them", "exported over OTLP/HTTP")
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


def start_receiver() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}/v1/traces"


def make_bread(mode: str, folder: Path, agents: list[Any], endpoint: str) -> tuple[Any, Callable[[], None]]:
    """A runtime with ``mode`` on, on a fresh SQLite file; and what ends its measured time (the
    tracer's last batch exported)."""
    store = sqlite.store(path=folder / f"{mode}-{time.monotonic_ns()}.db")
    server = ServerSettings(metrics=mode == "metrics")
    bread = create_bread(Config(agents=agents, store=store, instance_path=folder, server=server))
    if mode != "tracing":
        return bread, lambda: None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from bread_sync.tracing import otel

    provider = TracerProvider()
    # A queue that holds every span of 200 runs at once: none dropped, so all of them cost.
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), max_queue_size=SPAN_QUEUE)
    provider.add_span_processor(processor)
    bread.tracer = otel.tracer(provider)
    return bread, lambda: provider.force_flush()


def tracer_at(stage: str, endpoint: str) -> tuple[Any, Any]:
    """bread's tracer on a provider of its own at ``stage`` (see SPAN_STAGES), and the provider."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from bread_sync.tracing import otel

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
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
            for _ in trace.model_call("script", "script", request, lambda request: iter(events)):
                pass
            yield {"type": c.TOOL_CALL, "toolName": "noop", "toolCallId": f"call_{turn}", "input": {}}
            yield {"type": c.TOOL_RESULT, "toolName": "noop", "toolCallId": f"call_{turn}", "output": {}}

    cpu = time.process_time()
    for _ in trace.follow(crumbs(), lambda: "completed"):
        pass
    provider.force_flush()
    cpu = time.process_time() - cpu
    provider.shutdown()
    return cpu / SPAN_TURNS


def events_per_second(bread: Any, flush: Callable[[], None], agent: str, runs: int) -> tuple[float, float]:
    """``runs`` runs of ``agent`` at once, each in a greenlet: crumbs emitted per second of this
    process's CPU (its threads' too: SQLite's, the exporter's), and per second of wall clock."""
    cpu, wall = time.process_time(), time.perf_counter()
    greenlets = [gevent.spawn(bread.run, agent, "go", mode="sync") for _ in range(runs)]
    gevent.joinall(greenlets, raise_error=True)
    flush()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    results = [g.value for g in greenlets]
    assert all(r.status == "completed" for r in results), {r.status for r in results}
    events = sum(len(r.crumbs) for r in results)
    return events / cpu, events / wall


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)  # before prometheus_client is imported
    workloads = {"one run": (1, make_agent(args.calls, args.deltas)),
                 f"{args.runs} runs at once": (args.runs, make_agent(args.run_calls, args.deltas))}  # fmt: skip
    rates: dict[str, dict[str, list[tuple[float, float]]]] = {w: {m: [] for m in MODES} for w in workloads}
    spans: dict[str, list[float]] = {stage: [] for stage in SPAN_STAGES}
    receiver, endpoint = start_receiver()
    load = [harness.load_average()]
    try:
        for rep in range(-1, args.repeat):  # the first round warms up (imports, first connections): not kept
            for workload, (runs, agent) in workloads.items():
                for mode in MODES[rep % 3 :] + MODES[: rep % 3]:
                    bread, flush = make_bread(mode, folder, [agent], endpoint)
                    try:
                        rate = events_per_second(bread, flush, agent.id, runs)
                    finally:
                        bread.close()
                    if rep >= 0:
                        rates[workload][mode].append(rate)
            for stage in SPAN_STAGES:
                cost = span_cost(stage, endpoint, args.deltas)
                if rep >= 0:
                    spans[stage].append(cost)
    finally:
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
        f"One run: {args.calls} tool calls, {args.deltas} text deltas before each; {args.runs} runs at once: "
        f"{args.run_calls} calls each, driven by greenlets in one monkey-patched process (a gevent worker's "
        "setting), each mode on a fresh SQLite file. Metrics in prometheus_client's multiprocess mode (as "
        "under gunicorn); tracing with the OpenTelemetry SDK's batch processor exporting over OTLP/HTTP to a "
        "receiver in another process, its last batch flushed inside the measured time. Events are counted "
        "per second of this process's CPU time (its threads' included), which other processes on the machine "
        "do not change, and per second of wall clock, which they do. Aims: metrics cost at most 3% of the "
        "events/s, tracing at most 10%. The last three rows: the CPU time of the spans of one model turn that "
        f"calls a tool ({SPAN_TURNS:,} turns of {args.deltas} text deltas through one run trace), made with no "
        "span processor, queued by the batch processor to an exporter that drops them, and exported over OTLP/HTTP.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--calls", type=int, default=1000, help="tool calls of the one run (default 1000)")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas before each call (default 10)")
    parser.add_argument("--runs", type=int, default=200, help="runs at once (default 200)")
    parser.add_argument("--run-calls", type=int, default=10, help="tool calls of each of them (default 10)")
    harness.add_output_options(parser)
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-observability-", bench, report, figures)


if __name__ == "__main__":
    main()
