"""What the protocol bridges' stream benchmarks share: the demo's ``echo`` through a bridge's
streaming route(s) beside the same agent on the native SSE route, ``POST /agents/echo/run``, on
one gunicorn server (one gevent worker, the http-sse transport) in the same run.

A bridge script (bench/ag_ui_stream.py, bench/ai_sdk_stream.py, bench/openai_stream.py) names
its routes: the path, the body its ecosystem's client sends, and the counting rule (which event
kind is a text delta, which one ends the stream). Each workload streams the same text back, one
delta per word, one chunk per event on every route. In each repetition, each workload runs on
every route in turn (rotating which goes first):

- single: one run of 5,000 deltas, events/s from the start of the request (before connecting)
  to its last chunk;
- concurrent: 200 runs of 250 deltas at once, aggregate events/s from the first request's start
  to the last chunk.

The worker's CPU time per event over each workload (its CPU-time clock) is measured too. Every
bridge run is a conversation of its own (a session each, as each native run has). The first
response of each workload on each route is checked whole (its events, the deltas, the end)
before anything is timed. The client is bench/rawhttp.py: one thread, one selector, every wait
bounded. ``--profile`` adds a cProfile of the worker during one more single run on each route,
by module (bench/profile_conf.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import harness
import rawhttp
from harness import Figure, Gunicorn

from bread_sync.wire import SSEDecoder

#: A bridge route's events/s, at least this many times the native route's.
AIM_RATIO = 0.7
CONCURRENT_SECONDS = 120.0
#: How long a profiled server has to write its profile once the response was read.
PROFILE_SECONDS = 10.0
#: The kind :func:`typed` gives the ``data: [DONE]`` sentinel that ends AI SDK and chat streams.
DONE = "[DONE]"


def typed(event: dict[str, Any]) -> str:
    """The kind of an event that says it in ``type`` (AG-UI, the AI SDK, the Responses API, crumbs)."""
    return event["type"]


@dataclass(frozen=True)
class Route:
    """One way to run echo on the server: its path, the body its client sends for a text, and
    how to count its answer: ``kind`` of each event, the kind a text delta is, the last kind."""

    name: str
    path: str
    body: Callable[[str], dict[str, Any]]
    delta: str
    end: str
    kind: Callable[[dict[str, Any]], str] = typed

    def conn(self, port: int, text: str, record: bool = False) -> rawhttp.Conn:
        return rawhttp.Conn(port, rawhttp.request("POST", port, self.path, self.body(text)), record=record)

    def check(self, server: Gunicorn, text: str, deltas: int) -> int:
        """Run once and check the whole answer, one chunk per event; its number of events."""
        conn = rawhttp.Client().fetch(self.conn(server.port, text, record=True))
        kinds = [self.kind(event) for event in sse_events(conn.body())]
        if conn.status != 200 or len(kinds) != conn.count:
            raise RuntimeError(f"{self.name}: status {conn.status}, {conn.count} chunks, {len(kinds)} events")
        if kinds.count(self.delta) != deltas or kinds[-1] != self.end:
            raise RuntimeError(f"{self.name}: {kinds.count(self.delta)} deltas, not {deltas}; last {kinds[-1]}")
        return conn.count


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON data of each SSE event; the ``[DONE]`` sentinel as ``{"type": "[DONE]"}``."""
    return [{"type": DONE} if e.data == DONE else json.loads(e.data) for e in SSEDecoder().feed(body)]


NATIVE = Route("native", "/agents/echo/run", lambda text: {"input": text}, "text:delta", "agent:run:end")


@dataclass(frozen=True)
class Bridge:
    """A bridge's benchmark: its script and section of docs/performance.md, and its routes."""

    script: str
    title: str
    routes: tuple[Route, ...]

    @property
    def all_routes(self) -> list[Route]:
        return [NATIVE, *self.routes]

    def label(self, route: Route, figure: str) -> str:
        # One bridge route: the section names it. Several: each figure does.
        return figure if len(self.routes) == 1 else f"{route.name}: {figure}"


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


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


