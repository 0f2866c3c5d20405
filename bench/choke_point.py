"""Crumbs/s through the choke point with the SQLite store, against raw SQLite inserts.

One workload: a ``script`` agent that streams ``--deltas`` text deltas then calls a trivial
tool, ``--calls`` times (10,000 deltas and 1,000 tool calls by default). Each repetition
measures, in this process and on fresh SQLite files in a temporary folder:

(a) the full run through the public API, ``bread.run(..., mode="sync")``;
(b) the choke point alone: an ``Emitter`` with the SQLite store and the stream transport, fed
    the crumbs a run of (a) emitted, so the agent loop's own work is not counted;
(c) the baseline: the rows (b) wrote, inserted with the plain ``sqlite3`` module into the same
    table and unique index, one transaction per durable crumb as the emitter commits them,
    WAL and ``synchronous=NORMAL`` like the store;
(c+) the same with the store's append-only trigger, to show what the trigger itself costs.

(b), (c) and (c+) take turns a chunk of the run at a time, so a drift in the machine's speed
falls on each alike; (a) runs whole, after them. Every ratio is taken within one repetition,
then summarised (median, min-max)::

    .venv/bin/python bench/choke_point.py --repeat 5 --profile --write docs/performance.md
"""

from __future__ import annotations

import cProfile
import datetime
import gc
import io
import json
import os
import platform
import pstats
import sqlite3
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Measure the bread_sync of the checkout this script is in, whatever the venv has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402

from bread_sync import Agent, Config, create_bread, tool  # noqa: E402
from bread_sync.crumbs import TEXT_DELTA  # noqa: E402
from bread_sync.engine.emitter import Emitter, fan_out  # noqa: E402
from bread_sync.models import script  # noqa: E402
from bread_sync.stores import sqlite  # noqa: E402
from bread_sync.transports import stream  # noqa: E402

SCRIPT = "choke_point.py"
SECTION = "## Choke point (SQLite store)"


@tool
def noop(input: Any, ctx: Any) -> dict[str, bool]:
    """Does nothing."""
    return {"ok": True}


def make_agent(calls: int, deltas: int) -> Agent:
    steps: list[Any] = []
    for i in range(calls):
        steps.append(script.say([f"word{i}.{k} " for k in range(deltas)]))
        steps.append(script.call("noop", {"i": i}))
    # each tool call ends a model turn; one more turn ends the run
    return Agent(id="bench", model=script.provider(steps), tools=[noop], max_steps=calls + 1)


# -- the measurements ----------------------------------------------------------------------

LOG = "SELECT run_id, seq, type, crumb FROM crumbs ORDER BY seq"
SCHEMA = "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'crumbs'"


def full_run(folder: Path, calls: int, deltas: int) -> dict[str, Any]:
    """(a): one run through the public API, timed from ``bread.run`` to its result."""
    store = sqlite.store(path=folder / "a.db")
    bread = create_bread(Config(agents=[make_agent(calls, deltas)], store=store, instance_path=folder))
    try:
        gc.collect()
        start = time.perf_counter()
        result = bread.run("bench", "go", mode="sync")
        seconds = time.perf_counter() - start
        if result.status != "completed":
            raise RuntimeError(f"the benchmark run ended {result.status}: {result.error}")
        with store.connection() as db:
            log = db.execute(LOG).fetchall()
            schema = dict(db.execute(SCHEMA).fetchall())
            messages = db.execute("SELECT count(*) FROM session_messages").fetchone()[0]
    finally:
        bread.close()
    return {"seconds": seconds, "crumbs": result.crumbs, "run_id": result.run_id, "log": log, "schema": schema,
            "messages": messages}  # fmt: skip


