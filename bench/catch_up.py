"""Catch-up cost: ``GET /runs/<id>/stream?after=N`` on a completed run with a 100,000-crumb log,
for N near the end and near the start, beside the same on a 1,000-crumb log.

Both logs are written straight through the SQLite store's ``append_crumbs`` (batches of 5,000,
one transaction each) into one file, with run records marked completed; then one bread_sync
server (gunicorn, one gevent worker, NDJSON) serves that file. Each request is timed from its
start to the last chunk of its response, which ends after the run's terminal crumb. In each
repetition, in rotating order:

- 100 rows near the end: ``after`` = log length - 100, on both logs;
- 1,000 rows near the end: on the 100,000-crumb log ``after`` = 99,000, on the 1,000-crumb log
  the whole log;
- near the start: ``after`` = 100 on the 100,000-crumb log (99,900 rows), normalised per row
  returned, against the whole 1,000-crumb log per row.

If the cost follows the rows returned and not the log, the first two ratios are about 1 and so
is the third. The worker's peak memory (VmHWM) is read before and after the first 99,900-row
catch-up::

    .venv/bin/python bench/catch_up.py --repeat 5 --write docs/performance.md
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

from bread_sync.clock import now_iso
from bread_sync.crumbs import Frame
from bread_sync.stores import sqlite
from bread_sync.stores.sql import SELECT_CRUMBS

SCRIPT = "catch_up.py"
TITLE = "## Catch-up from the log (`?after=N`)"
BATCH = 5000
AIM_RATIO = 1.5
PROBE_AFTER = 0.1
ENDED = b'"agent:run:end"'


def crumb(run_id: str, seq: int, last: int, agent_id: str = "bench") -> dict[str, Any]:
    """A realistic mix: run start, then aggregated text, tool calls and results, run end."""
    if seq == 1:
        return {"type": "agent:run:start", "runId": run_id, "agentId": agent_id, "sessionId": "ses_bench",
                "input": "go"}  # fmt: skip
    if seq == last:
        return {"type": "agent:run:end", "runId": run_id, "output": "done"}
    kind = seq % 3
    if kind == 0:
        return {"type": "text:delta", "runId": run_id, "delta": f"Step {seq}: the quick brown fox jumps over the dog. "}
    if kind == 1:
        return {"type": "tool:call", "runId": run_id, "toolCallId": f"call_{seq}", "toolName": "lookup",
                "input": {"query": f"item {seq}"}}  # fmt: skip
    return {"type": "tool:result", "runId": run_id, "toolCallId": f"call_{seq - 1}", "toolName": "lookup",
            "output": {"found": True, "id": seq}}  # fmt: skip


def write_log(store: Any, run_id: str, length: int, agent_id: str = "bench") -> None:
    """A completed run of ``agent_id`` whose log is ``length`` crumbs of :func:`crumb`."""
    now = now_iso()
    record = {"id": run_id, "agentId": agent_id, "sessionId": "ses_bench", "status": "completed",
              "checkpointId": None, "owner": None, "leaseUntil": 0.0, "cancelRequested": False, "createdAt": now,
              "updatedAt": now}  # fmt: skip
    if not store.create_run(record):
        raise RuntimeError(f"run {run_id} exists")
    for first in range(1, length + 1, BATCH):
        seqs = range(first, min(first + BATCH, length + 1))
        store.append_crumbs(run_id, [Frame(run_id, seq, crumb(run_id, seq, length, agent_id)) for seq in seqs])
    if store.last_seq(run_id) != length:
        raise RuntimeError(f"run {run_id}: the log has {store.last_seq(run_id)} crumbs, not {length}")


def query_plan(path: Path) -> str:
    import sqlite3

    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {SELECT_CRUMBS}", ("big", 100, -1)).fetchall()
    return "; ".join(row[-1] for row in rows)


def catch_up_queries(big: int, small: int) -> dict[str, tuple[str, int, int]]:
    """Each catch-up timed: (run, after, rows it returns), on the logs ``big`` and ``small``."""
    near = min(100, small)
    return {
        "big_end_100": ("big", big - near, near),
        "small_end_100": ("small", small - near, near),
        "big_end_1000": ("big", big - small, small),
        "small_all": ("small", 0, small),
        "big_start": ("big", 100, big - 100),
    }


def catch_up(server: Gunicorn, run_id: str, after: int, rows: int, probe: bool = False) -> dict[str, float]:
    """One catch-up read to its end. ``probe``: also send ``GET /health`` to the same worker
    ``PROBE_AFTER`` seconds into it, and time that (the worker serves everyone else meanwhile)."""
    port, client = server.port, rawhttp.Client()
    conn = rawhttp.Conn(port, rawhttp.request("GET", port, f"/runs/{run_id}/stream?after={after}"), watch=ENDED)
    conns = client.open([conn])
    if probe:
        client.pump(conns, timeout=PROBE_AFTER)  # sends the request; returns at the deadline
        conns += client.open([rawhttp.Conn(port, rawhttp.request("GET", port, "/health"))])
    if not client.pump(conns, timeout=120) or any(c.error for c in conns):
        raise RuntimeError(f"{run_id} after {after}: {[c.error for c in conns]}")
    if conn.status != 200 or conn.count != rows or not conn.seen:
        raise RuntimeError(f"{run_id} after {after}: status {conn.status}, {conn.count} events, not {rows}")
    timing = {"total": conn.finished - conn.started, "first": conn.first - conn.started}
    if probe:
        timing["health"] = conns[1].finished - conns[1].started
        timing["health_idle"] = statistics.median(server.get("/health")[1] for _ in range(3))
    return timing


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    db = folder / "catch-up.db"
    store = sqlite.store(path=db)
    start = time.perf_counter()
    try:
        write_log(store, "big", args.big)
        write_log(store, "small", args.small)
    finally:
        store.close()
    built = time.perf_counter() - start
    queries = catch_up_queries(args.big, args.small)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in queries}
    with Gunicorn("bread", "wsgi:app", folder, env={"BREAD_DB": str(db)}) as server:
        pid = server.worker()
        for name in ("small_end_100", "small_all", "big_end_100", "big_end_1000"):
            catch_up(server, *queries[name])
        peak_before = harness.status_kb(pid, "VmHWM")
        catch_up(server, *queries["big_start"])
        peak_after = harness.status_kb(pid, "VmHWM")
        for r in range(args.repeat):
            names = list(queries)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                samples[name].append(catch_up(server, *queries[name], probe=name == "big_start"))
    load.append(harness.load_average())
    return {"samples": samples, "queries": queries, "built": built, "plan": query_plan(db), "load": load,
            "peak_mb": (peak_before / 1024, peak_after / 1024)}  # fmt: skip


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    s, q = result["samples"], result["queries"]

    def total(name: str, per_row: bool = False) -> list[float]:
        rows = q[name][2]
        return [sample["total"] / (rows if per_row else 1) for sample in s[name]]

    def first(name: str) -> list[float]:
        return [sample["first"] for sample in s[name]]

    def probe(key: str) -> list[float]:
        return [sample[key] for sample in s["big_start"]]

    def aim(values: list[float]) -> bool:
        return statistics.median(values) <= AIM_RATIO

    big, small = f"{args.big:,}-crumb log", f"{args.small:,}-crumb log"
    end100, end1000 = ratios(total("big_end_100"), total("small_end_100")), ratios(total("big_end_1000"),
                                                                                  total("small_all"))  # fmt: skip
    per_row = ratios(total("big_start", True), total("small_all", True))
    near = q["big_end_100"][2]
    return [
        Figure(f"last {near} rows of the {big}", total("big_end_100"), "ms", f"last {near} rows of the {small}",
               total("small_end_100"), "100k log / 1k log", end100, f"<= {AIM_RATIO}x", aim(end100)),
        Figure(f"last {args.small:,} rows of the {big}", total("big_end_1000"), "ms", f"the whole {small}",
               total("small_all"), "100k log / 1k log", end1000, f"<= {AIM_RATIO}x", aim(end1000)),
        Figure(f"near the start of the {big} (`after=100`, {q['big_start'][2]:,} rows), per row",
               total("big_start", True), "us", f"the whole {small}, per row", total("small_all", True),
               "100k log / 1k log", per_row, f"<= {AIM_RATIO}x", aim(per_row)),
        Figure(f"time to first crumb, `after=100` on the {big}", first("big_start"), "ms",
               f"`after={args.big - near:,}` on the same log", first("big_end_100"), "start / end",
               ratios(first("big_start"), first("big_end_100"))),
        Figure(f"`GET /health` sent {PROBE_AFTER * 1e3:.0f} ms into that catch-up, same worker", probe("health"), "ms",
               "`GET /health` alone", probe("health_idle"), "during / alone",
               ratios(probe("health"), probe("health_idle"))),
    ]  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    before, after = result["peak_mb"]
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Logs written in {result['built']:.1f} s through `append_crumbs` ({args.big:,} + {args.small:,} crumbs: "
        "run start, aggregated text, tool calls and results, run end). Query plan of the store's read: "
        f"`{result['plan']}`.",
        "",
        *harness.table(figures(result, args)),
        "",
        f"Worker peak memory (VmHWM): {before:.0f} MB before the first {result['queries']['big_start'][2]:,}-row "
        f"catch-up, {after:.0f} MB after it (+{after - before:.0f} MB).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--big", type=int, default=100_000, help="crumbs in the long log (default 100000)")
    parser.add_argument("--small", type=int, default=1_000, help="crumbs in the baseline log (default 1000)")
    args = parser.parse_args(argv)
    if not 200 <= args.small < args.big:
        parser.error("need 200 <= --small < --big")
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-catch-up-", bench, report, figures)


if __name__ == "__main__":
    main()
