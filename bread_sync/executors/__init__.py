"""The executor seam: where a run is driven once it is opened.

An executor module ``executors/<name>.py`` exports ``executor(**opts)``. ``inline`` (the
reference, and the default) drives a run in the process that opened it, as a request's worker
always did. ``huey`` (extra ``queue``) queues it: the request's process logs the run's opening
(its start crumb, or a resume's ``human:resumed``), writes the record ``queued`` and hands
Huey a task holding only the run id; a worker (``bread-sync worker``) claims the run by
compare-and-set and drives it (engine/queued.py). The run record stays the truth: a message
Huey loses or delivers twice changes nothing but who claims first.
"""

from __future__ import annotations

from typing import Any, Protocol

EXECUTORS = {
    "inline": "bread_sync.executors.inline",
    "huey": "bread_sync.executors.huey",
}


class Executor(Protocol):
    #: True: a run a caller opens is queued for a worker; False: the caller's process drives it.
    queues: bool

    def submit(self, runtime: Any, run_id: str, delay: float = 0.0) -> None:
        """Have the ``queued`` run ``run_id`` driven, ``delay`` seconds from now at the earliest:
        claimed (``queued`` to ``running``) by one process, then driven to its end or pause.
        Safe to call twice for one run."""


def check_queue(executor: Executor) -> None:
    """Raise ``QUEUE_UNAVAILABLE`` when the executor's queue does not answer (its optional
    ``ping``: an executor with no queue of its own apart from the store has none), so that a run
    is refused before it opens rather than left waiting on a queue that is down."""
    ping = getattr(executor, "ping", None)
    if ping is not None:
        ping()
