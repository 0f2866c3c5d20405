"""The Python client's HTTP transport reading one run's stream, beside a raw socket reader of
the same kind of stream, from the same server in the same repetition.

For each wire format (SSE: http-sse; NDJSON: http-chunked), one bread_sync server (one gevent
worker). In each repetition, one run of ``slow`` with ``count`` 5,000 and ``delayMs`` 0 is read
by each reader in turn (rotating which goes first), events/s from the start of the request to
its last event, and the CPU each reader's process spent per event (``time.process_time()``;
the server is another process), which the machine's load sways less than the rate:

- client: ``create_agent_client(http.transport(url)).thread().send("slow", ...)`` iterated to
  its end (httpx2, the stream reader's decoding and dedup, the facade's frames);
- raw: bench/rawhttp.py, one non-blocking socket on a selector that only splits the chunked
  body into events, decoding nothing.

::

    .venv/bin/python bench/client_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import harness
import rawhttp
from harness import Figure, Gunicorn, ratios

from bread_sync.client import create_agent_client, http

SCRIPT = "client_stream.py"
TITLE = "## The Python client reading a stream (HTTP)"
WIRES = {"sse": "http-sse", "ndjson": "http-chunked"}
AIM_RATIO = 0.5


def client_rate(url: str, deltas: int) -> tuple[float, float]:
    """Events/s and CPU seconds per event."""
    with create_agent_client(http.transport(url)) as client:
        started, cpu = time.perf_counter(), time.process_time()
        run = client.thread().send("slow", {"count": deltas, "delayMs": 0})
        count = sum(1 for _ in run)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if count != deltas + 2 or run.outcome().status != "completed":
        raise RuntimeError(f"the client read {count} events, not {deltas + 2}")
    return count / elapsed, cpu / count


def raw_rate(port: int, deltas: int) -> tuple[float, float]:
    """Events/s and CPU seconds per event."""
    body = {"input": {"count": deltas, "delayMs": 0}}
    cpu = time.process_time()
    conn = rawhttp.Client().fetch(rawhttp.Conn(port, rawhttp.request("POST", port, "/agents/slow/run", body)))
    cpu = time.process_time() - cpu
    if conn.error or conn.count < deltas + 2:
        raise RuntimeError(f"the raw reader read {conn.count} events ({conn.error})")
    return conn.count / (conn.finished - conn.started), cpu / conn.count


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"wires": {}, "load": [harness.load_average()]}
    for wire in args.wires:
        env = {"BREAD_DB": str(folder / f"{wire}.db"), "BREAD_TRANSPORT": WIRES[wire]}
        with Gunicorn(f"bread-{wire}", "wsgi:app", folder, env=env) as server:
            url = f"http://127.0.0.1:{server.port}"
            client_rate(url, 100)  # warm both paths up
            raw_rate(server.port, 100)
            samples: dict[str, list[float]] = {"client": [], "raw": [], "client_cpu": [], "raw_cpu": []}
            readers = [("client", client_rate, url), ("raw", raw_rate, server.port)]
            for i in range(args.repeat):
                for name, measure, where in readers[i % 2 :] + readers[: i % 2]:
                    rate, cpu = measure(where, args.deltas)
                    samples[name].append(rate)
                    samples[f"{name}_cpu"].append(cpu)
            results["wires"][wire] = samples
    results["load"].append(harness.load_average())
    return results


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    out = []
    for wire, s in result["wires"].items():
        ratio = ratios(s["client"], s["raw"])
        out.append(Figure(f"{wire}: one run of {args.deltas:,} deltas, read by the client", s["client"], "/s",
                          "a raw socket reader", s["raw"], "client / raw", ratio, f">= {AIM_RATIO}x",
                          statistics.median(ratio) >= AIM_RATIO))  # fmt: skip
        out.append(Figure(f"{wire}: the client's CPU per event", s["client_cpu"], "us", "the raw reader's",
                          s["raw_cpu"], "client / raw", ratios(s["client_cpu"], s["raw_cpu"])))  # fmt: skip
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        "Events/s from the start of the request to the run's last event, each reader on its own run of the same "
        "agent, in turn, against one gevent worker; the raw reader decodes nothing, the client decodes every "
        "event into a frame and checks its seq. The CPU rows are each reader's own process time per event (the "
        "server's is not in them).",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--deltas", type=int, default=5_000, help="text deltas of the run (default 5000)")
    parser.add_argument("--wires", nargs="+", choices=sorted(WIRES), default=["sse", "ndjson"])
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-client-", bench, report, figures)


if __name__ == "__main__":
    main()
