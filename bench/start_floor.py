"""How near a run's start can come to the minimal app on this stack: bench/http_stream.py's two
start figures (time to first crumb, 200 runs started at once) for bread_sync and for the floor
of a durable start (bench/floor_app.py: Flask parsing the JSON body, then 0, 1 or 3 SQLite
commits, then the same bytes), each against the minimal app (bench/minimal_app.py) in the same
repetition. What the aim of 2x leaves for everything else a start does::

    .venv/bin/python bench/start_floor.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import harness
import http_stream
import rawhttp
from harness import Figure, Gunicorn

SCRIPT = "start_floor.py"
TITLE = "## The floor of a start (Flask and SQLite commits)"
FLOORS = (0, 1, 3)
STREAMS = 200
BEATS = 4  # the lateness workload's runs, cut short: only their starts are timed


class FloorSide(http_stream.Side):
    """The floor app, asked as the minimal app is (its recorded bytes) but with bread_sync's
    JSON body, which it parses."""

    def payload(self, body: Any) -> Any:
        return {"input": body}


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    bodies = folder / "bodies"
    bodies.mkdir()
    results: dict[str, Any] = {"load": [harness.load_average()]}
    servers: list[Gunicorn] = []
    try:
        bread = started(servers, Gunicorn("bread", "wsgi:app", folder, env=http_stream.bread_env(folder, args.wire)))
        sides = [http_stream.Side("bread_sync", bread, args.wire, replay=False)]
        record_bodies(sides[0], bodies)
        minimal = started(servers, Gunicorn("minimal", "minimal_app:app", folder, env={"BENCH_BODIES": str(bodies)}))
        sides.append(http_stream.Side("minimal", minimal, args.wire, replay=True))
        for commits in FLOORS:
            env = {"BENCH_BODIES": str(bodies), "FLOOR_COMMITS": str(commits), "FLOOR_DB": str(folder / "floor.db")}
            floor = started(servers, Gunicorn(f"floor{commits}", "floor_app:app", folder, env=env))
            sides.append(FloorSide(floor_name(commits), floor, args.wire, replay=True))
        results["samples"] = measure(args, sides)
    finally:
        for server in servers:
            server.stop()
    results["load"].append(harness.load_average())
    return results


def started(servers: list[Gunicorn], server: Gunicorn) -> Gunicorn:
    servers.append(server)  # stopped whatever happens next, even if it does not come up
    return server.start()


def record_bodies(bread: http_stream.Side, bodies: Path) -> None:
    """What the minimal and floor apps replay: bread_sync's echo response, and a metronome's
    (bench/http_stream.py's recordings, checked as that script checks them)."""
    beat = {"start": time.time(), "period": 0.0, "count": BEATS, "stamp": True}
    http_stream.record(bread, bodies, "echo", http_stream.ECHO_TEXT, len(http_stream.ECHO_TEXT.split()))
    http_stream.record(bread, bodies, "beat", beat, BEATS)


def measure(args: argparse.Namespace, sides: list[http_stream.Side]) -> dict[str, dict[str, list[float]]]:
    samples = {side.name: {"first": [], "started": []} for side in sides}
    for repetition in range(args.repeat):
        order = sides[repetition % len(sides) :] + sides[: repetition % len(sides)]
        firsts: dict[str, list[float]] = {side.name: [] for side in sides}
        client = rawhttp.Client()
        for i in range(args.first_crumbs):  # one request to each server in turn, rotating who goes first
            for side in order[i % len(order) :] + order[: i % len(order)]:
                conn = client.fetch(side.conn("echo", http_stream.ECHO_TEXT))
                firsts[side.name].append(conn.first - conn.started)
        for side in order:
            samples[side.name]["first"].append(statistics.median(firsts[side.name]))
            started = http_stream.lateness(side, STREAMS, BEATS, 0.05)["started"][0]
            samples[side.name]["started"].append(started)
    return samples


def floor_name(commits: int) -> str:
    return f"Flask + {commits} commits" if commits != 1 else "Flask + 1 commit"


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    samples, minimal = result["samples"], result["samples"]["minimal"]
    out = []
    for key, label in (("first", "time to first crumb, median"), ("started", f"{STREAMS} runs started at once")):
        for name in ["bread_sync", *(floor_name(c) for c in FLOORS)]:
            values = samples[name][key]
            ratios = harness.ratios(values, minimal[key])
            out.append(Figure(f"{args.wire.upper()}: {label}: {name}", values, "ms", "minimal app", minimal[key],
                              "x", ratios))  # fmt: skip
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Per repetition: {args.first_crumbs} `POST /agents/echo/run` to each server in turn (the floor apps "
        f"and the minimal app answer with bread_sync's recorded bytes), then {STREAMS} metronome runs "
        "started at once on each, until the last one's first crumb (bench/http_stream.py's figures).",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 3)
    parser.add_argument("--first-crumbs", type=int, default=100, help="echo requests per server per repetition")
    parser.add_argument("--wire", choices=sorted(http_stream.WIRES), default="sse")
    args = parser.parse_args(argv)
    harness.raise_open_files(STREAMS * 2 + 100)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-floor-", bench, report, figures)


if __name__ == "__main__":
    main()
