"""The type checker passes over the engine and the seams: a contract (Store, Transport, the
engine's Runtime, the wire's codecs) that the code stops keeping fails here, not in a user's
program.

mypy is pinned to a major version in the ``test`` extra; its settings are in pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The folders checked; what they import is read but not reported on.
CHECKED = ("engine", "stores", "transports", "tails", "wire", "tracing")


def test_mypy_passes_over_the_seams(tmp_path):
    folders = [str(ROOT / "bread_sync" / name) for name in CHECKED]
    # A cache of the test's own: a shared one could be another mypy's or another checkout's.
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy"), *folders]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