def choke_point_and_raw(folder: Path, run: dict[str, Any], chunk: int) -> dict[str, float]:
    """(b), (c) and (c+), interleaved a chunk of the run at a time (in rotating order), so that
    the machine's drift in speed, large on a shared VM, falls on all three alike."""
    store = sqlite.store(path=folder / "b.db")
    emit = Emitter(run["run_id"], store, fan_out([], stream.transport())).emit
    table_and_index = [run["schema"]["crumbs"], run["schema"]["idx_crumbs_run_seq"]]
    raw = {
        "c": raw_connection(folder / "c.db", table_and_index),
        "c_trigger": raw_connection(folder / "c_trigger.db", [*table_and_index, run["schema"]["crumbs_append_only"]]),
    }

    def choke(crumbs: list[dict[str, Any]]) -> None:
        for crumb in crumbs:
            emit(crumb)

    sides: dict[str, Callable[[Any], None]] = {"b": choke}
    sides.update({name: raw_writer(conn) for name, conn in raw.items()})
    totals = dict.fromkeys(sides, 0.0)
    try:
        gc.collect()
        for i, (crumbs, transactions) in enumerate(aligned_chunks(run["crumbs"], run["log"], chunk)):
            names = list(sides)
            for name in names[i % len(names) :] + names[: i % len(names)]:
                work = crumbs if name == "b" else transactions
                start = time.perf_counter()
                sides[name](work)
                totals[name] += time.perf_counter() - start
        with store.connection() as db:
            if db.execute(LOG).fetchall() != run["log"]:
                raise RuntimeError("the choke point wrote another log than the run did")
        for conn in raw.values():
            if conn.execute(LOG).fetchall() != run["log"]:
                raise RuntimeError("the baseline wrote other rows than the choke point")
    finally:
        store.close()
        for conn in raw.values():
            conn.close()
    return totals


def raw_connection(path: Path, schema: list[str]) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection set up as the store sets up its own."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for sql in schema:
        conn.execute(sql)
    return conn


def raw_writer(conn: sqlite3.Connection) -> Callable[[list[list[tuple]]], None]:
    """(c): the rows with nothing around them, one transaction per durable crumb."""
    insert = "INSERT INTO crumbs (run_id, seq, type, crumb) VALUES (?, ?, ?, ?)"
    execute, executemany = conn.execute, conn.executemany

    def write(transactions: list[list[tuple]]) -> None:
        for rows in transactions:
            execute("BEGIN IMMEDIATE")
            executemany(insert, rows)
            execute("COMMIT")

    return write


def aligned_chunks(crumbs: list[dict[str, Any]], log: list[tuple], size: int) -> list[tuple[list, list]]:
    """Cut the crumbs after a durable crumb every ``size`` or so, each chunk beside the
    transactions the emitter commits for it: each durable crumb's, with the aggregated delta
    pending before it."""
    transactions, current = [], []
    for row in log:
        current.append(row)
        if row[2] != TEXT_DELTA:
            transactions.append(current)
            current = []
    chunks, part, durable, done = [], [], 0, 0
    for crumb in crumbs:
        part.append(crumb)
        if crumb["type"] != TEXT_DELTA:
            durable += 1
            if len(part) >= size or crumb is crumbs[-1]:
                chunks.append((part, transactions[done : done + durable]))
                part, done, durable = [], done + durable, 0
    if part or current or done != len(transactions):
        raise RuntimeError("the run's crumbs and its log do not line up")
    return chunks


# -- driving and reporting -----------------------------------------------------------------


