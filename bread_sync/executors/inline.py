"""The inline executor (the default, and the seam's reference): the process that opens a run
drives it. A queued run submitted here (a lost enqueue picked up by a sweep, a background run)
is driven in a thread of this process (a greenlet under gevent)."""

from __future__ import annotations

import threading
from typing import Any

from ..engine.queued import drive_queued


class Inline:
    queues = False

    def submit(self, runtime: Any, run_id: str) -> None:
        name = f"bread-queued-{run_id}"
        threading.Thread(target=drive_queued, args=(runtime, run_id), name=name, daemon=True).start()


def executor(**opts: Any) -> Inline:
    return Inline(**opts)
