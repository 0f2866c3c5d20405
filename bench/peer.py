"""bread_sync beside LangGraph's server, with one client, in one run: the peer comparison.

LangGraph's dev server (``langgraph dev``, its in-memory runtime, from the optional ``bench``
extra: ``pip install -e '.[bench]'``) serves a scripted graph whose one node writes ``count``
custom stream events (``tick <n> ``), no model; bread_sync (gunicorn, one gevent worker, SSE)
serves its demo's ``slow`` agent, which streams ``count`` ticks with no delay. Both are asked
the same things by the same client (bench/rawhttp.py, one thread, one selector), in turn within
each repetition (rotating which goes first), and every figure is a ratio taken in the same
repetition:

- events/s of one run of ``--deltas`` events, and of ``--streams`` (50, then 200) concurrent
  runs of ``--concurrent-deltas`` each: every SSE event a client receives counts (bread_sync's
  crumbs, LangGraph's ``metadata`` and ``custom`` events), from the first request's start to
  the last event;
- time to first event: from the start of a request to its first complete event, p50 of many;
- server CPU per event over the single run: the server process's CPU time (bread_sync's
  worker; LangGraph's server process, which runs its graphs in-process);
- RSS after the load: the server process's resident memory after the concurrent runs;
- a replay: a run streaming ``--replay-deltas`` ticks a millisecond apart, the connection cut
  after a quarter of them, then resumed with ``Last-Event-ID`` (bread_sync: ``GET
  /runs/<id>/stream`` read by its own stream reader; LangGraph: a resumable run on a thread,
  ``GET /threads/<t>/runs/<r>/stream``, its SDK's way): the ticks the user was shown twice,
  and those never shown.

LangGraph gets as many jobs per worker as the most concurrent runs asked (its default is 10,
which would queue the concurrent runs). Without the ``langgraph`` command beside this Python
(or ``--langgraph``), the script says so and writes nothing::

    .venv/bin/python bench/peer.py --repeat 3 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import rawhttp
from harness import Figure, Gunicorn

from bread_sync.crumbs import TEXT_DELTA
from bread_sync.wire import SSEDecoder
from bread_sync.wire.reader import RunStreamReader

SCRIPT = "peer.py"
TITLE = "## Beside LangGraph's server"
READY_SECONDS = 90.0
RUN_SECONDS = 300.0
REPLAY_DELAY_MS = 1

GRAPH = '''\
import time
from typing import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    count: int
    delayMs: int
    done: int


def ticks(state: State) -> State:
    """Writes ``count`` custom stream events, as bread_sync's ``slow`` agent streams its ticks."""
    write, delay = get_stream_writer(), state.get("delayMs", 0) / 1000
    for n in range(1, state["count"] + 1):
        write(f"tick {n} ")
        if delay:
            time.sleep(delay)
    return {"done": state["count"]}


