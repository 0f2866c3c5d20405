"""Start a run off the request and tail it: what every route that streams a run it starts does,
the bread routes and the protocol bridges alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..runtime import Run
from .guard import authorize_run
from .state import state


def start_run_stream(
    begin: Callable[[Any], Run], *, heartbeat: float | None = None
) -> tuple[Run, Iterator[list[Any] | None]]:
    """Start a run with ``begin(cancel_token)`` (e.g. ``lambda token: bread.run(..., signal=token)``)
    in a slot of this process's runner, and tail it from its first crumb to its end or pause.

    The tail is subscribed before the run's first crumb, and the run is driven in the
    background: a client that goes away stalls and cancels nothing. Yields lists of frames (as
    ``bread.tail(..., batched=True)``), and ``None`` after ``heartbeat`` idle seconds. A run of
    another request that ``begin`` attached to (a retry by run id) must pass the run-ownership
    hook. Raises :class:`~bread_sync.BreadError` when no run could start (``TOO_MANY_RUNS``, or
    whatever ``begin`` raises): nothing was created then."""
    with state().runner.slot() as slot:
        run = begin(slot.token)
        if run.attached:  # another request's run: its caller must own it
            authorize_run(run.run_id)
        # Subscribed before the run's first crumb; a continuation skips the run's past.
        after = 0 if run.attached else run.first_seq - 1
        frames = state().bread.tail(
            run.run_id, after, heartbeat=heartbeat, through_pause=False, replay=run.attached, batched=True
        )
        slot.drive(run)
    return run, frames
