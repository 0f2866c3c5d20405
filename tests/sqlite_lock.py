"""A SQLite file locked by another process, for the store's busy tests in process
(test_store_busy.py) and against a real server (integration/test_faults.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    """
)


@contextmanager
def lock_held(path, seconds: float) -> Iterator[None]:
    """Another process holding ``BEGIN EXCLUSIVE`` on the SQLite file for ``seconds`` from now."""
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE,
                          text=True) as holder:  # fmt: skip
        assert holder.stdout.readline().strip() == "locked"
        yield
        assert holder.wait(seconds + 10) == 0
