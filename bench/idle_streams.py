"""Idle passive streams one gevent worker holds, and its memory, beside a minimal WSGI app.

2,000 (``--streams``) runs of the demo ``writer`` agent are made paused at their approval, in
this process, on a SQLite file; then one bread_sync server (gunicorn, one gevent worker, the
project's gunicorn.conf.py, the default NDJSON transport) serves that file. A thread-free
client (bench/rawhttp.py, raw sockets on one selector) opens ``GET /runs/<id>/stream`` on a
different paused run each, in steps up to 2,000, and waits at each step until every stream has
received its replay through ``human:required``. At 0, 500, 1,000 and 2,000 open streams it
reads the worker's VmRSS from /proc/<worker pid>/status (the worker, not the master), the
worker's CPU use over a few seconds of idling, and how long ``GET /health`` takes. Then it
resumes a few of the paused runs (in this process, through the store: the worker's log
follower relays the continuation to their tails) and checks that those tails receive it to
``agent:run:end``.

The baseline: the minimal app (bench/minimal_app.py) on the same gunicorn settings, holding
the same number of streams that sent the same first bytes (a recorded passive stream of a
paused run) and then idle, with the same heartbeat interval. Each repetition starts fresh
servers::

    .venv/bin/python bench/idle_streams.py --repeat 2 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import harness
import minimal_app
import rawhttp
from harness import Figure, Gunicorn, ratios

from bread_sync import create_bread
from bread_sync.demo import config as demo_config
from bread_sync.stores import sqlite
from bread_sync.transports.http import DEFAULT_HEARTBEAT_SECONDS
from bread_sync.wire import NDJSON

SCRIPT = "idle_streams.py"
TITLE = "## Idle passive streams (one gevent worker)"
AIM_MB = 300
RESUMED = 5
PAUSED = b'"human:required"'
ENDED = b'"agent:run:end"'
OPEN_SECONDS = 120.0
HEALTH_TIMEOUT = 3.0


def make_paused_runs(folder: Path, count: int) -> tuple[list[str], dict[str, str]]:
    """``count`` writer runs paused at their approval: their ids and checkpoint ids."""
    config = demo_config().model_copy(update={"store": sqlite.store(path=folder / "bread.db"), "instance_path": folder})
    bread = create_bread(config)
    runs, checkpoints = [], {}
    try:
        for i in range(count):
            result = bread.run("writer", {"topic": f"idle {i}"}, mode="sync")
            if result.status != "paused":
                raise RuntimeError(f"a writer run ended {result.status}, not paused")
            runs.append(result.run_id)
            checkpoints[result.run_id] = result.checkpoint["checkpointId"]
    finally:
        bread.close()
    return runs, checkpoints


def resume(folder: Path, checkpoint_ids: list[str]) -> float:
    """Approve the runs in this process (another process than the server); when it finished."""
    config = demo_config().model_copy(update={"store": sqlite.store(path=folder / "bread.db"), "instance_path": folder})
    bread = create_bread(config)
    try:
        for checkpoint_id in checkpoint_ids:
            result = bread.resume(checkpoint_id, {"approved": True}, mode="sync")
            if result.status != "completed":
                raise RuntimeError(f"a resumed writer run ended {result.status}")
    finally:
        bread.close()
    return time.perf_counter()


def stream_conn(port: int, path: str) -> rawhttp.Conn:
    return rawhttp.Conn(port, rawhttp.request("GET", port, path), watch=PAUSED)


def sample(server: Gunicorn, idle_seconds: float) -> dict[str, float]:
    """The worker's memory, its CPU use while the streams idle, and a health check."""
    pid = server.worker()
    cpu, start = harness.cpu_seconds(pid), time.perf_counter()
    time.sleep(idle_seconds)
    busy = (harness.cpu_seconds(pid) - cpu) / (time.perf_counter() - start)
    status, seconds = server.get("/health", timeout=HEALTH_TIMEOUT)
    return {"rss_mb": harness.status_kb(pid) / 1024, "cpu": busy, "health": seconds if status == 200 else None}


def ramp(server: Gunicorn, paths: list[str], steps: list[int], idle_seconds: float) -> tuple[dict, Any, list]:
    """Open streams up to each step, wait until each has its replay, sample the worker."""
    client, conns, samples = rawhttp.Client(), [], {}
    samples[0] = sample(server, idle_seconds)
    for step in steps:
        new = client.open(stream_conn(server.port, path) for path in paths[len(conns) : step])
        conns += new
        if not client.pump(new, until=lambda c: c.seen, timeout=OPEN_SECONDS):
            raise RuntimeError(f"{server.name}: {sum(not c.seen for c in new)} streams got no replay at {step}")
        failed = [c for c in new if c.error or c.status != 200]
        if failed:
            raise RuntimeError(f"{server.name}: {len(failed)} streams failed at {step}: {failed[0].error}")
        samples[step] = sample(server, idle_seconds)
    return samples, client, conns


def bench_once(args: argparse.Namespace, folder: Path, runs: list[str], checkpoints: dict[str, str]) -> dict:
    steps = [s for s in (500, 1000, 2000) if s < args.streams] + [args.streams]
    bread_env = {"BREAD_DB": str(folder / "bread.db")}
    result: dict[str, Any] = {}
    with Gunicorn("bread", "wsgi:app", folder / "servers", env=bread_env) as server:
        samples, client, conns = ramp(server, [f"/runs/{r}/stream" for r in runs], steps, args.idle_seconds)
        result["bread_sync"] = samples
        result["bread_sync_after"] = deliver_continuations(folder, server, client, conns, runs, checkpoints)
        client.close(conns)
    with Gunicorn("minimal", "minimal_app:app", folder / "servers", env={"BENCH_BODIES": str(folder)}) as server:
        samples, client, conns = ramp(server, ["/idle/passive"] * args.streams, steps, args.idle_seconds)
        result["minimal"] = samples
        client.close(conns)
    return result


