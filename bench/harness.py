"""What the benchmarks share: real gunicorn servers on loopback, process memory and CPU from
/proc, the machine's description, summaries and the marked sections of docs/performance.md.

Nothing here is timed; the scripts time their own work.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import datetime
import importlib.metadata
import io
import json
import os
import platform
import pstats
import resource
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
# Measure the bread_sync of the checkout these scripts sit in, whatever the venv has installed.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

READY_SECONDS = 30.0
STOP_SECONDS = 10.0
#: Settings of the developer's shell that would change what the servers under test do.
_SCRUBBED = ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "REDIS_URL", "PYTHONPATH")
PACKAGES = ("bread-sync", "flask", "werkzeug", "gunicorn", "gevent", "greenlet", "sqlite-utils", "pydantic")
INTRO = """# Performance

Figures come from the scripts in `bench/`, one `##` section per benchmark. Each figure is a ratio
against a baseline measured in the same process and the same run, reported as the median and the
min-max over repetitions, beside the command that produced it, the date and the machine. Absolute
rates are given for context only: they depend on the machine and its disk.
"""


# -- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(eq=False)
class Gunicorn:
    """One gunicorn master and its gevent worker(s) serving ``app`` on a free loopback port,
    with the project's gunicorn.conf.py (or ``config``) so both apps get the same settings;
    ``root``: the checkout it serves (another one's code, e.g. an older commit's, taken out)."""

    name: str
    app: str
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    config: str = "gunicorn.conf.py"
    extra: tuple[str, ...] = ()
    port: int = 0
    proc: subprocess.Popen | None = None
    root: Path = ROOT

    @property
    def log_path(self) -> Path:
        return self.home / f"{self.name}.log"

    def start(self) -> Gunicorn:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_") and k not in _SCRUBBED}
        env.update(
            PYTHONUNBUFFERED="1",
            PYTHONPATH=f"{self.root}{os.pathsep}{BENCH}",
            BREAD_INSTANCE=str(self.home / f"{self.name}-instance"),
        )
        env.update(self.env)
        self.port = free_port()
        cmd = [str(GUNICORN), "-c", self.config, "-k", "gevent", "-w", str(self.workers),
               "-b", f"127.0.0.1:{self.port}", "--no-control-socket", "--graceful-timeout", "3", *self.extra,
               self.app]  # fmt: skip
        with open(self.log_path, "ab") as log:
            # A group of its own (stop() kills it whole), in the script's session: bench/run
            # finds it there if the script dies without stopping it.
            self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, process_group=0)  # fmt: skip
        try:
            self._wait_ready()
        except BaseException:  # not ready, or the script told to stop while it waited
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            if self.get("/health")[0] == 200 and len(self.worker_pids()) == self.workers:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} was not ready within {READY_SECONDS:g} s:\n{self.log()}")

    def get(self, path: str, timeout: float = 1.0) -> tuple[int, float]:
        """A blocking ``GET`` on a fresh connection: (status, seconds), status 0 when it failed."""
        data = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n\r\n".encode()
        start = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
                sock.sendall(data)
                head = sock.recv(64)
        except OSError:
            return 0, time.perf_counter() - start
        parts = head.split(b" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        return status, time.perf_counter() - start

    def worker_pids(self) -> list[int]:
        if self.proc is None:
            return []
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def worker(self) -> int:
        pids = self.worker_pids()
        if len(pids) != 1:
            raise RuntimeError(f"{self.name}: expected one worker, found {pids}")
        return pids[0]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this server leads, nothing else
            proc.wait(timeout=STOP_SECONDS)

    def log(self, limit: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return "(no log)"

    def __enter__(self) -> Gunicorn:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- processes -----------------------------------------------------------------------------

#: What a script told to stop has to stop its servers before what is left of it is killed.
STOP_SCRIPT_SECONDS = 20.0


def exit_on_sigterm() -> None:
    """SIGTERM (bench/run stopping a script over its budget) exits by SystemExit, so every
    ``with Gunicorn(...)`` on the way out stops its server, rather than the script dying at once
    and leaving them running."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def start_script(cmd: list[str], **options: Any) -> subprocess.Popen:
    """``cmd`` in a session of its own: whatever it starts, however it groups it, stays in that
    session, for :func:`stop_script`."""
    return subprocess.Popen(cmd, start_new_session=True, **options)


def stop_script(proc: subprocess.Popen, grace: float = STOP_SCRIPT_SECONDS) -> None:
    """Stop a script of :func:`start_script` and every process it started: SIGTERM to its group
    (it stops its servers, see :func:`exit_on_sigterm`), then, ``grace`` seconds on at most,
    SIGKILL to whatever is left in its session. Called after a script that ended, it only
    clears what that script left running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for pid in session_members(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # gone meanwhile
    proc.wait()


def session_members(session: int) -> list[int]:
    """The processes of ``session`` (its leader's pid), from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)", which may hold spaces
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[3]) == session:
            members.append(int(stat.parent.name))
    return members