builder = StateGraph(State)
builder.add_node("ticks", ticks)
builder.add_edge(START, "ticks")
builder.add_edge("ticks", END)
graph = builder.compile()
'''


@dataclass
class LangGraph:
    """``langgraph dev`` serving the scripted graph on a free loopback port."""

    command: Path
    home: Path
    jobs: int
    port: int = 0
    proc: subprocess.Popen | None = None

    def start(self) -> LangGraph:
        folder = self.home / "langgraph"
        folder.mkdir(parents=True)
        (folder / "graph.py").write_text(GRAPH, encoding="utf-8")
        config = {"dependencies": ["."], "graphs": {"ticks": "./graph.py:graph"}}
        (folder / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
        self.port = harness.free_port()
        cmd = [str(self.command), "dev", "--host", "127.0.0.1", "--port", str(self.port), "--no-browser",
               "--no-reload", "--n-jobs-per-worker", str(self.jobs), "--config", "langgraph.json"]  # fmt: skip
        env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.home / "langgraph.log", "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, process_group=0)  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.proc.returncode}: see {self.home}/langgraph.log")
            try:
                conn = rawhttp.Client().fetch(rawhttp.Conn(self.port, rawhttp.request("GET", self.port, "/ok")), 2)
                if conn.status == 200:
                    return
            except RuntimeError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("langgraph dev was not ready in time")

    def server_pid(self) -> int:
        """The process that serves and runs the graphs: the newest of the group (the CLI may
        start the server as its child)."""
        members = harness.session_members(os.getsid(self.proc.pid))
        group = [pid for pid in members if os.getpgid(pid) == self.proc.pid]
        return max(group, key=harness.cpu_seconds)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def __enter__(self) -> LangGraph:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Side:
    """One server and how to ask it for a run of ``count`` ticks (and to resume one)."""

    def __init__(self, name: str, port: int, pid: Callable[[], int]):
        self.name, self.port, self.pid = name, port, pid

    def run(self, count: int, delay_ms: int = 0, **options: Any) -> rawhttp.Conn:
        if self.name == "bread_sync":
            body = {"input": {"count": count, "delayMs": delay_ms}}
            return rawhttp.Conn(self.port, rawhttp.request("POST", self.port, "/agents/slow/run", body), **options)
        body = {"assistant_id": "ticks", "input": {"count": count, "delayMs": delay_ms}, "stream_mode": ["custom"]}
        return rawhttp.Conn(self.port, rawhttp.request("POST", self.port, "/runs/stream", body), **options)


def events(conn: rawhttp.Conn) -> list[Any]:
    return list(SSEDecoder().feed(conn.body()))


def single(side: Side, deltas: int) -> tuple[float, int]:
    conn = rawhttp.Client().fetch(side.run(deltas, record=True), RUN_SECONDS)
    count = len(events(conn))
    return count / (conn.finished - conn.started), count


def concurrent(side: Side, streams: int, deltas: int) -> float:
    client = rawhttp.Client()
    conns = client.open(side.run(deltas, record=True) for _ in range(streams))
    if not client.pump(conns, timeout=RUN_SECONDS) or any(c.error for c in conns):
        client.close(conns)
        raise RuntimeError(f"{side.name}: concurrent runs failed: {[c.error for c in conns if c.error][:3]}")
    counts = [len(events(c)) for c in conns]
    if min(counts) < deltas:
        raise RuntimeError(f"{side.name}: a concurrent run had {min(counts)} events, not {deltas} or more")
    return sum(counts) / (max(c.finished for c in conns) - min(c.started for c in conns))


def first_events(sides: list[Side], times: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {side.name: [] for side in sides}
    client = rawhttp.Client()
    for i in range(times):
        for side in sides[i % 2 :] + sides[: i % 2]:
            conn = client.fetch(side.run(1))
            samples[side.name].append(conn.first - conn.started)
    return samples


# -- a replay ------------------------------------------------------------------------------


def cut(port: int, data: bytes, after: int) -> rawhttp.Conn:
    """A request whose connection is closed once ``after`` chunks have come."""
    client = rawhttp.Client()
    conn = client.open([rawhttp.Conn(port, data, record=True)])[0]
    client.pump([conn], until=lambda c: c.count >= after or c.done, timeout=RUN_SECONDS)
    client.close([conn])
    if conn.done:
        raise RuntimeError(f"the run to replay ended before its cut: {conn.error or 'make it longer'}")
    return conn


def shown_twice_and_lost(text: str, count: int) -> tuple[int, int]:
    seen = Counter(text.split("tick ")[1:])
    return sum(n - 1 for n in seen.values() if n > 1), count - len(seen)


def replay_bread(side: Side, count: int) -> tuple[int, int]:
    first = cut(side.port, side.run(count, REPLAY_DELAY_MS).out.tobytes(), count // 4)
    reader = RunStreamReader(first.headers["bread-run-id"])
    reader.connect(first.headers["content-type"], time.monotonic())
    shown = reader.feed(first.body(), time.monotonic())
    path, headers = f"/runs/{reader.run_id}/stream", {"Last-Event-ID": reader.last_event_id}
    rest = rawhttp.Client().fetch(rawhttp.Conn(side.port, rawhttp.request("GET", side.port, path, headers=headers),
                                               record=True), RUN_SECONDS)  # fmt: skip
    reader.connect(rest.headers["content-type"], time.monotonic())
    shown += reader.feed(rest.body(), time.monotonic())
    text = "".join(item.crumb["delta"] for item in shown if getattr(item, "type", None) == TEXT_DELTA)
    return shown_twice_and_lost(text, count)


def new_thread(port: int) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/threads", b"{}", {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["thread_id"]


def replay_langgraph(side: Side, count: int) -> tuple[int, int]:
    port = side.port
    thread = new_thread(port)
    body = {"assistant_id": "ticks", "input": {"count": count, "delayMs": REPLAY_DELAY_MS}, "stream_mode": ["custom"],
            "stream_resumable": True, "on_disconnect": "continue"}  # fmt: skip
    first = cut(port, rawhttp.request("POST", port, f"/threads/{thread}/runs/stream", body), count // 4)
    decoder = SSEDecoder()
    shown = list(decoder.feed(first.body()))
    run_id = json.loads(shown[0].data)["run_id"]
    path, headers = f"/threads/{thread}/runs/{run_id}/stream", {"Last-Event-ID": decoder.last_event_id or ""}
    rest = rawhttp.Client().fetch(rawhttp.Conn(port, rawhttp.request("GET", port, path, headers=headers),
                                               record=True), RUN_SECONDS)  # fmt: skip
    shown += decoder.feed(rest.body())
    text = "".join(json.loads(event.data) for event in shown if event.event == "custom")
    return shown_twice_and_lost(text, count)


# -- driving -------------------------------------------------------------------------------


def with_cpu(side: Side, work: Callable[[], Any]) -> tuple[Any, float]:
    """What ``work`` returns, and the server's CPU time (seconds) over it."""
    pid = side.pid()
    before = harness.cpu_seconds(pid)
    out = work()
    return out, harness.cpu_seconds(pid) - before


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    keys = ["single", "single_cpu", "first", "rss", "repeated", "lost", *(f"concurrent{n}" for n in args.streams)]
    samples = {name: {key: [] for key in keys} for name in ("bread_sync", "langgraph")}
    load = [harness.load_average()]
    env = {"BREAD_DB": str(folder / "bread.db"), "BREAD_TRANSPORT": "http-sse"}
    with Gunicorn("bread", "wsgi:app", folder, env=env) as server, \
            LangGraph(args.langgraph, folder, max(args.streams)) as peer:  # fmt: skip
        sides = [Side("bread_sync", server.port, server.worker), Side("langgraph", peer.port, peer.server_pid)]
        replays = {"bread_sync": replay_bread, "langgraph": replay_langgraph}
        for side in sides:  # warm both: imports, the graph's first compile, the store's tables
            single(side, 100)
        for rep in range(args.repeat):
            order = sides[rep % 2 :] + sides[: rep % 2]
            for side in order:
                s = samples[side.name]
                (rate, count), cpu = with_cpu(side, lambda side=side: single(side, args.deltas))
                s["single"].append(rate)
                s["single_cpu"].append(cpu / count)
                for streams in args.streams:
                    s[f"concurrent{streams}"].append(concurrent(side, streams, args.concurrent_deltas))
                s["rss"].append(harness.status_kb(side.pid()) / 1024)
                repeated, lost = replays[side.name](side, args.replay_deltas)
                s["repeated"].append(repeated)
                s["lost"].append(lost)
            for name, values in first_events(order, args.first).items():
                samples[name]["first"].append(statistics.median(values))
    load.append(harness.load_average())
    return {"samples": samples, "load": load}


# -- reporting -----------------------------------------------------------------------------


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    ours, theirs = result["samples"]["bread_sync"], result["samples"]["langgraph"]

    def pair(name: str, key: str, unit: str) -> Figure:
        return Figure(name, ours[key], unit, "LangGraph", theirs[key], "bread_sync / LangGraph",
                      harness.ratios(ours[key], theirs[key]))  # fmt: skip

    out = [pair(f"one run of {args.deltas:,} events, events/s", "single", "/s")]
    out += [pair(f"{n} concurrent runs of {args.concurrent_deltas}, aggregate events/s", f"concurrent{n}", "/s")
            for n in args.streams]  # fmt: skip
    out += [
        pair("time to first event, p50", "first", "ms"),
        pair(f"server CPU per event, one run of {args.deltas:,}", "single_cpu", "us"),
        pair("server RSS after the concurrent runs", "rss", "MB"),
    ]
    replayed = f"replay of {args.replay_deltas} ticks cut after a quarter: ticks"
    for key, what in (("repeated", "shown twice"), ("lost", "never shown")):
        out.append(Figure(f"{replayed} {what}", ours[key], " ticks", "LangGraph", theirs[key]))
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"bread_sync {harness.version('bread_sync')} (gunicorn, one gevent worker, SSE) beside "
        f"`langgraph dev` (langgraph-api {langgraph_api_version(args.langgraph)}, in-memory runtime, "
        f"`--n-jobs-per-worker {max(args.streams)}`), one client, in turn within each repetition. "
        "The ratios are bread_sync's figure over LangGraph's in the same repetition: above 1 is "
        "better for events/s, below 1 for time, CPU and memory.",
        "",
        *harness.table(figures(result, args)),
    ]
    return "\n".join(lines)


def langgraph_api_version(command: Path) -> str:
    """The langgraph-api version of the environment the ``langgraph`` command runs in."""
    code = "import importlib.metadata as m; print(m.version('langgraph-api'))"
    return subprocess.run([str(command.parent / "python"), "-c", code], capture_output=True, text=True).stdout.strip()


def langgraph_command(given: Path | None) -> Path | None:
    command = given or Path(sys.executable).parent / "langgraph"
    return command if command.exists() else None


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 3)
    parser.add_argument("--deltas", type=int, default=5000, help="events of the single run (default 5000)")
    parser.add_argument("--streams", type=int, nargs="+", default=[50, 200], help="concurrent runs (default 50 200)")
    parser.add_argument("--concurrent-deltas", type=int, default=250, help="ticks per concurrent run (default 250)")
    parser.add_argument("--first", type=int, default=30, help="first-event samples per repetition (default 30)")
    parser.add_argument("--replay-deltas", type=int, default=400, help="ticks of the replayed run (default 400)")
    parser.add_argument("--langgraph", type=Path, help="the langgraph command (default: beside this Python)")
    args = parser.parse_args(argv)
    args.langgraph = langgraph_command(args.langgraph)
    if args.langgraph is None:
        print("peer.py: skipped: no `langgraph` command (pip install -e '.[bench]', or --langgraph PATH)")
        return
    harness.raise_open_files(max(args.streams) * 2 + 100)
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-peer-", bench, report, figures)


if __name__ == "__main__":
    main()
