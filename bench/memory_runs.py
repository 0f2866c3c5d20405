"""Memory over 10,000 completed runs with the default embedded transport, in process.

Each repetition is a fresh child process: ``create_bread`` with the demo ``echo`` agent, the
SQLite store on a file in a temporary folder and the default transport (none named: the
NDJSON HTTP transport over the embedded stream), then ``bread.run("echo", ..., mode="sync")``
10,000 times. At 0, 2,500, 5,000 and 10,000 runs, after ``gc.collect()``, it reads the
process's VmRSS, the bytes tracemalloc traces (tracing is on from before ``create_bread``; the
RSS shown has tracemalloc's own bookkeeping taken out), and the count of live objects, and at
the end how many runs the transport still retains. Only the first ``--traced`` repetitions
trace (tracemalloc doubles the time of a run); every one counts allocated blocks
(``sys.getallocatedblocks()``), which costs nothing.

Memory is flat when what 7,500 more runs add after the first 2,500 is near nothing: the
baseline is the same process at 2,500 runs. The children run side by side (memory, not time,
is measured)::

    .venv/bin/python bench/memory_runs.py --repeat 2 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import harness
from harness import Figure, ratios

SCRIPT = "memory_runs.py"
TITLE = "## Memory over 10,000 runs (embedded transport)"
TEXT = "the quick brown fox jumps over the lazy dog"
#: Aims: RSS at the end within 5% of RSS at the first checkpoint after warm-up; over the last
#: 7,500 runs, less than one allocated block and (traced) 100 bytes more a run.
AIM_RSS_RATIO = 1.05
AIM_BYTES_PER_RUN = 100
AIM_BLOCKS_PER_RUN = 1


def child(runs: int, checkpoints: list[int], out: Path, traced: bool) -> None:
    """One repetition, in this (fresh) process."""
    if traced:
        tracemalloc.start()
    from bread_sync import Config, create_bread
    from bread_sync.demo import echo
    from bread_sync.stores import sqlite

    samples: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bread-bench-memory-") as tmp:
        folder = Path(tmp)
        bread = create_bread(Config(agents=[echo], store=sqlite.store(path=folder / "bread.db"), instance_path=folder))
        types_at: dict[int, Counter] = {}
        start = time.perf_counter()
        try:
            for done in range(runs + 1):
                if done in checkpoints:
                    samples[done] = measure()
                    types_at[done] = Counter(type(o).__name__ for o in gc.get_objects())
                if done < runs:
                    result = bread.run("echo", TEXT, mode="sync")
                    if result.status != "completed":
                        raise RuntimeError(f"run {done} ended {result.status}")
            seconds = time.perf_counter() - start
            retained = len(getattr(getattr(bread.transport, "pubsub", bread.transport), "_runs", ()))
        finally:
            bread.close()
    first, last = checkpoints[1], checkpoints[-1]
    growth = (types_at[last] - types_at[first]).most_common(5)
    out.write_text(json.dumps({"samples": samples, "seconds": seconds, "retained": retained, "growth": growth,
                               "traced": traced}))  # fmt: skip


def retention(out: Path) -> None:
    """The embedded transport fed ``max_runs`` runs of ``buffer_size`` frames each (text deltas
    as a long answer streams them, each run ending), beside as many runs of 12 frames (an echo
    run): the traced bytes and the frames it holds. Frames carry their wire JSON, as they do
    once a response has formatted them."""
    from bread_sync.crumbs import Frame
    from bread_sync.transports import stream

    tracemalloc.start()
    held, kept = {}, {}
    for frames in (12, None):
        transport = stream.transport()
        per_run = frames or transport.buffer_size
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for r in range(transport.max_runs):
            run_id = f"run_{r:032x}"
            for i in range(per_run - 1):
                frame = Frame(run_id, 1, {"type": "text:delta", "runId": run_id, "delta": f"tick {i} "})
                frame.wire  # noqa: B018 - made once a response formats the frame, then kept with it
                transport.publish(frame)
            transport.publish(Frame(run_id, 2, {"type": "agent:run:end", "runId": run_id, "output": None}))
        gc.collect()
        held[per_run] = (tracemalloc.get_traced_memory()[0] - before) / 2**20
        kept[per_run] = sum(len(transport.retained(f"run_{r:032x}")) for r in range(transport.max_runs))
        bound = {
            "max_runs": transport.max_runs,
            "buffer_size": transport.buffer_size,
            "max_frames": transport.max_frames,
        }
        del transport
    out.write_text(json.dumps({"held_mb": held, "kept_frames": kept, **bound}))


def measure() -> dict[str, float]:
    gc.collect()
    traced, _ = tracemalloc.get_traced_memory()
    rss = harness.status_kb(os.getpid()) * 1024 - tracemalloc.get_tracemalloc_memory()
    return {"rss_mb": rss / 2**20, "traced_mb": traced / 2**20, "objects": len(gc.get_objects()),
            "blocks": sys.getallocatedblocks()}  # fmt: skip


def bench(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    load = [harness.load_average()]
    checkpoints = [0, args.runs // 4, args.runs // 2, args.runs]
    procs = []
    for r in range(args.repeat):
        out = folder / f"rep{r}.json"
        cmd = [sys.executable, __file__, "--child", "--runs", str(args.runs), "--json", str(out)]
        cmd += ["--traced", "1"] if r < args.traced else []
        procs.append((subprocess.Popen(cmd, cwd=harness.ROOT), out))
    retained = folder / "retention.json"
    procs.append((subprocess.Popen([sys.executable, __file__, "--retention", "--json", str(retained)],
                                   cwd=harness.ROOT), retained))  # fmt: skip
    reps = []
    for proc, out in procs:
        if proc.wait(timeout=args.timeout) != 0:
            raise RuntimeError(f"a repetition failed with exit code {proc.returncode}")
        reps.append(json.loads(out.read_text()))
    load.append(harness.load_average())
    return {"reps": reps[:-1], "retention": reps[-1], "checkpoints": checkpoints, "load": load}


def figures(result: dict[str, Any], args: argparse.Namespace) -> list[Figure]:
    reps, points = result["reps"], result["checkpoints"]
    first, last = points[1], points[-1]
    traced = [rep for rep in reps if rep["traced"]]

    def at(point: int, key: str, among: list[dict] = reps) -> list[float]:
        return [rep["samples"][str(point)][key] for rep in among]

    def per_run(key: str, among: list[dict], scale: float = 1.0) -> list[float]:
        return [(x - y) * scale / (last - first) for x, y in zip(at(last, key, among), at(first, key, among),
                                                                 strict=True)]  # fmt: skip

    rss_ratio = ratios(at(last, "rss_mb"), at(first, "rss_mb"))
    out = [Figure(f"RSS after {point:,} runs", at(point, "rss_mb"), "MB", f"after {first:,} runs",
                  at(first, "rss_mb"), f"/ {first:,} runs", ratios(at(point, "rss_mb"), at(first, "rss_mb")),
                  f"<= {AIM_RSS_RATIO}x" if point == last else "",
                  statistics.median(rss_ratio) <= AIM_RSS_RATIO if point == last else None)
           for point in points]  # fmt: skip
    blocks = per_run("blocks", reps)
    met = statistics.median(blocks) < AIM_BLOCKS_PER_RUN
    name = f"allocated memory blocks, growth per run from {first:,} to {last:,} runs"
    out.append(Figure(name, blocks, "", aim=f"< {AIM_BLOCKS_PER_RUN} a run", met=met))
    if traced:
        out += [Figure(f"traced heap (tracemalloc) after {point:,} runs", at(point, "traced_mb", traced), "MB",
                       f"after {first:,} runs", at(first, "traced_mb", traced), f"/ {first:,} runs",
                       ratios(at(point, "traced_mb", traced), at(first, "traced_mb", traced)))
                for point in points[1:]]  # fmt: skip
        grown = per_run("traced_mb", traced, 2**20)
        met = statistics.median(grown) < AIM_BYTES_PER_RUN
        name = f"traced heap growth per run, runs {first:,} to {last:,} (bytes)"
        out.append(Figure(name, grown, "", aim=f"< {AIM_BYTES_PER_RUN} B", met=met))
    kept = result["retention"]
    long = str(kept["buffer_size"])
    small, large = kept["held_mb"]["12"], kept["held_mb"][long]
    out.append(Figure(f"embedded transport after {kept['max_runs']:,} runs of {kept['buffer_size']:,} delta frames "
                      f"(it keeps {kept['kept_frames'][long]:,} frames; `max_frames` {kept['max_frames']:,}), traced",
                      [large], "MB", f"{kept['max_runs']:,} runs of 12 frames (echo; it keeps "
                      f"{kept['kept_frames']['12']:,})", [small], "long / echo", [large / small]))  # fmt: skip
    objects = ratios(at(last, "objects"), at(first, "objects"))
    out.append(Figure(f"live objects after {last:,} runs", at(last, "objects"), "", f"after {first:,} runs",
                      at(first, "objects"), f"/ {first:,} runs", objects))  # fmt: skip
    return out


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    reps = result["reps"]
    rate = statistics.median(args.runs / rep["seconds"] for rep in reps)
    growth = "; ".join(", ".join(f"{name} +{count:,}" for name, count in rep["growth"]) or "none" for rep in reps)
    lines = harness.header(command, args.repeat, result["load"])
    lines += [
        f"{args.runs:,} runs of `echo` ({len(TEXT.split())} words, 12 crumbs each) per repetition, at {rate:,.0f} "
        f"runs/s; {sum(rep['traced'] for rep in reps)} of the {len(reps)} repetitions (run side by side) with "
        "tracemalloc on, which slows runs about 2x. The transport still retained "
        f"{', '.join(str(rep['retained']) for rep in reps)} runs at the end (its `max_runs` and `max_frames` "
        "bounds).",
        "",
        *harness.table(figures(result, args)),
        "",
        f"Object types that grew most from run {result['checkpoints'][1]:,} to {args.runs:,}, per repetition: "
        f"{growth}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, 2, "repetitions, side by side")
    parser.add_argument("--runs", type=int, default=10_000, help="runs per repetition (default 10000)")
    parser.add_argument("--timeout", type=float, default=480, help="seconds a repetition may take (default 480)")
    parser.add_argument("--traced", type=int, default=1, help="repetitions run with tracemalloc on (default 1)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--retention", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 4:
        parser.error("--runs must be at least 4")
    if args.retention:
        retention(args.json)
        return
    if args.child:
        child(args.runs, [0, args.runs // 4, args.runs // 2, args.runs], args.json, bool(args.traced))
        return
    harness.run(args, argv, SCRIPT, TITLE, "bread-bench-memory-", bench, report, figures)


if __name__ == "__main__":
    main()
