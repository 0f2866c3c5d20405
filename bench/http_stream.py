"""Streaming over HTTP: bread_sync under gunicorn's gevent worker beside a minimal WSGI app that
streams the same bytes, an event per chunk, from the same gunicorn with the same settings.

For each wire format (SSE: http-sse; NDJSON: http-chunked), one bread_sync server and one
minimal server (bench/minimal_app.py), one gevent worker each, on free loopback ports. First
each workload is run once on bread_sync and its response recorded; the minimal app replays its
events, one chunk each (gunicorn writes one per item an app yields; bread_sync writes together
the events a stream had at once, which a minimal app does not try to). Then, in each repetition, each workload
runs on both servers in turn (rotating which goes first):

- single: one run of ``slow`` with ``count`` 5,000 and ``delayMs`` 0, events/s from the start
  of the request (before connecting) to its last chunk;
- first crumb: ``POST /agents/echo/run``, the time from the start of the request to its first
  complete event (the minimal app: its first chunk), many times, alternating servers;
- concurrent: 200 runs of ``slow`` (``count`` 250, ``delayMs`` 0) at once, aggregate events/s
  from the first request's start to the last chunk;
- lateness: 200 runs of the ``metronome`` agent of bench_agents.py at once, each streaming
  ``count`` deltas on an absolute schedule (delta ``i`` due at ``start + i * period``, the
  200 schedules staggered over one period); each delta's arrival at the client against its
  due time (same machine, same clock). The minimal app holds each chunk to the same schedule.

For single and concurrent, the worker's CPU time (its CPU-time clock) over the workload,
per event, is measured too: what a crumb costs the server, whatever the client and the
scheduler did meanwhile.

The client (bench/rawhttp.py) is one thread on one selector, the same for both servers.
``--profile`` adds a cProfile of the worker during one more single run (NDJSON), see
bench/profile_conf.py. ``--workloads`` runs only some of them (the table then has only their
figures), e.g. the lateness alone, repeated, while working on it::

    .venv/bin/python bench/http_stream.py --repeat 5 --profile --write docs/performance.md
    .venv/bin/python bench/http_stream.py --repeat 6 --workloads lateness
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
import minimal_app
import rawhttp
from harness import Figure, Gunicorn, percentile

from bread_sync.transports.http import DEFAULT_HEARTBEAT_SECONDS
from bread_sync.wire import NDJSON, SSE, NDJSONDecoder, SSEDecoder

SCRIPT = "http_stream.py"
TITLE = "## Streaming over HTTP (gunicorn, gevent)"
WIRES = {"sse": ("http-sse", SSE), "ndjson": ("http-chunked", NDJSON)}
ECHO_TEXT = "the quick brown fox jumps over the lazy dog"
#: Issue 30's aims against the minimal app: events/s at least, the worker's CPU per event at most.
AIM_SINGLE_RATE, AIM_CONCURRENT_RATE = 0.8, 0.7
AIM_SINGLE_CPU, AIM_CONCURRENT_CPU = 1.3, 1.5
#: A delta's p99 lateness under 200 streams, at most this many times the minimal app's.
AIM_LATENESS = 3.0
COALESCE_BYTES = 4096
COALESCED = "-4k"
#: What --workloads can name, each the record(ed) bodies it needs.
WORKLOADS = {"single": ("single",), "first": ("echo",), "concurrent": ("concurrent",), "lateness": ("beat",)}
LEAD_SECONDS = 2.0  # the metronome schedules start this long after their requests go out
STAMP = re.compile(rb"@(\d+\.\d+) ")


# -- workloads -----------------------------------------------------------------------------


class Side:
    """One server and how to ask it for each workload: bread_sync runs its agents, the minimal
    app replays what bread_sync sent."""

    def __init__(self, name: str, server: Gunicorn, wire: str, replay: bool):
        self.name, self.server, self.wire, self.replay = name, server, wire, replay

    def conn(self, kind: str, body: dict[str, Any], **options: Any) -> rawhttp.Conn:
        port = self.server.port
        return rawhttp.Conn(port, rawhttp.request("POST", port, self.path(kind, body), self.payload(body)), **options)

    def path(self, kind: str, body: dict[str, Any]) -> str:
        if not self.replay:
            agent = {"single": "slow", "concurrent": "slow", "echo": "echo", "beat": "metronome"}[kind]
            return f"/agents/{agent}/run"
        query = ""
        if kind == "beat":
            query = f"?start={body['start']!r}&period={body['period']!r}&first=1&count={body['count']}"
        return f"/replay/{self.wire}-{kind}{query}"

    def payload(self, body: Any) -> Any:
        """What a request sends: to bread_sync the run's input, to the minimal app nothing."""
        return b"" if self.replay else {"input": body}