def status_kb(pid: int, key: str = "VmRSS") -> int:
    """A ``/proc/<pid>/status`` figure in kB: VmRSS (resident now), VmHWM (its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


#: The C library, for the CPU-time clock of another process (``clock_getcpuclockid``).
LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process (all its threads) has used, to the nanosecond: its
    CPU-time clock, not ``/proc/<pid>/stat``, which counts in clock ticks of 10 ms (a run of
    5,000 events spends 10-20 of them, so a tick moved a figure per event by a tenth)."""
    clock = ctypes.c_int()
    if LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        return time.clock_gettime(clock.value)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # where it has none
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_seconds(pid: int) -> float:
    """How long the process's threads have waited for a CPU while ready to run (schedstat):
    beside :func:`cpu_seconds`, whether a process that did little was idle or crowded out."""
    waited = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            waited += int(stat.read_text().split()[1])
        except (OSError, IndexError):  # a thread that ended meanwhile
            continue
    return waited / 1e9


def with_worker_cpu(server: Gunicorn, events: int, measure: Callable[..., float], *args: Any) -> tuple[float, float]:
    """What ``measure(*args)`` returns, and the CPU time the server's worker spent meanwhile per
    event: the cost of a crumb to the server alone, whatever the client and the scheduler
    did (:func:`cpu_seconds`)."""
    pid = server.worker()
    before = cpu_seconds(pid)
    result = measure(*args)
    return result, (cpu_seconds(pid) - before) / events


def raise_open_files(wanted: int) -> int:
    """Raise this process's file limit toward ``wanted`` (up to the hard limit); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- profiles ------------------------------------------------------------------------------


def profile_rows(path: Path) -> list[tuple[str, str, int, float, float]]:
    """A cProfile dump (bench/profile_conf.py's) as rows: (module, function, calls, own s,
    cumulative s)."""
    stats = pstats.Stats(str(path), stream=io.StringIO())
    return [(module_of(file, name), f"{Path(file).name}:{line}({name})" if line else name, calls, own, cumulative)
            for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items()]  # fmt: skip


def module_of(file: str, name: str) -> str:
    """Where a profiled function lives, short: ``bread_sync/wire/formats.py``, ``gevent``, ``stdlib json``."""
    if file == "~":
        return "socket send (C)" if "'send' of '_socket.socket'" in name else "other C calls"
    parts = Path(file).parts
    for package in ("bread_sync", "gunicorn", "gevent", "werkzeug", "flask", "sqlite_utils", "bench"):
        if package in parts:
            index = len(parts) - 1 - parts[::-1].index(package)
            return "/".join(parts[index:]) if package in ("bread_sync", "bench") else package
    return "stdlib " + Path(file).name


def own_by_module(rows: list[tuple[str, str, int, float, float]]) -> dict[str, float]:
    """Own seconds per module of :func:`profile_rows`."""
    totals: dict[str, float] = {}
    for module, _, _, own, _ in rows:
        totals[module] = totals.get(module, 0.0) + own
    return totals


# -- figures -------------------------------------------------------------------------------


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by the nearest-rank method."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def fmt(value: float, unit: str = "") -> str:
    if unit == "x":  # two significant digits for a small ratio (a peer's figure far from ours)
        return f"{value:.2f}x" if abs(value) >= 0.1 else f"{value:.2g}x"
    if unit == "ms":
        return f"{value * 1e3:.2f} ms"
    if unit == "us":
        return f"{value * 1e6:.1f} us"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit == "%":
        return f"{value:.0%}"
    if not unit and abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:,.0f}{unit}"


def ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """Per-repetition ratios: each repetition's value over its own baseline."""
    return [x / y for x, y in zip(ours, theirs, strict=True)]


def spread(values: list[float], unit: str = "") -> tuple[str, str]:
    """(median, min-max) of repetitions, formatted."""
    median, low, high = summary(values)
    return fmt(median, unit), f"{fmt(low, unit)} - {fmt(high, unit)}"


@dataclass
class Figure:
    """One line of a benchmark's table: a measured value beside its baseline, both per
    repetition, and the aim the ratio is held to (if any)."""

    name: str
    values: list[float]
    unit: str
    baseline_name: str = ""
    baselines: list[float] | None = None
    ratio_name: str = ""
    ratios: list[float] | None = None
    aim: str = ""
    met: bool | None = None

    def row(self) -> str:
        value, value_range = spread(self.values, self.unit)
        base = f"{self.baseline_name}: {spread(self.baselines, self.unit)[0]}" if self.baselines else ""
        ratio = "" if not self.ratios else "{} ({})".format(*spread(self.ratios, "x"))
        verdict = "" if self.met is None else ("met" if self.met else "**missed**")
        return f"| {self.name} | {value} | {value_range} | {base} | {ratio} | {' '.join([self.aim, verdict]).strip()} |"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "median": statistics.median(self.values), "unit": self.unit,
                "range": [min(self.values), max(self.values)], "baseline": self.baseline_name,
                "baseline_median": statistics.median(self.baselines) if self.baselines else None,
                "ratio_median": statistics.median(self.ratios) if self.ratios else None,
                "ratio_range": [min(self.ratios), max(self.ratios)] if self.ratios else None,
                "aim": self.aim, "met": self.met}  # fmt: skip