def bench(repeat: int, calls: int, deltas: int, chunk: int, profile: bool) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"a": [], "b": [], "c": [], "c_trigger": []}
    with tempfile.TemporaryDirectory(prefix="bread-bench-") as tmp:
        folder = Path(tmp)
        warm = full_run(folder / "warm", calls, deltas)  # its crumbs feed (b), its log is (c)'s rows
        for i in range(repeat):
            rep = folder / str(i)
            rep.mkdir()
            for name, seconds in choke_point_and_raw(rep, warm, chunk).items():
                samples[name].append(seconds)
            a = full_run(rep / "a", calls, deltas)
            if len(a["log"]) != len(warm["log"]):
                raise RuntimeError("two runs of the benchmark agent wrote logs of different lengths")
            samples["a"].append(a["seconds"])
        crumbs, log = warm["crumbs"], warm["log"]
        counts = {"crumbs": len(crumbs), "deltas": sum(crumb["type"] == TEXT_DELTA for crumb in crumbs),
                  "rows": len(log), "transactions": sum(row[2] != TEXT_DELTA for row in log),
                  "messages": warm["messages"]}  # fmt: skip
        top = profile_choke_point(folder / "profile", warm) if profile else None
    return {"samples": samples, "counts": counts, "profile": top}


def profile_choke_point(folder: Path, run: dict[str, Any]) -> list[tuple[str, str, int, float, float]]:
    """(b) once more, alone and under cProfile: (module, function, calls, own s, cumulative s)."""
    folder.mkdir()
    store = sqlite.store(path=folder / "b.db")
    emit = Emitter(run["run_id"], store, fan_out([], stream.transport())).emit
    profiler = cProfile.Profile()
    try:
        gc.collect()
        profiler.enable()
        for crumb in run["crumbs"]:
            emit(crumb)
        profiler.disable()
    finally:
        store.close()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    return [(module_of(file, name), f"{Path(file).name}:{line}({name})" if line else name, calls, own, cumulative)
            for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items()]  # fmt: skip


def module_of(file: str, name: str) -> str:
    """Where a profiled function lives, short: ``bread_sync/engine/emitter.py``, ``stdlib queue.py``."""
    if file == "~":
        return "sqlite3 (C)" if "sqlite3." in name else "built-ins (C)"
    path = Path(file)
    for package in ("bread_sync", "sqlite_utils"):
        if package in path.parts:
            return "/".join(path.parts[path.parts.index(package) :])
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return f"stdlib {path.relative_to(stdlib)}" if path.is_relative_to(stdlib) else path.name


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def figures(result: dict[str, Any]) -> list[tuple[str, tuple[float, float, float], str]]:
    s, n = result["samples"], result["counts"]
    ratio = lambda num, den: [x / y for x, y in zip(s[num], s[den], strict=True)]  # noqa: E731
    rate = lambda key, count: [count / x for x in s[key]]  # noqa: E731
    return [
        ("(b) / (c): choke point vs raw inserts, time per row written", summary(ratio("b", "c")), "x"),
        ("(b) / (c+): choke point vs raw inserts with the append-only trigger", summary(ratio("b", "c_trigger")), "x"),
        ("(a) / (c): full run vs raw inserts, time per row written", summary(ratio("a", "c")), "x"),
        ("(c+) / (c): cost of the append-only trigger", summary(ratio("c_trigger", "c")), "x"),
        ("(a) full run, crumbs/s", summary(rate("a", n["crumbs"])), "/s"),
        ("(b) choke point, crumbs/s", summary(rate("b", n["crumbs"])), "/s"),
        ("(b) choke point, rows/s", summary(rate("b", n["rows"])), "/s"),
        ("(c) raw inserts, rows/s", summary(rate("c", n["rows"])), "/s"),
        ("(c+) raw inserts with the trigger, rows/s", summary(rate("c_trigger", n["rows"])), "/s"),
    ]


def machine() -> dict[str, str]:
    version = harness.version
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "CPU": f"{harness.cpu_model()}, {affinity} cores available",
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "SQLite library": sqlite3.sqlite_version,
        "Packages": f"bread-sync {version('bread-sync')}, sqlite-utils {version('sqlite-utils')}, "
        f"pydantic {version('pydantic')}",
        "Temp folder": f"{tempfile.gettempdir()} ({_filesystem(tempfile.gettempdir())})",
        "Code": harness.revision(untracked=False),
    }


