"""A SQLite file locked by another process, for the store's busy tests in process
(test_store_busy.py) and against a real server (integration/test_faults.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager, suppress

#: Holds the lock until told on stdin, or for at most argv[2] seconds; then says which.
HOLDER = textwrap.dedent(
    """
    import select, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    told = bool(select.select([sys.stdin], [], [], float(sys.argv[2]))[0])
    conn.execute("COMMIT")
    print("told" if told else "timed out", flush=True)
    """
)


class HeldLock:
    def __init__(self, holder: subprocess.Popen):
        self._holder = holder

    def release(self) -> bool:
        """Let the lock go now; whether it was still held until this call (not let go meanwhile
        because its seconds ran out)."""
        with suppress(BrokenPipeError):  # the holder is gone already: its seconds ran out
            os.write(self._holder.stdin.fileno(), b"\n")  # unbuffered: nothing left to flush at close
        return self._holder.stdout.readline().strip() == "told"


@contextmanager
def lock_held(path, seconds: float) -> Iterator[HeldLock]:
    """Another process holding ``BEGIN EXCLUSIVE`` on the SQLite file for ``seconds`` from now,
    or until :meth:`HeldLock.release`."""
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:  # fmt: skip
        assert holder.stdout.readline().strip() == "locked"
        yield HeldLock(holder)
        assert holder.wait(seconds + 10) == 0