TABLE_HEAD = ["| Figure | Median | Min - max | Baseline (median) | Ratio: median (min - max) | Aim |",
              "| --- | ---: | ---: | --- | ---: | --- |"]  # fmt: skip


def table(figures: list[Figure]) -> list[str]:
    return [*TABLE_HEAD, *(figure.row() for figure in figures)]


def write_json(path: Path | None, script: str, figures: list[Figure], extra: dict[str, Any] | None = None) -> None:
    if path is not None:
        data = {"script": script, "figures": [f.as_json() for f in figures], **(extra or {})}
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")


# -- the machine and the report ------------------------------------------------------------


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "CPU": f"{cpu_model()}, {cores} cores available",
        "Memory": _memory(),
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "SQLite library": sqlite3.sqlite_version,
        "Packages": ", ".join(f"{name} {version(name)}" for name in PACKAGES),
        "Code": revision(),
    }


def revision(untracked: bool = True) -> str:
    """The commit measured and whether bread_sync/ differs from it (read-only git); with
    ``untracked``, new files in bread_sync/ not yet added to git count as a difference too."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return f"bread_sync from {ROOT}, not a git checkout"
    dirty = git("diff", "--quiet", "HEAD", "--", "bread_sync").returncode != 0
    if untracked:
        dirty = dirty or bool(git("ls-files", "--others", "--exclude-standard", "bread_sync").stdout.strip())
    return f"commit {head.stdout.strip()}" + (" with uncommitted changes in bread_sync/" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> str:
    try:
        total = status_like("/proc/meminfo", "MemTotal")
    except (OSError, KeyError):
        return "unknown"
    return f"{total / 1024 / 1024:.0f} GB"


def status_like(path: str, key: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def load_average() -> float:
    """The machine's 1-minute load average: how busy other processes kept its cores."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def header(command: str, repeat: int | None = None, load: list[float] | None = None) -> list[str]:
    """The first lines of a section: its command, the date, the machine in short."""
    reps = f" {repeat} repetitions." if repeat else ""
    if load:
        reps += f" Load average (1 min) {' -> '.join(f'{x:.1f}' for x in load)}."
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    where = f"{cpu_model()}, {cores} cores, {platform.python_implementation()} {platform.python_version()}"
    return [
        f"Command: `{command}`",
        "",
        f"Date: {datetime.date.today().isoformat()}.{reps} Machine: {where}; "
        f"code: {revision()} (the 'Last run' block above has the machine in full).",
        "",
    ]


def command_line(script: str, argv: list[str] | None) -> str:
    return " ".join([".venv/bin/python", f"bench/{script}", *(argv if argv is not None else sys.argv[1:])])


def write_section(path: Path, script: str, title: str, block: str) -> None:
    """Replace the generated block of ``script`` in ``path``, keeping everything else (a new
    section goes at the end)."""
    begin, end = f"<!-- bench/{script}: begin -->", f"<!-- bench/{script}: end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else INTRO
    generated = f"{begin}\n{block.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + generated + rest.split(end, 1)[1]
    else:
        text = f"{text.rstrip()}\n\n{title}\n\n{generated}\n"
    path.write_text(text, encoding="utf-8")


# -- the command line ------------------------------------------------------------------------


def parser(doc: str, repeat: int, repeats: str = "repetitions") -> argparse.ArgumentParser:
    """A benchmark's command line with what every one has: its description (the first paragraph
    of ``doc``, the script's docstring), ``--repeat`` (``repeats``: what one is), ``--write`` and
    ``--json``; the script adds the sizes of its workloads."""
    made = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    made.add_argument("--repeat", type=int, default=repeat, help=f"{repeats} (default {repeat})")
    add_output_options(made)
    return made


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark has: ``--write`` into the markdown file, ``--json`` figures."""
    parser.add_argument("--write", type=Path, metavar="MD", help="write the figures into this markdown file")
    parser.add_argument(
        "--json",
        type=Path,
        default=os.environ.get("BENCH_JSON") or None,
        help="also write the figures as JSON (bench/run sets $BENCH_JSON)",
    )


def run(
    args: argparse.Namespace,
    argv: list[str] | None,
    script: str,
    title: str,
    prefix: str,
    bench: Callable[[argparse.Namespace, Path], dict[str, Any]],
    report: Callable[[dict[str, Any], argparse.Namespace, str], str],
    figures: Callable[[dict[str, Any], argparse.Namespace], list[Figure]],
) -> None:
    """Run ``bench`` in a temporary folder named ``prefix``..., print its report and write it
    where ``--json`` and ``--write`` say."""
    exit_on_sigterm()
    command = command_line(script, argv)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        result = bench(args, Path(tmp))
    block = report(result, args, command)
    print(block)
    write_json(args.json, script, figures(result, args))
    if args.write:
        write_section(args.write, script, title, block)
        print(f"\nwritten into {args.write}", file=sys.stderr)