def _filesystem(path: str) -> str:
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "filesystem unknown"
    real = os.path.realpath(path)
    point, kind = max(
        ((p, k) for p, k in mounts if real == p or real.startswith(p.rstrip("/") + "/")), key=lambda m: len(m[0])
    )
    return f"{kind} mounted on {point}"


def fmt(value: float, unit: str) -> str:
    return f"{value:.2f}" if unit == "x" else f"{value:,.0f}"


def report(result: dict[str, Any], command: str, repeat: int) -> str:
    n = result["counts"]
    lines = [
        f"Command: `{command}`",
        "",
        f"Date: {datetime.date.today().isoformat()}. {repeat} repetitions.",
        "",
        *(f"- {key}: {value}" for key, value in machine().items()),
        "",
        f"Workload: {n['crumbs']:,} crumbs emitted ({n['deltas']:,} of them `text:delta`); the log got "
        f"{n['rows']:,} rows in {n['transactions']:,} transactions, so {n['rows'] / n['crumbs']:.2f} rows per "
        f"crumb. The full run (a) also appended {n['messages']:,} session messages, one transaction each.",
        "",
        "| Figure | Median | Min-max |",
        "| --- | ---: | ---: |",
    ]
    for name, (median, low, high), unit in figures(result):
        suffix = unit if unit == "x" else ""
        lines.append(f"| {name} | {fmt(median, unit)}{suffix} | {fmt(low, unit)}-{fmt(high, unit)}{suffix} |")
    if result["profile"]:
        lines += ["", *profile_table(result["profile"], n["crumbs"])]
    return "\n".join(lines)


def profile_table(rows: list[tuple], crumbs: int, top: int = 10) -> list[str]:
    total = sum(row[3] for row in rows)
    by_module: dict[str, float] = {}
    for module, _, _, own, _ in rows:
        by_module[module] = by_module.get(module, 0.0) + own
    lines = [
        f"cProfile of one more run of (b) alone: {total:.2f} s, {total * 1e6 / crumbs:.0f} us per crumb under the "
        "profiler, which inflates Python calls more than C calls. Own time by module:",
        "",
        "| Module | Own s | Share |",
        "| --- | ---: | ---: |",
    ]
    for module, own in sorted(by_module.items(), key=lambda item: item[1], reverse=True)[:top]:
        lines.append(f"| {module} | {own:.3f} | {own / total:.0%} |")
    lines += ["", f"Top {top} functions by own time:", "", "| Function | Calls | Own s | Cumulative s |",
              "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for _, name, calls, own, cumulative in sorted(rows, key=lambda row: row[3], reverse=True)[:top]:
        lines.append(f"| `{name}` | {calls:,} | {own:.3f} | {cumulative:.3f} |")
    return lines


def main(argv: list[str] | None = None, out: Callable[[str], Any] = print) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--calls", type=int, default=1000, help="tool calls in the run (default 1000)")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas before each call (default 10)")
    parser.add_argument("--chunk", type=int, default=1000, help="crumbs per interleaved chunk (default 1000)")
    parser.add_argument("--profile", action="store_true", help="also profile one run of (b) with cProfile")
    args = parser.parse_args(argv)
    if min(args.repeat, args.calls, args.chunk) < 1 or args.deltas < 0:
        parser.error("--repeat, --calls and --chunk must be at least 1, --deltas at least 0")
    command = harness.command_line(SCRIPT, argv)
    result = bench(args.repeat, args.calls, args.deltas, args.chunk, args.profile)
    block = report(result, command, args.repeat)
    out(block)
    if args.json:
        rows = [{"name": name, "median": median, "range": [low, high], "unit": unit, "aim": ""}
                for name, (median, low, high), unit in figures(result)]  # fmt: skip
        args.json.write_text(json.dumps({"script": SCRIPT, "figures": rows}, indent=1), encoding="utf-8")
    if args.write:
        harness.write_section(args.write, SCRIPT, SECTION, block)
        out(f"\nwritten into {args.write}")


if __name__ == "__main__":
    main()
