"""Dropping an object inside a lock, where a garbage collection or the release of its last
reference would run its finalizer: what the hang scripts of tests/test_dropped_runs.py and
tests/test_dropped_tails.py do, each in a process of its own (a finalizer that hangs holds that
lock, and the collector's, for good). Imported there after gevent's monkey-patching, if any."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

#: Where the scripts run, so that they import ``tests.dropping``.
ROOT = Path(__file__).parent.parent


def drop_inside(lock: Any, how: str, held: list[Any]) -> threading.Event:
    """In a thread (a greenlet under gevent), take ``lock`` and drop the one thing in ``held``,
    its only reference (taken out of the list): in a cycle that a collection made there frees
    (``how="collected"``; the caller has disabled the collector), or by letting go of its last
    reference there (``"released"``). The event is set once the thread left the lock."""
    dropping = [held.pop()]
    if how == "collected":
        dropping.append(dropping)  # a cycle: only a collection frees it now
        del dropping
        drop = gc.collect
    else:
        drop = dropping.clear
    dropped = threading.Event()

    def drop_in_the_lock() -> None:
        with lock:  # as a collection, or a release, inside a locked section would
            drop()
        dropped.set()

    threading.Thread(target=drop_in_the_lock, daemon=True).start()
    return dropped


def outcome_of(script: str, *args: str) -> dict[str, Any]:
    """Run a hang script in a process of its own, bounded (a hang is the failure it looks for),
    and read the outcome it printed as JSON; it must have exited cleanly."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