def bench(bridge: Bridge, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    env = {"BREAD_DB": str(folder / "bread.db"), "BREAD_TRANSPORT": "http-sse"}
    load = [harness.load_average()]
    long, short = words(args.deltas), words(args.concurrent_deltas)
    routes = bridge.all_routes
    samples = {r.name: {"single": [], "single_cpu": [], "concurrent": [], "concurrent_cpu": []} for r in routes}
    with Gunicorn("bread", "wsgi:app", folder, env=env) as server:
        events = {r.name: {"single": r.check(server, long, args.deltas),
                           "concurrent": r.check(server, short, args.concurrent_deltas)} for r in routes}  # fmt: skip
        for rep in range(args.repeat):
            order = routes[rep % len(routes) :] + routes[: rep % len(routes)]
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
        profiles = {r.name: profile(r, args, folder, env) for r in routes} if args.profile else None
    load.append(harness.load_average())
    return {"events": events, "samples": samples, "load": load, "profiles": profiles}


def profile(route: Route, args: argparse.Namespace, folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """One more single run on ``route``, the worker of a server of its own under cProfile for
    exactly that request (bench/profile_conf.py)."""
    out = folder / f"{route.name.replace(' ', '-')}.prof"
    env = {**env, "BENCH_PROFILE": str(out), "BENCH_PROFILE_PATH": route.path}
    with Gunicorn(f"profile-{out.stem}", "wsgi:app", folder, env=env, config="bench/profile_conf.py") as server:
        conn = rawhttp.Client().fetch(route.conn(server.port, words(args.deltas)))
        deadline = time.monotonic() + PROFILE_SECONDS
        while not out.exists() and time.monotonic() < deadline:  # written once the response is sent
            time.sleep(0.05)
    return {"rows": harness.profile_rows(out), "events": conn.count}


# -- reporting -----------------------------------------------------------------------------


def figures(bridge: Bridge, result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    native = result["samples"][NATIVE.name]
    deltas, streams, each = args.deltas, args.streams, args.concurrent_deltas
    kinds = [
        (f"one run of {deltas:,} deltas, events/s", "single", "/s", AIM_RATIO),
        (f"one run of {deltas:,} deltas, the worker's CPU time per event", "single_cpu", "us", None),
        (f"{streams} concurrent runs of {each} deltas, aggregate events/s", "concurrent", "/s", AIM_RATIO),
        (f"{streams} concurrent runs of {each} deltas, the worker's CPU time per event", "concurrent_cpu", "us", None),
    ]
    out = []
    for route in bridge.routes:
        ours = result["samples"][route.name]
        for name, key, unit, aim in kinds:
            ratios = harness.ratios(ours[key], native[key])
            aimed, met = ("", None) if aim is None else (f">= {aim:.2f}x", statistics.median(ratios) >= aim)
            out.append(Figure(bridge.label(route, name), ours[key], unit, "native SSE route", native[key],
                              f"{route.name} / native", ratios, aimed, met))  # fmt: skip
    return out


def report(bridge: Bridge, result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    counts = "; ".join(f"{name} {d['single']:,} and {d['concurrent']:,}" for name, d in result["events"].items())
    names = " and ".join(route.name for route in bridge.routes)
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Workloads per repetition, each on every route of one server: one run of `echo` streaming "
        f"{args.deltas:,} words back; {args.streams} concurrent runs of {args.concurrent_deltas} words. "
        f"Events per response (single and concurrent): {counts}. The figures are the {names} route's; the "
        "baseline is the native route's.",
        "",
        *harness.table(figures(bridge, result, args)),
    ]
    if result["profiles"]:
        lines += ["", *profile_table(bridge, result["profiles"], args.deltas)]
    return "\n".join(lines)


def profile_table(bridge: Bridge, profiles: dict[str, dict[str, Any]], deltas: int, top: int = 12) -> list[str]:
    """The profiled worker's own time per event by module on every route, then each bridge
    route's top functions."""
    names = [route.name for route in bridge.all_routes]
    modules = {name: harness.own_by_module(profiles[name]["rows"]) for name in names}
    per_event = {name: 1e6 / profiles[name]["events"] for name in names}
    totals = ", ".join(f"{name} {sum(modules[name].values()) * per_event[name]:.0f} us" for name in names)
    heaviest = sorted({m for name in names for m in modules[name]},
                      key=lambda m: max(modules[name].get(m, 0.0) for name in names), reverse=True)  # fmt: skip
    lines = [
        f"cProfile of the worker during one more run of {deltas:,} deltas on each route, a server each "
        f"(`--profile`, bench/profile_conf.py); profiled time per event: {totals} (the profiler inflates "
        "Python calls more than C calls). Own time per event by module:",
        "",
        f"| Module | {' | '.join(names)} |",
        f"| --- |{' ---: |' * len(names)}",
    ]
    for module in heaviest[:top]:
        cells = " | ".join(f"{modules[name].get(module, 0.0) * per_event[name]:.1f} us" for name in names)
        lines.append(f"| {module} | {cells} |")
    for route in bridge.routes:
        rows = sorted(profiles[route.name]["rows"], key=lambda row: row[3], reverse=True)[:top]
        lines += ["", f"{route.name}: top {top} functions by own time:", "",
                  "| Function | Calls | Own s | Cumulative s |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
        lines += [f"| `{name}` | {calls:,} | {own:.3f} | {cumul:.3f} |" for _, name, calls, own, cumul in rows]
    return lines


def main(bridge: Bridge, doc: str, argv: list[str] | None = None) -> None:
    """The command line of a bridge's script (``doc``: its docstring): the workloads' sizes,
    ``--write`` and ``--json``."""
    parser = harness.parser(doc, 5)
    parser.add_argument("--deltas", type=int, default=5000, help="deltas of the single run (default 5000)")
    parser.add_argument("--streams", type=int, default=200, help="concurrent runs (default 200)")
    parser.add_argument("--concurrent-deltas", type=int, default=250, help="deltas per concurrent run (default 250)")
    parser.add_argument("--profile", action="store_true", help="also profile the worker during one run per route")
    args = parser.parse_args(argv)
    harness.raise_open_files(args.streams * 2 + 100)
    prefix = f"bread-bench-{bridge.script.removesuffix('_stream.py').replace('_', '-')}-"
    harness.run(args, argv, bridge.script, bridge.title, prefix, partial(bench, bridge), partial(report, bridge),
                partial(figures, bridge))  # fmt: skip
