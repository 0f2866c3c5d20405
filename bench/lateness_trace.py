"""Where the lateness of bench/http_stream.py's 200 metronome streams comes from: one lateness
workload against a worker whose greenlet switches are traced (bench/trace_conf.py), then

- which deltas make up the worst 1% (by their index in their run: the last one, index
  ``beats - 1``, is the one that meets the other runs' ends);
- the CPU time of the worker's event loop thread per 50 ms of the schedule, by what ran (a run's
  driver, a request's handler with its response, the hub): how full each period is;
- per kind of greenlet, CPU time, wall time and the longest slice.

A diagnosis, not a figure for docs/performance.md's tables (the trace itself costs a few
microseconds a switch)::

    .venv/bin/python bench/lateness_trace.py --wire ndjson
    .venv/bin/python bench/lateness_trace.py --wire ndjson --minimal   # the minimal app, same load
"""

from __future__ import annotations

import argparse
import collections
import pickle
import tempfile
import time
from pathlib import Path

import harness
import http_stream
from harness import Gunicorn, percentile

WINDOW = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    http_stream.add_lateness_options(parser)
    parser.add_argument("--minimal", action="store_true", help="trace the minimal app replaying bread_sync")
    args = parser.parse_args()
    harness.raise_open_files(args.streams * 2 + 100)
    folder = Path(tempfile.mkdtemp(prefix="bread-bench-trace-"))
    trace = folder / "switches.pickle"
    env = {**http_stream.bread_env(folder, args.wire), "BENCH_TRACE": str(trace),
           "BENCH_TRACE_SECONDS": str(http_stream.LEAD_SECONDS + args.beats * args.period + 1)}  # fmt: skip
    app = "wsgi:app"
    if args.minimal:
        bodies = folder / "bodies"
        bodies.mkdir()
        with Gunicorn("record", "wsgi:app", folder, env=http_stream.bread_env(folder, args.wire)) as server:
            beat = {"start": time.time(), "period": 0.0, "count": args.beats, "stamp": True}
            http_stream.record(http_stream.Side("bread_sync", server, args.wire, False), bodies, "beat", beat,
                               args.beats)  # fmt: skip
        env, app = {"BENCH_BODIES": str(bodies), "BENCH_TRACE": str(trace),
                    "BENCH_TRACE_SECONDS": env["BENCH_TRACE_SECONDS"]}, "minimal_app:app"  # fmt: skip
    with Gunicorn("traced", app, folder, env=env, config="bench/trace_conf.py") as server:
        side = http_stream.Side("traced", server, args.wire, replay=args.minimal)
        requested = time.time()
        late = http_stream.lateness(side, args.streams, args.beats, args.period)["late"]
        deadline = time.monotonic() + 30
        while not trace.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    with open(trace, "rb") as dumped:
        switches = pickle.load(dumped)
    report(late, switches, requested + http_stream.LEAD_SECONDS, args)


def report(late: list[float], switches: list[tuple[float, float, str]], first_due: float, args) -> None:
    p99 = percentile(late, 99)
    worst = collections.Counter(i % args.beats for i, value in enumerate(late) if value >= p99)
    print(f"p99 lateness {p99 * 1e3:.2f} ms; the deltas at or above it by index in their run: "
          + ", ".join(f"{index}: {n}" for index, n in sorted(worst.items())))  # fmt: skip
    last = [value for i, value in enumerate(late) if i % args.beats == args.beats - 1]
    rest = [value for i, value in enumerate(late) if i % args.beats != args.beats - 1]
    print(f"each run's last delta: p50 {percentile(last, 50) * 1e3:.2f} ms, p90 {percentile(last, 90) * 1e3:.2f} ms; "
          f"the others: p50 {percentile(rest, 50) * 1e3:.2f} ms, p99 {percentile(rest, 99) * 1e3:.2f} ms")  # fmt: skip
    cpu, wall, slices, longest = (collections.defaultdict(float), collections.defaultdict(float),
                                  collections.Counter(), collections.defaultdict(float))  # fmt: skip
    windows: dict[int, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for (at, used, kind), (until, used_until, _) in zip(switches, switches[1:], strict=False):
        cpu[kind] += used_until - used
        wall[kind] += until - at
        slices[kind] += 1
        longest[kind] = max(longest[kind], until - at)
        windows[int((at - first_due) // WINDOW)][kind] += used_until - used
    print("\nCPU time of the event loop's thread per 50 ms of the schedule (0 = the first delta due):")
    windows_shown = int(args.beats * args.period / WINDOW) + 3
    for window in range(-1, windows_shown):
        spent = windows.get(window, {})
        top = sorted(((v, k) for k, v in spent.items() if k != "hub"), reverse=True)[:2]
        print(f"{window * WINDOW * 1e3:7.0f} ms  {sum(spent.values()) * 1e3:5.1f} ms  "
              + "  ".join(f"{k} {v * 1e3:.1f}" for v, k in top))  # fmt: skip
    print("\nBy kind: CPU ms, wall ms, slices, longest slice us")
    for kind in sorted(cpu, key=cpu.get, reverse=True):
        print(
            f"{kind[:40]:40s} {cpu[kind] * 1e3:8.1f} {wall[kind] * 1e3:9.1f} {slices[kind]:7d} "
            f"{longest[kind] * 1e6:8.0f}"
        )


if __name__ == "__main__":
    main()
