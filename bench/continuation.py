"""Runs carried on (issue 26): how soon a run goes on after its worker is killed, and what being
ready to carry a run on costs a run that never needs it.

(1) Continuation latency. Two gunicorn servers on loopback (gevent, one worker each) share one
SQLite file, no Redis (two servers rather than two workers of one, whose kernel picks the
worker a connection goes to: a tail on the worker killed would die with it). The ``victim``
runs the ``stepper`` agent of tests/replica_config.py (``--steps`` steps, each two text chunks
``--step-ms`` apart and a tool call); the ``witness`` serves a passive tail of it
(``GET /runs/<id>/stream``, NDJSON). Once the run has noted a few steps, the worker its record
names as ``owner`` (``host:pid:...``) is SIGKILLed. The figures, per repetition: the time from
the kill to the tail's ``agent:run:continued``, and to the first crumb after it. Whoever
notices first carries the run on: the witness's sweep (every ``Config.sweep_seconds``, 1 s) or
the victim's respawned worker's start-up sweep; both know the owner is dead at once, on one
host (engine/owners.py), so the lease (600 s in that config) plays no part. Each run is then
waited for to its end (``completed``, one continuation). Aim: under 2 s. Across hosts an owner
cannot be known dead: a run goes on once its lease lapses (``BREAD_LEASE_SECONDS``, 30 s by
default) plus up to one sweep interval.

(2) Hot-path cost. Events/s of one run driven in-process (``bread.run(..., mode="sync")``, a
SQLite file), on this checkout and on the code before issue 26 (``--before``, commit 8b4958a,
taken out with ``git archive`` into a temporary folder), each in a child process of its own
(one warm-up run, then ``--runs`` timed, their median), the two in alternating order per
repetition; beside each rate, the CPU time per event. Then the same runs over HTTP: a gunicorn
server of each code (gevent, one worker, NDJSON, the older one served from its folder), each
repetition the median of ``--runs`` runs, with the worker's CPU time per event (/proc). The
workload is a ``script`` agent that streams ``--deltas`` text deltas a turn and calls a trivial
tool at the end of each, ``--calls`` times: the progress of a run (its snapshot) is saved with
each durable crumb but text. Aim: events/s in-process at least 0.95x the code before, CPU per
event at most 1.05x (the steadier figure on a loaded machine); a tool-heavy run
(``--busy-calls`` calls of ``--busy-deltas`` deltas) is measured beside it for context. One more
run of each workload, apart from the timed ones, counts the progress saves, their bytes and the
CPU the store spends on them::

    .venv/bin/python bench/continuation.py --repeat 5 --kills 7 --runs 3 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import harness
from harness import Figure, Gunicorn, ratios

SCRIPT = "continuation.py"
TITLE = "## Runs carried on: latency and hot-path cost"
BEFORE = "8b4958a"
AIM_SECONDS = 2.0
AIM_RATIO = 0.95
#: The same aim on CPU time per event (the steadier figure on a loaded machine).
CPU_AIM_RATIO = 1.05
CONTINUED = "agent:run:continued"
TERMINAL = frozenset({"agent:run:end", "agent:error"})
#: Steps noted before the kill: the run is well under way, most of it still ahead.
KILL_AFTER_STEP = 3
#: A bound on every wait of a repetition: a run that is not carried on fails the benchmark.
WAIT_SECONDS = 60.0
SERVER_ENV = {"BREAD_CONFIG": "tests.replica_config:config", "BREAD_TRANSPORT": "http-chunked"}


# -- (1) continuation latency ---------------------------------------------------------------


class Tail(threading.Thread):
    """A passive NDJSON stream of one run, each crumb's type and arrival (``time.monotonic()``)."""

    def __init__(self, client: Any, url: str):
        super().__init__(daemon=True)
        self.client, self.url = client, url
        self.crumbs: list[tuple[float, str, Any]] = []
        self.changed = threading.Condition()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.client.stream("GET", self.url, timeout=WAIT_SECONDS) as response:
                for line in response.iter_lines():
                    if line.strip():
                        self._seen(json.loads(line)["crumb"])
        except BaseException as exc:  # told to the waiter, not lost in this thread
            self.error = exc
        with self.changed:
            self.changed.notify_all()

    def _seen(self, crumb: dict[str, Any]) -> None:
        with self.changed:
            self.crumbs.append((time.monotonic(), crumb["type"], crumb.get("output")))
            self.changed.notify_all()

    def wait_for(self, found: Any, what: str) -> int:
        """The index of the first crumb ``found(type, output)`` holds for, waiting for it."""
        deadline = time.monotonic() + WAIT_SECONDS
        with self.changed:
            while True:
                for i, (_, kind, output) in enumerate(self.crumbs):
                    if found(kind, output):
                        return i
                left = deadline - time.monotonic()
                if left <= 0 or not self.is_alive():
                    raise RuntimeError(f"the tail saw no {what} ({[k for _, k, _ in self.crumbs]}, {self.error!r})")
                self.changed.wait(left)


