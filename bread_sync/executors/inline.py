"""The inline executor (the default, and the seam's reference): the process that opens a run
drives it. A queued run submitted here (a lost enqueue picked up by a sweep, a background run)
is driven in a thread of this process (a greenlet under gevent); one submitted with a delay (a
delayed run, or one waiting for its session or its agent's cap) in a timer's thread."""

from __future__ import annotations

import threading
from typing import Any

from ..engine.queued import drive_queued


class Inline:
    queues = False

    def submit(self, runtime: Any, run_id: str, delay: float = 0.0) -> None:
        driver = threading.Timer(delay, drive_queued, args=(runtime, run_id))
        driver.name, driver.daemon = f"bread-queued-{run_id}", True
        driver.start()


def executor(**opts: Any) -> Inline:
    return Inline(**opts)
