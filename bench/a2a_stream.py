"""A2A streaming beside bread's own SSE route: ``message/stream`` events/s against
``POST /agents/slow/run`` (http-sse), on the same gunicorn gevent worker, in the same run.

One bread_sync server (the demo, one gevent worker, http-sse). In each repetition each workload
runs on both routes in turn (rotating which goes first):

- single: one run of ``slow`` with ``count`` 5,000 and ``delayMs`` 0; events/s from the start of
  the request (before connecting) to its last chunk. The native stream's events are the run's
  crumbs (5,002); the A2A stream's are the Task, 5,000 artifact updates and the last status
  update (5,002).
- concurrent: 200 runs of ``slow`` (``count`` 250) at once, aggregate events/s from the first
  request's start to the last chunk.

For both, the worker's CPU time per event (its CPU-time clock) too: what an event costs the
server, whatever the client and the scheduler did meanwhile (a figure that holds on a busy
machine, where the rates swing).

The A2A request is ``message/stream`` on the demo's ``/a2a/slow`` (v0.3) and
``/a2a/slow-v1`` (v1.0, ``A2A-Version: 1.0``), its input a data part ``{count, delayMs}``. The
client is bench/rawhttp.py (one thread, one selector), the same for every route::

    .venv/bin/python bench/a2a_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import harness
import rawhttp
from harness import Figure, Gunicorn

SCRIPT = "a2a_stream.py"
TITLE = "## A2A streaming (message/stream beside the native SSE route)"
AIM_RATIO = 0.7
ROUTES = ("native", "a2a-v0.3", "a2a-v1.0")


def conn(route: str, port: int, count: int) -> rawhttp.Conn:
    if route == "native":
        body: Any = {"input": {"count": count, "delayMs": 0}}
        return rawhttp.Conn(port, rawhttp.request("POST", port, "/agents/slow/run", body))
    v1 = route == "a2a-v1.0"
    part = {"data": {"count": count, "delayMs": 0}} if v1 else {"kind": "data", "data": {"count": count, "delayMs": 0}}
    message = {"role": "ROLE_USER" if v1 else "user", "parts": [part], "messageId": "m"}
    if not v1:
        message["kind"] = "message"
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage" if v1 else "message/stream",
            "params": {"message": message}}  # fmt: skip
    path, headers = ("/a2a/slow-v1", {"A2A-Version": "1.0"}) if v1 else ("/a2a/slow", {})
    return rawhttp.Conn(port, rawhttp.request("POST", port, path, body, headers))


def single(route: str, port: int, count: int, pid: int | None = None) -> tuple[float, float]:
    """Events/s of one task, and the worker's CPU time per event meanwhile (with ``pid``)."""
    cpu = harness.cpu_seconds(pid) if pid else 0.0
    done = rawhttp.Client().fetch(conn(route, port, count), timeout=120)
    if done.error or done.count != count + 2:
        raise RuntimeError(f"{route}: {done.count} events, not {count + 2} ({done.error})")
    spent = harness.cpu_seconds(pid) - cpu if pid else 0.0
    return done.count / (done.finished - done.started), spent / done.count


def concurrent(route: str, port: int, streams: int, count: int, pid: int) -> tuple[float, float]:
    """Aggregate events/s of ``streams`` tasks at once, and the worker's CPU time per event."""
    cpu = harness.cpu_seconds(pid)
    client = rawhttp.Client()
    conns = client.open(conn(route, port, count) for _ in range(streams))
    if not client.pump(conns, timeout=180) or any(c.error or c.count != count + 2 for c in conns):
        client.close(conns)
        raise RuntimeError(f"{route}: concurrent streams failed: {[c.error for c in conns if c.error][:3]}")
    events = sum(c.count for c in conns)
    return events / (max(c.finished for c in conns) - min(c.started for c in conns)), (
        harness.cpu_seconds(pid) - cpu) / events  # fmt: skip


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    harness.raise_open_files(4 * args.streams + 256)
    load = [harness.load_average()]
    kinds = ("single", "cpu", "concurrent", "concurrent cpu")
    samples: dict[str, dict[str, list[float]]] = {kind: {r: [] for r in ROUTES} for kind in kinds}
    env = {"BREAD_DB": str(folder / "bread.db"), "BREAD_TRANSPORT": "http-sse"}
    with Gunicorn("bread", "wsgi:app", folder, env=env) as server:
        single(ROUTES[0], server.port, 100)  # warm up every route once
        for route in ROUTES:
            single(route, server.port, 100)
        for r in range(args.repeat):
            order = list(ROUTES[r % len(ROUTES) :] + ROUTES[: r % len(ROUTES)])
            for route in order:
                rate, cpu = single(route, server.port, args.deltas, server.worker())
                samples["single"][route].append(rate)
                samples["cpu"][route].append(cpu)
            for route in order:
                rate, cpu = concurrent(route, server.port, args.streams, args.each, server.worker())
                samples["concurrent"][route].append(rate)
                samples["concurrent cpu"][route].append(cpu)
    load.append(harness.load_average())
    return {"samples": samples, "load": load}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    out = []
    for kind, what in (("single", f"one task of {args.deltas:,} deltas"),
                       ("concurrent", f"{args.streams} tasks of {args.each} deltas at once")):  # fmt: skip
        native = result["samples"][kind]["native"]
        for route in ROUTES[1:]:
            ours = result["samples"][kind][route]
            ratio = harness.ratios(ours, native)
            met = statistics.median(ratio) >= AIM_RATIO
            out.append(Figure(f"{route} `message/stream`, {what}", ours, "ev/s", "native SSE", native,
                              "A2A / native", ratio, f">= {AIM_RATIO}x", met))  # fmt: skip
    for kind, what in (("cpu", f"one task of {args.deltas:,} deltas"),
                       ("concurrent cpu", f"{args.streams} tasks at once")):  # fmt: skip
        native = result["samples"][kind]["native"]
        for route in ROUTES[1:]:
            ours = result["samples"][kind][route]
            out.append(Figure(f"{route}: worker CPU per event, {what}", ours, "us", "native SSE", native,
                              "A2A / native", harness.ratios(ours, native)))  # fmt: skip
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    return "\n".join([*lines, *harness.table(figures(result, args))])


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--deltas", type=int, default=5_000, help="deltas of the single task (default 5000)")
    parser.add_argument("--streams", type=int, default=200, help="concurrent tasks (default 200)")
    parser.add_argument("--each", type=int, default=250, help="deltas of each concurrent task (default 250)")
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-a2a-", bench, report, figures)


if __name__ == "__main__":
    main()