def owner_pid(client: Any, url: str, run_id: str) -> int:
    """The pid in the run record's ``owner`` (``host:pid:start:kernel:tag``)."""
    return int(client.get(f"{url}/runs/{run_id}").json()["owner"].split(":")[1])


def start_run(client: Any, url: str, steps: int, step_ms: int) -> str:
    """Start a ``stepper`` run on ``url``, its response read in the background; its run id."""
    body = {"input": {"count": steps, "delayMs": step_ms}}
    request = client.build_request("POST", f"{url}/agents/stepper/run", json=body, timeout=WAIT_SECONDS)
    response = client.send(request, stream=True)
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code} {response.read()[:300]!r}")

    def drain() -> None:
        # The connection dies with the worker, as it should.
        with contextlib.suppress(Exception), contextlib.closing(response):
            for _ in response.iter_raw():
                pass

    threading.Thread(target=drain, daemon=True).start()
    return response.headers["Bread-Run-Id"]


def one_kill(client: Any, victim: Gunicorn, witness: Gunicorn, args: argparse.Namespace) -> dict[str, Any]:
    """One run killed with its worker and carried on: the latencies, and who carried it on."""
    run_id = start_run(client, f"http://127.0.0.1:{victim.port}", args.steps, args.step_ms)
    witness_url = f"http://127.0.0.1:{witness.port}"
    tail = Tail(client, f"{witness_url}/runs/{run_id}/stream")
    tail.start()
    tail.wait_for(lambda kind, output: output == {"noted": KILL_AFTER_STEP}, f"step {KILL_AFTER_STEP} noted")
    pid = owner_pid(client, witness_url, run_id)
    if pid not in victim.worker_pids():
        raise RuntimeError(f"run {run_id} is owned by {pid}, not by the victim's worker {victim.worker_pids()}")
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    continued = tail.wait_for(lambda kind, output: kind == CONTINUED, CONTINUED)
    carrier = owner_pid(client, witness_url, run_id)
    tail.wait_for(lambda kind, output: kind in TERMINAL, "terminal crumb")
    tail.join(WAIT_SECONDS)
    kinds = [kind for _, kind, _ in tail.crumbs]
    record = client.get(f"{witness_url}/runs/{run_id}").json()
    if record["status"] != "completed" or kinds.count(CONTINUED) != 1 or len(kinds) <= continued + 1:
        raise RuntimeError(f"run {run_id} was not carried on to its end: {record['status']}, {kinds}")
    return {
        "continued": tail.crumbs[continued][0] - killed,
        "first": tail.crumbs[continued + 1][0] - killed,
        "after": kinds[continued + 1],
        "by_witness": carrier in witness.worker_pids(),
        "killed": pid,
    }


def wait_respawned(server: Gunicorn, killed: int) -> None:
    """Wait for the master to have replaced the worker killed, for the next run to start there."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        pids = server.worker_pids()
        if len(pids) == server.workers and killed not in pids and server.get("/health")[0] == 200:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{server.name}: no new worker within {WAIT_SECONDS:g} s:\n{server.log()}")


def latency(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    import httpx2 as httpx

    env = {**SERVER_ENV, "BREAD_DB": str(folder / "shared.db")}
    kills: list[dict[str, Any]] = []
    with Gunicorn("victim", "wsgi:app", folder, env=env) as victim:
        with Gunicorn("witness", "wsgi:app", folder, env=env) as witness:
            with httpx.Client(timeout=httpx.Timeout(WAIT_SECONDS, connect=5.0)) as client:
                for _ in range(args.kills):
                    kills.append(one_kill(client, victim, witness, args))
                    wait_respawned(victim, kills[-1]["killed"])
    return {"kills": kills}


# -- (2) hot-path cost --------------------------------------------------------------------


def workload_agent(calls: int, deltas: int) -> Any:
    """The ``bench`` agent: ``calls`` turns of ``deltas`` text deltas, each ending in a tool call
    (then one more turn ends the run), made by whichever bread_sync is imported."""
    from bread_sync import Agent, tool
    from bread_sync.models import script

    @tool
    def noop(input: Any, ctx: Any) -> dict[str, bool]:
        """Does nothing."""
        return {"ok": True}

    steps: list[Any] = []
    for i in range(calls):
        steps += [script.say([f"word{i}.{k} " for k in range(deltas)]), script.call("noop", {"i": i})]
    return Agent(id="bench", model=script.provider(steps), tools=[noop], max_steps=calls + 1)


def measured_code(tree: Path) -> None:
    """Fail unless the bread_sync imported is the one in ``tree``."""
    import bread_sync

    if not Path(bread_sync.__file__).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"measured {bread_sync.__file__}, not the code in {tree}")


def http_config() -> Any:
    """The servers' config for the HTTP figures (``BREAD_CONFIG=continuation:http_config``)."""
    from bread_sync.config import Config

    measured_code(Path(os.environ["BENCH_TREE"]))
    agent = workload_agent(int(os.environ["BENCH_CALLS"]), int(os.environ["BENCH_DELTAS"]))
    return Config(agents=[agent], blob_store=None)


