"""bench/run's hold on the scripts it runs: one stopped over its time budget is stopped with every
process it started (bench/ is never run by the suite; this is its process handling alone)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from .waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 60.0

spec = importlib.util.spec_from_file_location("bench_harness", ROOT / "bench" / "harness.py")
harness = sys.modules["bench_harness"] = importlib.util.module_from_spec(spec)  # (its dataclasses look it up)
spec.loader.exec_module(harness)

# A benchmark as bench/run sees one: a real server of harness.Gunicorn, then nothing until stopped.
SERVING = """
import signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import harness
harness.exit_on_sigterm()
with harness.Gunicorn("server", "minimal_app:app", Path(sys.argv[2])) as server:
    Path(sys.argv[3]).write_text(" ".join(map(str, [server.proc.pid, *server.worker_pids()])))
    signal.pause()
"""

# A script that ignores SIGTERM, with a child of its own process group that ignores it too.
STUBBORN = """
import signal, subprocess, sys
from pathlib import Path
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", sys.argv[2]], process_group=0)
Path(sys.argv[1]).write_text(str(child.pid))
signal.pause()
"""
IGNORING = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.pause()"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has stopped; its parent (init) reaps it


def started(cmd: list[str], written: Path) -> tuple[subprocess.Popen, list[int]]:
    proc = harness.start_script(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = wait_for(lambda: written.exists() and written.read_text(), SECONDS, "pids written")
    except AssertionError:
        harness.stop_script(proc, grace=1.0)
        raise
    return proc, [int(pid) for pid in pids.split()]


def test_a_script_stopped_over_its_budget_stops_its_servers(tmp_path):
    written = tmp_path / "pids"
    cmd = [sys.executable, "-c", SERVING, str(ROOT / "bench"), str(tmp_path), str(written)]
    proc, pids = started(cmd, written)
    assert len(pids) == 2 and all(alive(pid) for pid in pids)

    harness.stop_script(proc)

    assert proc.returncode == 128 + 15, "the script did not exit through its SIGTERM handler"
    wait_for(lambda: not any(alive(pid) for pid in pids), SECONDS, "end of the gunicorn master and worker")
    assert "Shutting down" in (tmp_path / "server.log").read_text()  # stopped by the script, not killed


def test_what_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    written = tmp_path / "pid"
    proc, (child,) = started([sys.executable, "-c", STUBBORN, str(written), IGNORING], written)

    harness.stop_script(proc, grace=0.5)

    assert proc.returncode == -9
    wait_for(lambda: not alive(child), SECONDS, "end of the child in a group of its own")