def record(bread: Side, folder: Path, kind: str, body: dict[str, Any], deltas: int) -> int:
    """Run one workload on bread_sync, check what came back, save it for the minimal app;
    the number of events."""
    conn = rawhttp.Client().fetch(bread.conn(kind, body, record=True))
    _, wire = WIRES[bread.wire]
    crumbs = decode(bread.wire, conn.body())
    if len(crumbs) != conn.count or crumbs[-1]["type"] != "agent:run:end":
        raise RuntimeError(f"{bread.wire} {kind}: {conn.count} chunks, {len(crumbs)} crumbs, last {crumbs[-1]}")
    if sum(crumb["type"] == "text:delta" for crumb in crumbs) != deltas:
        raise RuntimeError(f"{bread.wire} {kind}: not {deltas} deltas")
    name, content_type = f"{bread.wire}-{kind}", conn.headers["content-type"]
    events = split_events(bread.wire, conn.body())
    minimal_app.save(folder, name, events, content_type, wire.heartbeat, DEFAULT_HEARTBEAT_SECONDS)
    if kind == "single":  # the same bytes in fewer, larger chunks: what coalesced writes would cost
        chunks = coalesce(events)
        minimal_app.save(folder, name + COALESCED, chunks, content_type, wire.heartbeat, DEFAULT_HEARTBEAT_SECONDS)
    return conn.count


def split_events(wire: str, body: bytes) -> list[bytes]:
    """The body's events, one per item: what the minimal app writes one at a time (bread_sync
    writes together what its stream had at once, which the minimal app does not try to)."""
    end = b"\n\n" if wire == "sse" else b"\n"
    return [part + end for part in body.split(end)[:-1]]


def coalesce(chunks: list[bytes], size: int = COALESCE_BYTES) -> list[bytes]:
    out, current = [], b""
    for chunk in chunks:
        current += chunk
        if len(current) >= size:
            out.append(current)
            current = b""
    return out + [current] if current else out


def decode(wire: str, body: bytes) -> list[dict[str, Any]]:
    """The crumbs of a response, through bread_sync's own sans-IO decoders."""
    if wire == "sse":
        return [json.loads(event.data)["payload"] for event in SSEDecoder().feed(body)]
    return [frame["crumb"] for frame in NDJSONDecoder().feed(body)]


def single(side: Side, deltas: int, coalesced: bool = False) -> float:
    """Events/s of one run (for the minimal app with ``coalesced``: its events in 4 KiB chunks)."""
    conn = rawhttp.Client().fetch(side.conn("single" + (COALESCED if coalesced else ""), {"count": deltas,
                                                                                         "delayMs": 0}))  # fmt: skip
    return (deltas + 2 if coalesced else conn.count) / (conn.finished - conn.started)