def child_rate(tree: Path, calls: int, deltas: int, runs: int, folder: Path, unsaved: bool) -> None:
    """In a child process: print the events/s and the CPU time per event (medians of ``runs``)
    of the workload's run driven by the bread_sync in ``tree``, after one warm-up run; with
    ``unsaved``, a run's progress is not saved (this code only), to tell what that costs."""
    sys.path.insert(0, str(tree))
    from bread_sync import Config, create_bread
    from bread_sync.stores import sqlite

    measured_code(tree)
    if unsaved:
        from bread_sync.engine.execution import Execution

        Execution._note_progress = lambda self, crumb_type: None
    agent = workload_agent(calls, deltas)
    rates, cpu = [], []
    for n in range(runs + 2):
        store = sqlite.store(path=folder / f"rate-{n}.db")
        progress = watch_progress(store) if n == runs + 1 else None
        bread = create_bread(Config(agents=[agent], store=store, instance_path=folder))
        try:
            gc.collect()
            start, used = time.perf_counter(), time.process_time()
            result = bread.run("bench", "go", mode="sync")
            seconds, used = time.perf_counter() - start, time.process_time() - used
        finally:
            bread.close()
        if result.status != "completed":
            raise RuntimeError(f"the run ended {result.status}: {result.error}")
        if 0 < n <= runs:  # the first run warms the imports and caches up; the last is watched
            rates.append(len(result.crumbs) / seconds)
            cpu.append(used / len(result.crumbs))
    figures = {"rate": statistics.median(rates), "cpu": statistics.median(cpu), "crumbs": len(result.crumbs)}
    # The run's CPU without the counting's own encoding.
    print(json.dumps({**figures, "progress": {**progress, "run_cpu": used - progress["counting"]}}))


def watch_progress(store: Any) -> dict[str, Any]:
    """Count what saving a run's progress costs (the store encoding and writing each progress
    checkpoint, in CPU time, and its bytes): filled in as ``store`` is used, in a run apart from
    the timed ones (the counting is not free)."""
    from bread_sync.crumbs import dumps

    seen = {"saves": 0, "cpu": 0.0, "bytes": 0, "counting": 0.0}
    save = store.save_checkpoint

    def counted(checkpoint: dict[str, Any]) -> None:
        used = time.process_time()
        save(checkpoint)
        if checkpoint["status"] == "progress":
            saved = time.process_time()
            seen["cpu"] += saved - used
            seen["saves"] += 1
            seen["bytes"] += len(dumps(checkpoint))
            seen["counting"] += time.process_time() - saved

    store.save_checkpoint = counted
    return seen


