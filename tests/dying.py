"""A process that stops dead (or whose store refuses) as it writes a run's terminal crumb: what
the tests of ends written after a claim (recovery, cancels, queued runs, abandons) make happen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bread_sync.crumbs import TERMINAL


class Died(BaseException):
    """The process stopping dead at one statement (what a SIGKILL leaves of a call)."""


def failing_at_the_end(store: Any, monkeypatch: Any, failure: Callable[[], BaseException] = Died) -> None:
    """Make ``store`` fail each write of a terminal crumb with ``failure()`` (other crumbs are
    written); ``monkeypatch.undo()`` puts it back."""
    append_crumbs = store.append_crumbs

    def failing(run_id: str, frames: list[Any]) -> None:
        if any(frame.type in TERMINAL for frame in frames):
            raise failure()
        append_crumbs(run_id, frames)

    monkeypatch.setattr(store, "append_crumbs", failing)
