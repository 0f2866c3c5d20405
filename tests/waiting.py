"""Waiting for what another thread or process does: polls with a deadline, never a bare sleep.

The suite's one way to wait, in process and against real servers alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], seconds: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), within ``seconds``."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()  # never set: its wait is the pause between polls
    for _ in range(int(seconds / interval) + 2):
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            break
        pause.wait(interval)
    raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")


def delivered(got: list[Any], count: int, seconds: float) -> list[Any]:
    """``got`` once ``count`` deliveries (of a transport's frames, say) have come into it; else
    a failure saying how many came (none, or all but the last, tell different stories)."""
    try:
        wait_for(lambda: len(got) >= count, seconds, f"{count} deliveries", interval=0.002)
    except AssertionError:
        raise AssertionError(f"{len(got)} of {count} delivered within {seconds:g} s") from None
    return got