def measure_rate(tree: Path, calls: int, deltas: int, runs: int, folder: Path, unsaved: bool) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(tree),
        "--child-folder",
        str(folder),
        "--calls",
        str(calls),
        "--deltas",
        str(deltas),
        "--runs",
        str(runs),
        *(["--unsaved"] if unsaved else []),
    ]
    done = subprocess.run(cmd, cwd=harness.ROOT, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def code_before(commit: str, folder: Path) -> Path:
    """bread_sync and its server's entry points as they were at ``commit``, taken out of git
    (read-only) into ``folder``."""
    archive = folder / "before.tar"
    with open(archive, "wb") as out:
        paths = ["bread_sync", "wsgi.py", "gunicorn.conf.py"]
        subprocess.run(["git", "archive", commit, *paths], cwd=harness.ROOT, stdout=out, check=True)
    tree = folder / "before"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def over_http(
    trees: dict[str, Path], workloads: dict[str, tuple[int, int]], args: argparse.Namespace, folder: Path
) -> dict[str, Any]:
    """Events/s of one run read over HTTP (NDJSON, one gevent worker per code), each repetition
    the median of ``--runs`` runs, the two codes in alternating order; and the worker's CPU per
    event over those runs (from /proc)."""
    import httpx2 as httpx
    from remote_relay import one_run

    rates: dict[str, dict[str, list[float]]] = {w: {t: [] for t in trees} for w in workloads}
    cpu: dict[str, dict[str, list[float]]] = {w: {t: [] for t in trees} for w in workloads}
    for workload, (calls, deltas) in workloads.items():
        with contextlib.ExitStack() as stack:
            urls, workers = {}, {}
            for name, tree in trees.items():
                env = {
                    "BREAD_CONFIG": "continuation:http_config",
                    "BREAD_TRANSPORT": "http-chunked",
                    "BREAD_DB": str(folder / f"http-{workload}-{name}.db"),
                    "BENCH_TREE": str(tree),
                    "BENCH_CALLS": str(calls),
                    "BENCH_DELTAS": str(deltas),
                }
                server = stack.enter_context(Gunicorn(f"{workload}-{name}", "wsgi:app", folder, env=env, root=tree))
                urls[name], workers[name] = f"http://127.0.0.1:{server.port}", server.worker()
            client = stack.enter_context(httpx.Client(timeout=httpx.Timeout(WAIT_SECONDS, connect=5.0)))
            for url in urls.values():  # warm both once, unmeasured
                one_run(client, url, "bench")
            for r in range(args.repeat):
                for name in ("now", "before") if r % 2 == 0 else ("before", "now"):
                    used = harness.cpu_seconds(workers[name])
                    runs = [one_run(client, urls[name], "bench") for _ in range(args.runs)]
                    used = harness.cpu_seconds(workers[name]) - used
                    rates[workload][name].append(statistics.median(events / seconds for seconds, events in runs))
                    cpu[workload][name].append(used / sum(events for _, events in runs))
    return {"rates": rates, "cpu": cpu}


def hot_path(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    trees = {"now": harness.ROOT, "before": code_before(args.before, folder)}
    #: Each code measured, and whether its progress is saved ("unsaved": this code, without).
    variants = {"now": (trees["now"], False), "before": (trees["before"], False), "unsaved": (trees["now"], True)}
    workloads = {"text": (args.calls, args.deltas), "tools": (args.busy_calls, args.busy_deltas)}
    rates: dict[str, dict[str, list[float]]] = {w: {v: [] for v in variants} for w in workloads}
    cpu: dict[str, dict[str, list[float]]] = {w: {v: [] for v in variants} for w in workloads}
    progress: dict[str, dict[str, dict[str, Any]]] = {w: {} for w in workloads}
    crumbs: dict[str, int] = {}
    for r in range(args.repeat):
        for workload, (calls, deltas) in workloads.items():
            for name in list(variants) if r % 2 == 0 else reversed(variants):
                tree, unsaved = variants[name]
                got = measure_rate(tree, calls, deltas, args.runs, folder / f"{workload}-{name}-{r}", unsaved)
                rates[workload][name].append(got["rate"])
                cpu[workload][name].append(got["cpu"])
                progress[workload][name] = got["progress"]
                crumbs[workload] = got["crumbs"]
    http = over_http(trees, workloads, args, folder)
    return {"rates": rates, "cpu": cpu, "crumbs": crumbs, "progress": progress, "http": http}


# -- the report ---------------------------------------------------------------------------


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    result = {**latency(args, folder), **hot_path(args, folder)}
    load.append(harness.load_average())
    return {**result, "load": load}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    kills = result["kills"]
    first = [k["first"] for k in kills]
    out = [
        Figure(
            "SIGKILL of the run's worker -> `agent:run:continued` on the other server's tail",
            [k["continued"] for k in kills],
            "ms",
        ),
        Figure(
            "SIGKILL of the run's worker -> the first crumb after it",
            first,
            "ms",
            aim=f"< {AIM_SECONDS:g} s",
            met=max(first) < AIM_SECONDS,
        ),
    ]
    names = {
        "text": f"{args.calls} turns of {args.deltas:,} deltas and a tool call",
        "tools": f"{args.busy_calls} turns of {args.busy_deltas} deltas and a tool call",
    }
    http = result["http"]
    for workload, name in names.items():
        aim = workload == "text"
        out += [
            compared(f"one run in-process, {name}: events/s", result["rates"][workload], "ev/s", args.before, aim),
            compared("the same: CPU per event", result["cpu"][workload], "us", args.before, aim),
            compared(
                "the same, its progress not saved: CPU per event",
                result["cpu"][workload],
                "us",
                args.before,
                ours="unsaved",
            ),
            compared("the same over HTTP (one gevent worker): events/s", http["rates"][workload], "ev/s", args.before),
            compared("the same over HTTP: the worker's CPU per event", http["cpu"][workload], "us", args.before, aim),
        ]
    return out


def compared(
    name: str, values: dict[str, list[float]], unit: str, before: str, aim: bool = False, ours: str = "now"
) -> Figure:
    """This code's figure (or its ``ours`` variant's) beside the code before's, per repetition;
    with ``aim``, held to it: a rate at least AIM_RATIO of the code before's, a CPU time at most
    CPU_AIM_RATIO of it."""
    figure = Figure(name, values[ours], unit, f"the code before issue 26 ({before})", values["before"])
    figure.ratio_name, figure.ratios = f"{ours} / before", ratios(values[ours], values["before"])
    if aim:
        median = statistics.median(figure.ratios)
        cpu = unit == "us"
        figure.aim = f"<= {CPU_AIM_RATIO}x" if cpu else f">= {AIM_RATIO}x"
        figure.met = median <= CPU_AIM_RATIO if cpu else median >= AIM_RATIO
    return figure


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    kills = result["kills"]
    witnessed = sum(k["by_witness"] for k in kills)
    after = sorted({k["after"] for k in kills})
    each = ", ".join(f"{k['first']:.2f} s ({'witness' if k['by_witness'] else 'respawned'})" for k in kills)
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"Latency: {len(kills)} runs of `stepper` ({args.steps} steps of {args.step_ms} ms), each killed with its "
        f"worker after step {KILL_AFTER_STEP}; two servers, one worker each, one SQLite file, no Redis; the "
        f"max is the aim's figure. Carried on by the witness {witnessed} times, by the victim's respawned worker "
        f"{len(kills) - witnessed} times; the crumb after the continuation: {', '.join(after)}. Each run, "
        f"kill to that crumb (and who carried it on): {each}. Events/s: "
        f"{args.repeat} repetitions, each the median of {args.runs} runs in a child process per code, "
        f"{result['crumbs']['text']:,} and {result['crumbs']['tools']:,} events a run.",
        "",
        *harness.table(figures(result, args)),
        "",
        "Saving the progress, in one more run of each workload on this code, watched apart from the timed ones: "
        + "; ".join(
            progress_line(name, result["progress"][workload]["now"])
            for workload, name in (("text", "the text-heavy run"), ("tools", "the tool-heavy run"))
        )
        + ". The code before saves none.",
    ]
    return "\n".join(lines)


def progress_line(name: str, seen: dict[str, Any]) -> str:
    return (
        f"{name} saved it {seen['saves']} times, {seen['bytes'] / 1e6:.1f} MB in all, its store encoding and "
        f"writing it {seen['cpu'] * 1e3:.0f} ms of the run's {seen['run_cpu'] * 1e3:.0f} ms of CPU"
    )


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 5, "repetitions of the events/s pair")
    parser.add_argument("--kills", type=int, default=7, help="runs killed and carried on (default 7)")
    parser.add_argument("--steps", type=int, default=30, help="steps of the killed run (default 30)")
    parser.add_argument("--step-ms", type=int, default=20, help="ms between a step's two chunks (default 20)")
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--calls", type=int, default=20, help="tool calls of the events/s run (default 20)")
    parser.add_argument("--deltas", type=int, default=1000, help="deltas a turn of the events/s run (default 1000)")
    parser.add_argument("--busy-calls", type=int, default=200, help="tool calls of the tool-heavy run (default 200)")
    parser.add_argument("--busy-deltas", type=int, default=5, help="deltas a turn of the tool-heavy run (default 5)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per child process (default 5)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--unsaved", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_rate(args.child, args.calls, args.deltas, args.runs, args.child_folder, args.unsaved)
        return
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-continuation-", bench, report, figures)


if __name__ == "__main__":
    main()
