"""The Postgres store: the choke point beside raw inserts of the same rows into the same server,
and catch-up cost against log size, in one run on one Postgres.

Postgres is ``DATABASE_URL`` (a user who may create databases) when set, else one started for
the run as the tests start it (tests/postgres_server.py: initdb/postgres on PATH, else the
pgserver wheel's; fsync off, so the store's own work is not hidden behind the disk).

Choke point (as bench/choke_point.py has it for SQLite): the ``script`` agent of that benchmark
runs once through ``bread.run`` on the Postgres store; then, in each repetition, on fresh
databases of the same server, taking turns a chunk of the run at a time:

(b) an ``Emitter`` with the Postgres store and the stream transport, fed the crumbs of that run;
(c) the baseline: the rows (b) wrote (checked row for row), each transaction of the emitter as
    one plain multi-row ``INSERT`` on a psycopg connection in autocommit, into a table with the
    same primary key: one round trip and one commit each, as the store's appends.

Catch-up (as bench/catch_up.py has it): a 100,000-crumb and a 1,000-crumb log written through
``append_crumbs``, served by one bread_sync server (gunicorn, one gevent worker, NDJSON) with
``BREAD_DB`` the database's URL; ``GET /runs/<id>/stream?after=N`` timed to its last chunk for
the last 100 rows of each, the last 1,000 of the long one against the whole short one, and
``after=100`` on the long one per row against the whole short one per row::

    .venv/bin/python bench/postgres_store.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import catch_up
import choke_point
import harness
from harness import Figure, Gunicorn, ratios

from bread_sync import Config, create_bread
from bread_sync.engine.emitter import Emitter, fan_out
from bread_sync.stores import postgres
from bread_sync.transports import stream

SCRIPT = "postgres_store.py"
TITLE = "## The Postgres store: choke point and catch-up"
AIM_CHOKE = 2.0
RAW_TABLE = "CREATE TABLE crumbs (run_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, crumb text NOT NULL,"
RAW_TABLE += " PRIMARY KEY (run_id, seq))"


@contextmanager
def postgres_server() -> Iterator[Callable[[], str]]:
    """A function that makes a new empty database on one Postgres and gives its URL."""
    from tests import postgres_server as pg

    admin = os.environ.get("DATABASE_URL")
    server = None
    if not admin:
        reason = pg.unavailable()
        if reason:
            raise SystemExit(reason)
        server = pg.PostgresServer().start()
        admin = server.url()
    made: list[str] = []

    def new_database() -> str:
        made.append(f"bench_{uuid.uuid4().hex[:12]}")
        return pg.create_database(admin, made[-1])

    try:
        yield new_database
    finally:
        for name in made:
            pg.drop_database(admin, name)
        if server is not None:
            server.remove()


def log_rows(store: Any, run_id: str) -> list[tuple]:
    return [(run_id, f.seq, f.type, f.wire) for f in store.get_crumbs(run_id)]


def warm_run(new_database: Callable[[], str], calls: int, deltas: int, folder: Path) -> dict[str, Any]:
    store = postgres.store(url=new_database())
    bread = create_bread(Config(agents=[choke_point.make_agent(calls, deltas)], store=store, instance_path=folder))
    try:
        result = bread.run("bench", "go", mode="sync")
        if result.status != "completed":
            raise RuntimeError(f"the benchmark run ended {result.status}: {result.error}")
        return {"crumbs": result.crumbs, "run_id": result.run_id, "log": log_rows(store, result.run_id)}
    finally:
        bread.close()


def raw_writer(conn: Any) -> Callable[[list[list[tuple]]], None]:
    """(c): each transaction's rows as one INSERT, autocommit."""
    statements: dict[int, str] = {}

    def write(transactions: list[list[tuple]]) -> None:
        for rows in transactions:
            sql = statements.get(len(rows))
            if sql is None:
                values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
                sql = statements[len(rows)] = f"INSERT INTO crumbs (run_id, seq, type, crumb) VALUES {values}"
            conn.execute(sql, [value for row in rows for value in row])

    return write


def choke_point_and_raw(new_database: Callable[[], str], run: dict[str, Any], chunk: int) -> dict[str, float]:
    import psycopg

    store = postgres.store(url=new_database())
    emit = Emitter(run["run_id"], store, fan_out([], stream.transport())).emit
    raw = psycopg.connect(new_database(), autocommit=True)
    raw.execute(RAW_TABLE)

    def choke(crumbs: list[dict[str, Any]]) -> None:
        for crumb in crumbs:
            emit(crumb)

    sides: dict[str, Callable[[Any], None]] = {"b": choke, "c": raw_writer(raw)}
    totals = dict.fromkeys([*sides, "b_cpu", "c_cpu"], 0.0)
    try:
        for i, (crumbs, transactions) in enumerate(choke_point.aligned_chunks(run["crumbs"], run["log"], chunk)):
            names = list(sides)
            for name in names[i % 2 :] + names[: i % 2]:
                start, cpu = time.perf_counter(), time.process_time()
                sides[name](crumbs if name == "b" else transactions)
                totals[name] += time.perf_counter() - start
                totals[f"{name}_cpu"] += time.process_time() - cpu
        if log_rows(store, run["run_id"]) != run["log"]:
            raise RuntimeError("the choke point wrote another log than the run did")
        if [tuple(row) for row in raw.execute(choke_point.LOG)] != run["log"]:
            raise RuntimeError("the baseline wrote other rows than the choke point")
    finally:
        store.close()
        raw.close()
    return totals


