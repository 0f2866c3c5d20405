"""A2A Get Task of a long task: ``tasks/get`` (v0.3) and ``GetTask`` (v1.0) of a completed
task whose run logged 1,000 durable crumbs, answered with its artifacts and history rebuilt
from that log (issue 33), beside ``GET /runs/<id>`` (the run record alone) on the same server.

The log is bench/catch_up.py's (run start, aggregated text, tool calls and results, run end:
about 333 text segments folded into one artifact), written straight through the SQLite store
as a run of the demo's ``echo``; one bread_sync server (the demo, gunicorn, one gevent worker)
serves that file. Each repetition sends ``--requests`` requests of each kind, one at a time on
one kept-alive connection, and takes each kind's p50 and p95::

    .venv/bin/python bench/a2a_get_task.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from pathlib import Path
from typing import Any

import catch_up
import harness
from harness import Figure, Gunicorn

from bread_sync.stores import sqlite

SCRIPT = "a2a_get_task.py"
TITLE = "## A2A Get Task of a 1,000-crumb run"
AIM_P50_SECONDS = 0.020
RUN_ID = "run_get_task_bench"
KINDS = {
    "v0.3": ("/a2a", {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": RUN_ID}}, {}),
    "v1.0": ("/a2a-v1", {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": RUN_ID}},
             {"A2A-Version": "1.0"}),
    "record": (f"/runs/{RUN_ID}", None, {}),
}  # fmt: skip


def timed(conn: http.client.HTTPConnection, kind: str) -> float:
    """One request of ``kind`` to its last byte: seconds; its answer checked."""
    path, body, headers = KINDS[kind]
    start = time.perf_counter()
    if body is None:
        conn.request("GET", path, headers=headers)
    else:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
    answer = conn.getresponse()
    data = answer.read()
    took = time.perf_counter() - start
    if answer.status != 200 or (body is not None and b'"artifacts"' not in data):
        raise RuntimeError(f"{kind}: {answer.status} {data[:300]!r}")
    return took


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    db = folder / "get-task.db"
    store = sqlite.store(path=db)
    try:
        catch_up.write_log(store, RUN_ID, args.crumbs, agent_id="echo")
    finally:
        store.close()
    samples: dict[str, list[list[float]]] = {kind: [] for kind in KINDS}
    with Gunicorn("bread", "wsgi:app", folder, env={"BREAD_DB": str(db)}) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            for kind in KINDS:  # warm: imports, the models' first use, the page cache
                for _ in range(5):
                    timed(conn, kind)
            for r in range(args.repeat):
                kinds = list(KINDS)
                for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                    samples[kind].append([timed(conn, kind) for _ in range(args.requests)])
        finally:
            conn.close()
    load.append(harness.load_average())
    return {"samples": samples, "load": load}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    s = result["samples"]

    def p(kind: str, q: float) -> list[float]:
        return [harness.percentile(times, q) for times in s[kind]]

    out = []
    for kind in ("v0.3", "v1.0"):
        p50 = p(kind, 50)
        out.append(Figure(f"Get Task ({kind}) of a {args.crumbs:,}-crumb run, p50", p50, "ms", "`GET /runs/<id>` p50",
                          p("record", 50), "Get Task / record", harness.ratios(p50, p("record", 50)),
                          f"p50 < {AIM_P50_SECONDS * 1e3:.0f} ms", max(p50) < AIM_P50_SECONDS))  # fmt: skip
        out.append(Figure(f"Get Task ({kind}), p95", p(kind, 95), "ms"))
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"{args.requests} requests of each kind per repetition, one at a time on one connection; the aim is met "
        "when every repetition's p50 is under it.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--requests", type=int, default=100, help="requests of each kind per repetition")
    parser.add_argument("--crumbs", type=int, default=1_000, help="crumbs in the task's log (default 1000)")
    args = parser.parse_args(argv)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-a2a-get-task-", bench, report, figures)


if __name__ == "__main__":
    main()
