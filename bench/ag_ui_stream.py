"""The AG-UI bridge's cost: the demo's ``echo`` through ``POST /ag-ui/run`` beside the same agent
on the native SSE route, ``POST /agents/echo/run``, on one gunicorn server (one gevent worker,
the http-sse transport) in the same run.

Each workload streams the same text back, one delta per word: the AG-UI route answers AG-UI
events (``TEXT_MESSAGE_CONTENT`` per delta, and RUN_STARTED, TEXT_MESSAGE_START/END,
RUN_FINISHED), the native route crumbs (``text:delta`` per delta, and the run's start and end),
one chunk per event either way. In each repetition, each workload runs on both routes in turn
(rotating which goes first):

- single: one run of 5,000 deltas, events/s from the start of the request (before connecting)
  to its last chunk;
- concurrent: 200 runs of 250 deltas at once, aggregate events/s from the first request's start
  to the last chunk.

The worker's CPU time per event over each workload (``/proc/<pid>/stat``) is measured too. Every
AG-UI run is a thread of its own (a session each, as each native run has). The first response of
each workload is checked whole (its events, the deltas, the end) before anything is timed. The
client is bench/rawhttp.py: one thread, one selector, every wait bounded::

    .venv/bin/python bench/ag_ui_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
import rawhttp
from harness import Figure, Gunicorn

from bread_sync.wire import SSEDecoder

SCRIPT = "ag_ui_stream.py"
TITLE = "## The AG-UI bridge (gunicorn, gevent)"
#: The AG-UI route's events/s, at least this many times the native route's.
AIM_RATIO = 0.7
CONCURRENT_SECONDS = 120.0


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


class Route:
    """One way to run echo on the server: its path, its body, and how to read its answer."""

    def __init__(self, name: str, path: str, body: Callable[[str], dict[str, Any]], read: Callable[[bytes], list]):
        self.name, self.path, self.body, self.read = name, path, body, read

    def conn(self, port: int, text: str, record: bool = False) -> rawhttp.Conn:
        return rawhttp.Conn(port, rawhttp.request("POST", port, self.path, self.body(text)), record=record)

    def check(self, server: Gunicorn, text: str, deltas: int) -> int:
        """Run once and check the whole answer; its number of events."""
        conn = rawhttp.Client().fetch(self.conn(server.port, text, record=True))
        events = self.read(conn.body())
        if conn.status != 200 or len(events) != conn.count:
            raise RuntimeError(f"{self.name}: status {conn.status}, {conn.count} chunks, {len(events)} events")
        kinds = [event["type"] for event in events]
        delta, end = ("TEXT_MESSAGE_CONTENT", "RUN_FINISHED") if self.name == "AG-UI" else ("text:delta",
                                                                                           "agent:run:end")  # fmt: skip
        if kinds.count(delta) != deltas or kinds[-1] != end:
            raise RuntimeError(f"{self.name}: {kinds.count(delta)} deltas, not {deltas}; last {kinds[-1]}")
        return conn.count


def ag_ui_body(text: str) -> dict[str, Any]:
    """What @ag-ui/client's HttpAgent sends, on a thread of its own."""
    return {"threadId": f"bench-{uuid.uuid4().hex}", "runId": uuid.uuid4().hex, "protocolVersion": "1.0",
            "tools": [], "context": [], "forwardedProps": {}, "state": {},
            "messages": [{"id": "m1", "role": "user", "content": text}]}  # fmt: skip


def ag_ui_events(body: bytes) -> list[dict[str, Any]]:
    frames = body.decode().split("\n\n")
    return [json.loads(line[5:]) for frame in frames for line in frame.split("\n") if line.startswith("data:")]


def native_events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(event.data) for event in SSEDecoder().feed(body)]


ROUTES = [
    Route("native", "/agents/echo/run", lambda text: {"input": text}, native_events),
    Route("AG-UI", "/ag-ui/run", ag_ui_body, ag_ui_events),
]


# -- workloads -----------------------------------------------------------------------------


def single(server: Gunicorn, route: Route, text: str) -> float:
    conn = rawhttp.Client().fetch(route.conn(server.port, text))
    if conn.error or conn.status != 200:
        raise RuntimeError(f"{route.name}: single run failed: {conn.error or conn.status}")
    return conn.count / (conn.finished - conn.started)