def deliver_continuations(folder: Path, server: Gunicorn, client: rawhttp.Client, conns: list, runs: list[str],
                          checkpoints: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """Resume the first few runs elsewhere; their open tails must carry the continuation to the end."""
    tails = conns[:RESUMED]
    for conn in tails:
        conn.watch, conn.seen = ENDED, False
    resumed_at = resume(folder, [checkpoints[run] for run in runs[:RESUMED]])
    delivered = client.pump(tails, timeout=30.0)
    if not delivered or any(c.error or not c.seen or not c.done for c in tails):
        raise RuntimeError(f"continuations not delivered: {[(c.error, c.seen, c.done) for c in tails]}")
    return {"relay": max(c.finished for c in tails) - resumed_at, "health": sample(server, 0.5)["health"]}


def record_passive(folder: Path, run_id: str) -> None:
    """What a passive stream of a paused run sends before it idles, for the minimal app."""
    with Gunicorn("record", "wsgi:app", folder / "servers", env={"BREAD_DB": str(folder / "bread.db")}) as server:
        client = rawhttp.Client()
        conn = client.open([rawhttp.Conn(server.port, rawhttp.request("GET", server.port, f"/runs/{run_id}/stream"),
                                         record=True, watch=PAUSED)])[0]  # fmt: skip
        if not client.pump([conn], until=lambda c: c.seen, timeout=30):
            raise RuntimeError("the passive stream of a paused run sent no human:required")
        client.close([conn])
    content_type = conn.headers["content-type"]
    minimal_app.save(folder, "passive", conn.chunks, content_type, NDJSON.heartbeat, DEFAULT_HEARTBEAT_SECONDS)


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    start = time.perf_counter()
    runs, checkpoints = make_paused_runs(folder, args.streams + RESUMED * args.repeat)
    made = time.perf_counter() - start
    record_passive(folder, runs[-1])
    reps = []
    for r in range(args.repeat):
        # Each repetition tails runs none before resumed: it skips the ones the last one resumed.
        reps.append(bench_once(args, folder, runs[RESUMED * r :], checkpoints))
    load.append(harness.load_average())
    return {"reps": reps, "made": made, "runs": len(runs), "load": load}


# -- reporting -----------------------------------------------------------------------------


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    reps, n = result["reps"], args.streams
    steps = sorted(reps[0]["bread_sync"])

    def series(side: str, step: int, key: str) -> list[float]:
        return [rep[side][step][key] for rep in reps]

    out = []
    for step in steps:
        ours, theirs = series("bread_sync", step, "rss_mb"), series("minimal", step, "rss_mb")
        aim = f"< {AIM_MB} MB" if step == n else ""
        met = statistics.median(ours) < AIM_MB if step == n else None
        out.append(Figure(f"worker RSS with {step:,} idle streams", ours, "MB", "minimal app", theirs,
                          "bread_sync / minimal", ratios(ours, theirs), aim, met))  # fmt: skip
    per = {side: [(rep[side][n]["rss_mb"] - rep[side][0]["rss_mb"]) * 1024 / n for rep in reps]
           for side in ("bread_sync", "minimal")}  # fmt: skip
    out.append(Figure(f"memory per idle stream (RSS growth 0 to {n:,}, kB)", per["bread_sync"], "", "minimal app",
                      per["minimal"], "bread_sync / minimal", ratios(per["bread_sync"], per["minimal"])))  # fmt: skip
    for step in (0, n):
        ours, theirs = series("bread_sync", step, "cpu"), series("minimal", step, "cpu")
        out.append(Figure(f"worker CPU while {step:,} streams idle (share of one core)", ours, "%", "minimal app",
                          theirs))  # fmt: skip
    out.append(Figure(f"continuation of {RESUMED} runs resumed in another process, until their tails ended",
                      [rep["bread_sync_after"]["relay"] for rep in reps], "ms"))  # fmt: skip
    return out


def health_line(result: dict[str, Any], args: argparse.Namespace) -> str:
    def fmt(value: float | None) -> str:
        return f"no answer within {HEALTH_TIMEOUT:g} s" if value is None else f"{value * 1e3:.1f} ms"

    parts = []
    for side in ("bread_sync", "minimal"):
        steps = sorted(result["reps"][0][side])
        cells = ", ".join(f"{step:,}: " + " / ".join(fmt(rep[side][step]["health"]) for rep in result["reps"])
                          for step in steps)  # fmt: skip
        parts.append(f"{side} ({cells})")
    after = " / ".join(fmt(rep["bread_sync_after"]["health"]) for rep in result["reps"])
    return (f"`GET /health` on a new connection, per step (one value per repetition): {'; '.join(parts)}; "
            f"bread_sync once the {RESUMED} resumed streams had ended: {after}.")  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"{result['runs']:,} paused `writer` runs made in-process in {result['made']:.0f} s; each stream tails "
        f"a different run (NDJSON, the default transport); {args.idle_seconds:g} s of idling at each step. "
        "The worker's settings are gunicorn.conf.py's (`worker_connections` 4000).",
        "",
        *harness.table(figures(result, args)),
        "",
        health_line(result, args),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 2, "repetitions, each with fresh servers")
    parser.add_argument("--streams", type=int, default=2000, help="idle streams at the last step (default 2000)")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="idling measured at each step (default 3)")
    args = parser.parse_args(argv)
    limit = harness.raise_open_files(args.streams + 256)
    if limit < args.streams + 64:
        parser.error(f"the open-file limit is {limit}, too low for {args.streams} streams")
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-idle-", bench, report, figures)


if __name__ == "__main__":
    main()
