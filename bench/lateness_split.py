"""Where a delta's lateness goes, per repetition of bench/http_stream.py's lateness workload on
one bread_sync server (no minimal app): each run's last delta (due while the other runs end)
against the others, each split into "the model produced it late" and "from the model to the
client"; the indices of the worst 1%; the worker's CPU time per event; and the garbage
collector's passes of the worker over 2 ms during the repetition (bench/gc_conf.py), with their
time from the first delta's due time. A diagnosis beside the tables, not a figure for them::

    .venv/bin/python bench/lateness_split.py --wire ndjson --repeat 6
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

import harness
import http_stream
from harness import Gunicorn, percentile

GC_SHOWN_MS = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    http_stream.add_lateness_options(parser)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    harness.raise_open_files(args.streams * 2 + 100)
    folder = Path(tempfile.mkdtemp(prefix="bread-bench-split-"))
    gc_log = folder / "gc.log"
    env = {**http_stream.bread_env(folder, args.wire), "BENCH_GCLOG": str(gc_log)}
    with Gunicorn("split", "wsgi:app", folder, env=env, config="bench/gc_conf.py") as server:
        side = http_stream.Side("bread_sync", server, args.wire, replay=False)
        for repetition in range(args.repeat):
            requested = time.time()
            out, cpu = harness.with_worker_cpu(server, args.streams * (args.beats + 2), http_stream.lateness,
                                               side, args.streams, args.beats, args.period)  # fmt: skip
            print(f"repetition {repetition}, load {harness.load_average():.1f}, CPU time per event {cpu * 1e6:.1f} us")
            report(out, args)
            passes = gc_passes(gc_log, requested, requested + http_stream.LEAD_SECONDS)
            print("  collections over 2 ms (s from the first due delta, generation, ms):", passes or "none")
            time.sleep(1)


def report(out: dict[str, list[float]], args: argparse.Namespace) -> None:
    def ms(values: list[float]) -> str:
        return " ".join(f"p{p} {percentile(values, p) * 1e3:5.2f}" for p in (50, 90, 99))

    for label, last in (("each run's last delta", True), ("the other deltas   ", False)):
        picked = {part: [v for i, v in enumerate(out[part]) if (i % args.beats == args.beats - 1) == last]
                  for part in ("late", "model", "delivery")}  # fmt: skip
        print(f"  {label}: late {ms(picked['late'])} | model {ms(picked['model'])} | "
              f"to the client {ms(picked['delivery'])} ms")  # fmt: skip
    p99 = percentile(out["late"], 99)
    worst = collections.Counter(i % args.beats for i, value in enumerate(out["late"]) if value >= p99)
    print(f"  p99 {p99 * 1e3:.2f} ms; the worst 1% by index in their run: {sorted(worst.items())}")


def gc_passes(log: Path, since: float, first_due: float) -> list[tuple[float, int, float]]:
    rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return [(round(float(at) - first_due, 3), int(gen), float(spent)) for at, gen, spent in rows
            if float(at) >= since and float(spent) >= GC_SHOWN_MS]  # fmt: skip


if __name__ == "__main__":
    main()