def concurrent(server: Gunicorn, route: Route, text: str, streams: int, events: int) -> float:
    client = rawhttp.Client()
    conns = client.open(route.conn(server.port, text) for _ in range(streams))
    if not client.pump(conns, timeout=CONCURRENT_SECONDS) or any(c.error or c.count != events for c in conns):
        client.close(conns)
        raise RuntimeError(f"{route.name}: concurrent runs failed: {[c.error for c in conns if c.error][:3]}")
    return sum(c.count for c in conns) / (max(c.finished for c in conns) - min(c.started for c in conns))


# -- driving -------------------------------------------------------------------------------


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    env = {"BREAD_DB": str(folder / "bread.db"), "BREAD_TRANSPORT": "http-sse"}
    load = [harness.load_average()]
    long, short = words(args.deltas), words(args.concurrent_deltas)
    samples = {r.name: {"single": [], "single_cpu": [], "concurrent": [], "concurrent_cpu": []} for r in ROUTES}
    with Gunicorn("bread", "wsgi:app", folder, env=env) as server:
        events = {r.name: {"single": r.check(server, long, args.deltas),
                           "concurrent": r.check(server, short, args.concurrent_deltas)} for r in ROUTES}  # fmt: skip
        for rep in range(args.repeat):
            order = ROUTES[rep % 2 :] + ROUTES[: rep % 2]
            for route in order:
                n = events[route.name]["single"]
                rate, cpu = harness.with_worker_cpu(server, n, single, server, route, long)
                samples[route.name]["single"].append(rate)
                samples[route.name]["single_cpu"].append(cpu)
            for route in order:
                n = events[route.name]["concurrent"]
                rate, cpu = harness.with_worker_cpu(server, args.streams * n, concurrent, server, route, short,
                                                    args.streams, n)  # fmt: skip
                samples[route.name]["concurrent"].append(rate)
                samples[route.name]["concurrent_cpu"].append(cpu)
    load.append(harness.load_average())
    return {"events": events, "samples": samples, "load": load}


# -- reporting -----------------------------------------------------------------------------


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    ag_ui, native = result["samples"]["AG-UI"], result["samples"]["native"]

    def pair(name: str, key: str, unit: str, aim: float | None = None) -> Figure:
        ours, theirs = ag_ui[key], native[key]
        ratios = harness.ratios(ours, theirs)
        aimed, met = ("", None) if aim is None else (f">= {aim:.2f}x", statistics.median(ratios) >= aim)
        return Figure(name, ours, unit, "native SSE route", theirs, "AG-UI / native", ratios, aimed, met)

    deltas, streams, each = args.deltas, args.streams, args.concurrent_deltas
    return [
        pair(f"one run of {deltas:,} deltas, events/s", "single", "/s", AIM_RATIO),
        pair(f"one run of {deltas:,} deltas, the worker's CPU time per event", "single_cpu", "us"),
        pair(f"{streams} concurrent runs of {each} deltas, aggregate events/s", "concurrent", "/s", AIM_RATIO),
        pair(f"{streams} concurrent runs of {each} deltas, the worker's CPU time per event", "concurrent_cpu", "us"),
    ]


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    counts = "; ".join(f"{name} {d['single']:,} and {d['concurrent']:,}" for name, d in result["events"].items())
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Workloads per repetition, each on both routes of one server: one run of `echo` streaming "
        f"{args.deltas:,} words back; {args.streams} concurrent runs of {args.concurrent_deltas} words. "
        f"Events per response (single and concurrent): {counts}. The figures are the AG-UI route's; the "
        "baseline is the native route's.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--deltas", type=int, default=5000, help="deltas of the single run (default 5000)")
    parser.add_argument("--streams", type=int, default=200, help="concurrent runs (default 200)")
    parser.add_argument("--concurrent-deltas", type=int, default=250, help="deltas per concurrent run (default 250)")
    harness.add_output_options(parser)
    args = parser.parse_args(argv)
    harness.raise_open_files(args.streams * 2 + 100)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-ag-ui-", bench, report, figures)


if __name__ == "__main__":
    main()