def first_crumbs(sides: list[Side], times: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {side.name: [] for side in sides}
    client = rawhttp.Client()
    for i in range(times):
        for side in sides[i % 2 :] + sides[: i % 2]:
            conn = client.fetch(side.conn("echo", ECHO_TEXT))  # type: ignore[arg-type]
            samples[side.name].append(conn.first - conn.started)
    return samples


def concurrent(side: Side, streams: int, deltas: int, events: int) -> float:
    client = rawhttp.Client()
    conns = client.open(side.conn("concurrent", {"count": deltas, "delayMs": 0}) for _ in range(streams))
    if not client.pump(conns, timeout=120) or any(c.error or c.count != events for c in conns):
        client.close(conns)
        raise RuntimeError(f"{side.name}: concurrent streams failed: {[c.error for c in conns if c.error][:3]}")
    return sum(c.count for c in conns) / (max(c.finished for c in conns) - min(c.started for c in conns))


def lateness(side: Side, streams: int, beats: int, period: float) -> dict[str, list[float]]:
    """Each delta's arrival minus its due time, over ``streams`` staggered schedules; for
    bread_sync also when the model produced it (the stamp in its text) and when each run's
    first crumb came (the cost of starting ``streams`` runs at once)."""
    client = rawhttp.Client()
    base = time.time() + LEAD_SECONDS
    starts = [base + j * period / streams for j in range(streams)]
    record = not side.replay
    conns = client.open(side.conn("beat", {"start": s, "period": period, "count": beats, "stamp": True},
                                  stamp=True, record=record) for s in starts)  # fmt: skip
    if not client.pump(conns, timeout=LEAD_SECONDS + beats * period + 60) or any(c.error for c in conns):
        client.close(conns)
        raise RuntimeError(f"{side.name}: metronome streams failed: {[c.error for c in conns if c.error][:3]}")
    started = max(c.first for c in conns) - min(c.started for c in conns)
    out: dict[str, list[float]] = {"late": [], "steady": [], "model": [], "delivery": [], "started": [started]}
    for conn, start in zip(conns, starts, strict=True):
        if conn.count != beats + 2:
            raise RuntimeError(f"{side.name}: a metronome stream had {conn.count} events, not {beats + 2}")
        due = [start + i * period for i in range(beats)]
        out["late"] += [conn.stamps[1 + i] - due[i] for i in range(beats)]
        out["steady"] += [conn.stamps[1 + i] - due[i] for i in range(beats // 2)]
        if record:
            made = [float(stamp) for stamp in STAMP.findall(conn.body())]
            out["model"] += [made[i] - due[i] for i in range(beats)]
            out["delivery"] += [conn.stamps[1 + i] - made[i] for i in range(beats)]
    return out


# -- driving -------------------------------------------------------------------------------


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    bodies = folder / "bodies"
    bodies.mkdir()
    results: dict[str, Any] = {"wires": {}, "load": [harness.load_average()]}
    minimal = Gunicorn("minimal", "minimal_app:app", folder, env={"BENCH_BODIES": str(bodies)}).start()
    try:
        for wire in args.wires:
            with Gunicorn(f"bread-{wire}", "wsgi:app", folder, env=bread_env(folder, wire)) as server:
                sides = [Side("bread_sync", server, wire, replay=False), Side("minimal", minimal, wire, replay=True)]
                results["wires"][wire] = bench_wire(args, sides, bodies)
                results["wires"][wire]["rss_kb"] = {"bread_sync": harness.status_kb(server.worker()),
                                                    "minimal": harness.status_kb(minimal.worker())}  # fmt: skip
    finally:
        minimal.stop()
    if args.profile:
        wire = "ndjson" if "ndjson" in args.wires else args.wires[0]
        results["profile"] = {"wire": wire, "bread_sync": profile(args, folder, wire, replay=False),
                              "minimal": profile(args, folder, wire, replay=True)}  # fmt: skip
    results["load"].append(harness.load_average())
    return results


def bread_env(folder: Path, wire: str) -> dict[str, str]:
    return {"BREAD_DB": str(folder / f"{wire}.db"), "BREAD_TRANSPORT": WIRES[wire][0],
            "BREAD_CONFIG": "bench_agents:config"}  # fmt: skip


def bench_wire(args: argparse.Namespace, sides: list[Side], bodies: Path) -> dict[str, Any]:
    bread, chosen = sides[0], set(args.workloads)
    beat = {"start": time.time(), "period": 0.0, "count": args.beats, "stamp": True}
    recordings = {
        "single": lambda: record(bread, bodies, "single", {"count": args.deltas, "delayMs": 0}, args.deltas),
        "echo": lambda: record(bread, bodies, "echo", ECHO_TEXT, len(ECHO_TEXT.split())),  # type: ignore[arg-type]
        "concurrent": lambda: record(bread, bodies, "concurrent", {"count": args.concurrent_deltas, "delayMs": 0},
                                     args.concurrent_deltas),
        "beat": lambda: record(bread, bodies, "beat", beat, args.beats),
    }  # fmt: skip
    needed = {kind for workload in chosen for kind in WORKLOADS[workload]}
    events = {kind: recorded() for kind, recorded in recordings.items() if kind in needed}
    samples: dict[str, dict[str, list]] = {s.name: {"single": [], "first": [], "concurrent": [], "beat": [],
                                                    "coalesced": [], "single_cpu": [], "concurrent_cpu": [],
                                                    "beat_cpu": []}
                                           for s in sides}  # fmt: skip
    for r in range(args.repeat):
        order = sides[r % 2 :] + sides[: r % 2]
        if "single" in chosen:
            single_pass(args, order, sides, samples, events)
        if "first" in chosen:
            for name, values in first_crumbs(order, args.first_crumbs).items():
                samples[name]["first"].append(values)
        if "concurrent" in chosen:
            concurrent_pass(args, order, samples, events)
        if "lateness" in chosen:
            lateness_pass(args, order, samples, events)
    return {"events": events, "samples": samples}


def single_pass(args: argparse.Namespace, order: list[Side], sides: list[Side], samples: dict, events: dict) -> None:
    for side in order:
        rate, cpu = harness.with_worker_cpu(side.server, events["single"], single, side, args.deltas)
        samples[side.name]["single"].append(rate)
        samples[side.name]["single_cpu"].append(cpu)
    samples["minimal"]["coalesced"].append(single(sides[1], args.deltas, coalesced=True))


def concurrent_pass(args: argparse.Namespace, order: list[Side], samples: dict, events: dict) -> None:
    for side in order:
        each = events["concurrent"]
        conc, cpu = harness.with_worker_cpu(side.server, args.streams * each, concurrent,
                                            side, args.streams, args.concurrent_deltas, each)  # fmt: skip
        samples[side.name]["concurrent"].append(conc)
        samples[side.name]["concurrent_cpu"].append(cpu)


def lateness_pass(args: argparse.Namespace, order: list[Side], samples: dict, events: dict) -> None:
    for side in order:
        beat, cpu = harness.with_worker_cpu(side.server, args.streams * events["beat"], lateness,
                                            side, args.streams, args.beats, args.period)  # fmt: skip
        samples[side.name]["beat"].append(beat)
        samples[side.name]["beat_cpu"].append(cpu)


def profile(args: argparse.Namespace, folder: Path, wire: str, replay: bool) -> dict[str, Any]:
    """One more single run, the worker under cProfile for exactly that request (bench/profile_conf.py)."""
    name = "minimal" if replay else "bread_sync"
    out = folder / f"{name}.prof"
    env = {"BENCH_PROFILE": str(out)}
    env.update({"BENCH_BODIES": str(folder / "bodies")} if replay else {**bread_env(folder, wire),
               "BREAD_DB": str(folder / "profile.db")})  # fmt: skip
    app = "minimal_app:app" if replay else "wsgi:app"
    with Gunicorn(f"{name}-profile", app, folder, env=env, config="bench/profile_conf.py") as server:
        conn = rawhttp.Client().fetch(Side(name, server, wire, replay).conn("single", {"count": args.deltas,
                                                                                       "delayMs": 0}))  # fmt: skip
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return {"rows": harness.profile_rows(out), "events": conn.count, "wall": conn.finished - conn.started}


# -- reporting -----------------------------------------------------------------------------


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    out: list[Figure] = []
    for wire, data in result["wires"].items():
        out += wire_figures(wire.upper(), data["samples"]["bread_sync"], data["samples"]["minimal"], args)
    return out


def wire_figures(label: str, bread: dict[str, list], minimal: dict[str, list], args: argparse.Namespace) -> list:
    def pair(
        name: str,
        values: Callable[[dict[str, list]], list[float]],
        unit: str,
        base: str = "minimal app",
        aim: float | None = None,
        at_most: float | None = None,
    ) -> Figure | None:
        """``aim``: the ratio's median is held to at least it; ``at_most``: to at most it."""
        ours, theirs = values(bread), values(minimal)
        if not ours:  # a workload --workloads left out
            return None
        ratios = [x / y for x, y in zip(ours, theirs, strict=True)]
        median, aimed, met = statistics.median(ratios), "", None
        if aim is not None:
            aimed, met = f">= {aim:.2f}x", median >= aim
        elif at_most is not None:
            aimed, met = f"<= {at_most:.2f}x", median <= at_most
        return Figure(f"{label}: {name}", ours, unit, base, theirs, "bread_sync / minimal", ratios, aimed, met)

    def pct(key: str, p: float, part: str = "late") -> Callable[[dict[str, list]], list[float]]:
        if key == "beat":
            return lambda side: [percentile(rep[part], p) for rep in side["beat"]]
        return lambda side: [percentile(rep, p) for rep in side[key]]

    streams, rate = args.streams, 1 / args.period
    coalesced = minimal["coalesced"]
    out = [
        pair(f"one run of {args.deltas:,} deltas, events/s", lambda side: side["single"], "/s", aim=AIM_SINGLE_RATE),
        Figure(f"{label}: the minimal app streaming those bytes in {COALESCE_BYTES // 1024} KiB chunks, events/s",
               coalesced, "/s", "one chunk per event", minimal["single"], "coalesced / per event",
               [x / y for x, y in zip(coalesced, minimal["single"], strict=True)]) if coalesced else None,
        pair(f"one run of {args.deltas:,} deltas, the worker's CPU time per event", lambda side: side["single_cpu"],
             "us", at_most=AIM_SINGLE_CPU),
        pair(f"time to first crumb, POST /agents/echo/run, median of {args.first_crumbs} a repetition",
             pct("first", 50), "ms", "minimal app, first chunk"),
        pair(f"time to first crumb, POST /agents/echo/run, p90 of {args.first_crumbs} a repetition",
             pct("first", 90), "ms", "minimal app, first chunk"),
        pair(f"{streams} concurrent runs of {args.concurrent_deltas} deltas, aggregate events/s",
             lambda side: side["concurrent"], "/s", aim=AIM_CONCURRENT_RATE),
        pair(f"{streams} concurrent runs of {args.concurrent_deltas} deltas, the worker's CPU time per event",
             lambda side: side["concurrent_cpu"], "us", at_most=AIM_CONCURRENT_CPU),
        pair(f"{streams} runs started at once: until the last one's first crumb",
             lambda side: [rep["started"][0] for rep in side["beat"]], "ms"),
        pair(f"{streams} concurrent streams of {rate:.0f} deltas/s: p50 lateness of a delta", pct("beat", 50), "ms"),
        pair(f"{streams} concurrent streams of {rate:.0f} deltas/s: p99 lateness of a delta", pct("beat", 99), "ms",
             at_most=AIM_LATENESS),
        pair(f"{streams} concurrent streams of {rate:.0f} deltas/s: the worker's CPU time per event (their starts "
             "and ends included)", lambda side: side["beat_cpu"], "us"),
    ]  # fmt: skip
    out.append(pair(f"{streams} concurrent streams of {rate:.0f} deltas/s: p99 lateness of the first {args.beats // 2} "
                    "deltas of each run (no run has ended yet)", pct("beat", 99, "steady"), "ms"))  # fmt: skip
    if bread["beat"]:
        for part, words in (("model", "the model produced it late"), ("delivery", "from the model to the client")):
            out.append(Figure(f"{label}: p99 of the lateness above: {words}", pct("beat", 99, part)(bread), "ms"))
    return [figure for figure in out if figure is not None]


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Workloads per wire and repetition: one run of `slow` ({args.deltas:,} deltas, delayMs 0); "
        f"{args.first_crumbs} `POST /agents/echo/run` ({len(ECHO_TEXT.split())} words) alternating with the "
        f"minimal app; {args.streams} concurrent runs of `slow` ({args.concurrent_deltas} deltas each); "
        f"{args.streams} concurrent `metronome` runs of {args.beats} deltas {args.period * 1e3:.0f} ms apart, "
        f"their schedules starting {LEAD_SECONDS:g} s after the requests. Events per response (bread_sync = minimal "
        "app, chunk for chunk): "
        + "; ".join(f"{wire.upper()} {', '.join(f'{k} {v:,}' for k, v in d['events'].items())}"
                    for wire, d in result["wires"].items()) + ".",
        "",
        *harness.table(figures(result, args)),
        "",
        "Worker memory (VmRSS) after the repetitions: "
        + "; ".join(f"{wire.upper()} bread_sync {d['rss_kb']['bread_sync'] / 1024:.0f} MB, minimal app "
                    f"{d['rss_kb']['minimal'] / 1024:.0f} MB" for wire, d in result["wires"].items()) + ".",
    ]  # fmt: skip
    if "profile" in result:
        lines += ["", *profile_table(result["profile"])]
    return "\n".join(lines)


def profile_table(prof: dict[str, Any], top: int = 15) -> list[str]:
    ours, theirs = prof["bread_sync"], prof["minimal"]
    events = ours["events"]

    mine, base = harness.own_by_module(ours["rows"]), harness.own_by_module(theirs["rows"])
    total, base_total = sum(mine.values()), sum(base.values())
    lines = [
        f"cProfile of the worker during one more {prof['wire'].upper()} run of {events - 2:,} deltas, beside the "
        f"minimal app's worker replaying it (bench/profile_conf.py): {total * 1e6 / events:.0f} us of profiled "
        f"time per event against {base_total * 1e6 / events:.0f} us (the profiler inflates Python calls more than "
        "C calls). Own time per event by module:",
        "",
        "| Module | bread_sync | minimal app |",
        "| --- | ---: | ---: |",
    ]
    for module, own in sorted(mine.items(), key=lambda item: item[1], reverse=True)[:14]:
        lines.append(f"| {module} | {own * 1e6 / events:.1f} us | {base.get(module, 0.0) * 1e6 / events:.1f} us |")
    lines += ["", f"bread_sync's top {top} functions by own time:", "",
              "| Function | Calls | Own s | Cumulative s |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for _, name, calls, own, cumulative in sorted(ours["rows"], key=lambda row: row[3], reverse=True)[:top]:
        lines.append(f"| `{name}` | {calls:,} | {own:.3f} | {cumulative:.3f} |")
    return lines


def add_lateness_options(parser: argparse.ArgumentParser) -> None:
    """The options of the lateness workload's diagnoses (lateness_trace.py, lateness_split.py)."""
    parser.add_argument("--wire", choices=list(WIRES), default="ndjson")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--beats", type=int, default=40)
    parser.add_argument("--period", type=float, default=0.05)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--deltas", type=int, default=5000, help="deltas of the single run (default 5000)")
    parser.add_argument("--first-crumbs", type=int, default=100, help="echo requests per server per repetition")
    parser.add_argument("--streams", type=int, default=200, help="concurrent streams (default 200)")
    parser.add_argument("--concurrent-deltas", type=int, default=250, help="deltas per concurrent run (default 250)")
    parser.add_argument("--beats", type=int, default=40, help="deltas per metronome run (default 40)")
    parser.add_argument("--period", type=float, default=0.05, help="seconds between metronome deltas (0.05)")
    parser.add_argument("--wires", nargs="+", choices=list(WIRES), default=list(WIRES))
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=list(WORKLOADS),
        default=list(WORKLOADS),
        help="which workloads to run (default: all)",
    )
    parser.add_argument("--profile", action="store_true", help="also profile the worker during one run")
    args = parser.parse_args(argv)
    harness.raise_open_files(args.streams * 2 + 100)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-http-", bench, report, figures)


if __name__ == "__main__":
    main()