def catch_ups(new_database: Callable[[], str], args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    url = new_database()
    store = postgres.store(url=url)
    start = time.perf_counter()
    try:
        catch_up.write_log(store, "big", args.big)
        catch_up.write_log(store, "small", args.small)
    finally:
        store.close()
    built = time.perf_counter() - start
    queries = catch_up.catch_up_queries(args.big, args.small)
    samples: dict[str, list[float]] = {name: [] for name in queries}
    with Gunicorn("bread", "wsgi:app", folder, env={"BREAD_DB": url}) as server:
        for name in queries:  # warm: imports, connections, Postgres's cache
            catch_up.catch_up(server, *queries[name])
        for r in range(args.repeat):
            names = list(queries)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                samples[name].append(catch_up.catch_up(server, *queries[name])["total"])
    return {"samples": samples, "queries": queries, "built": built}


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    with postgres_server() as new_database:
        run = warm_run(new_database, args.calls, args.deltas, folder)
        choke: dict[str, list[float]] = {"b": [], "c": [], "b_cpu": [], "c_cpu": []}
        for _ in range(args.repeat):
            for name, seconds in choke_point_and_raw(new_database, run, args.chunk).items():
                choke[name].append(seconds)
        caught = catch_ups(new_database, args, folder)
    load.append(harness.load_average())
    rows = len(run["log"])
    return {"choke": choke, "rows": rows, "crumbs": len(run["crumbs"]), "catch_up": caught, "load": load,
            "transactions": sum(row[2] != "text:delta" for row in run["log"])}  # fmt: skip


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    choke, caught = result["choke"], result["catch_up"]
    s, q = caught["samples"], caught["queries"]

    def total(name: str, per_row: bool = False) -> list[float]:
        rows = q[name][2]
        return [seconds / (rows if per_row else 1) for seconds in s[name]]

    def within(values: list[float], aim: float) -> bool:
        return statistics.median(values) <= aim

    def per_row_of(key: str) -> list[float]:
        return [x / result["rows"] for x in choke[key]]

    choke_ratio = ratios(choke["b"], choke["c"])
    end100 = ratios(total("big_end_100"), total("small_end_100"))
    end1000 = ratios(total("big_end_1000"), total("small_all"))
    per_row = ratios(total("big_start", True), total("small_all", True))
    big, small, aim = f"{args.big:,}-crumb log", f"{args.small:,}-crumb log", catch_up.AIM_RATIO
    return [
        Figure("(b) choke point on Postgres, per row written", per_row_of("b"), "us",
               "(c) raw INSERTs of the same rows", per_row_of("c"), "(b) / (c)", choke_ratio, f"< {AIM_CHOKE:g}x",
               within(choke_ratio, AIM_CHOKE)),
        Figure("(b) this process's CPU per row written", per_row_of("b_cpu"), "us", "(c)'s", per_row_of("c_cpu"),
               "(b) / (c)", ratios(choke["b_cpu"], choke["c_cpu"])),
        Figure(f"catch-up: last {q['big_end_100'][2]} rows of the {big}", total("big_end_100"), "ms",
               f"last {q['small_end_100'][2]} rows of the {small}", total("small_end_100"), "100k log / 1k log",
               end100, f"<= {aim}x", within(end100, aim)),
        Figure(f"catch-up: last {args.small:,} rows of the {big}", total("big_end_1000"), "ms",
               f"the whole {small}", total("small_all"), "100k log / 1k log", end1000, f"<= {aim}x",
               within(end1000, aim)),
        Figure(f"catch-up: `after=100` on the {big} ({q['big_start'][2]:,} rows), per row", total("big_start", True),
               "us", f"the whole {small}, per row", total("small_all", True), "100k log / 1k log", per_row,
               f"<= {aim}x", within(per_row, aim)),
    ]  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Choke point: {result['crumbs']:,} crumbs emitted, {result['rows']:,} rows in {result['transactions']:,} "
        f"appends. Catch-up logs written in {result['catch_up']['built']:.1f} s through `append_crumbs` "
        f"({args.big:,} + {args.small:,} crumbs, batches of {catch_up.BATCH:,}).",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5)
    parser.add_argument("--calls", type=int, default=1000, help="tool calls in the choke point's run (default 1000)")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas before each call (default 10)")
    parser.add_argument("--chunk", type=int, default=1000, help="crumbs per interleaved chunk (default 1000)")
    parser.add_argument("--big", type=int, default=100_000, help="crumbs in the long log (default 100000)")
    parser.add_argument("--small", type=int, default=1_000, help="crumbs in the baseline log (default 1000)")
    args = parser.parse_args(argv)
    if min(args.repeat, args.calls, args.chunk) < 1 or args.deltas < 0 or not 200 <= args.small < args.big:
        parser.error("--repeat, --calls, --chunk at least 1, --deltas at least 0, 200 <= --small < --big")
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-postgres-", bench, report, figures)


if __name__ == "__main__":
    main()
