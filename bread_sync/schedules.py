"""Schedules: recurring runs a config names, each tick an ordinary run with its own record.

A ``Schedule`` says which agent to run with which input, and when (a five-field cron, in UTC).
The ticks are Huey's (executors/huey.py): every ``bread-sync worker`` process runs Huey's periodic
tick, so each worker opens each tick's run. They agree on one without talking: a tick's run id is
made from the schedule's name and the tick's minute, and the store creates a run id once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: A tick taken later than this after its minute (workers down, the queue backed up) is skipped.
MOST_LATE = timedelta(hours=1)


@dataclass(frozen=True)
class Schedule:
    """Run ``agent_id`` with ``input`` at every minute ``cron`` names (``"*/5 * * * *"``: minute,
    hour, day of month, month, day of week; UTC), in a new session each time unless ``session``
    names one. ``name`` tells two schedules of one agent and cron apart (default:
    ``"<agent_id> <cron>"``); it keys the ticks, so renaming a schedule may run a tick twice."""

    agent_id: str
    input: Any = None
    cron: str = "* * * * *"
    session: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if len(self.cron.split()) != 5:
            raise ValueError(f"schedule {self.key!r}: cron must have five fields (minute hour day month weekday)")

    @property
    def key(self) -> str:
        return self.name or f"{self.agent_id} {self.cron}"

    @property
    def fields(self) -> list[str]:
        return self.cron.split()


def tick_run_id(schedule: Schedule, tick: datetime) -> str:
    """The run id of ``schedule``'s run at the minute ``tick``: the same in every process."""
    minute = tick.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%MZ")
    return "run_" + hashlib.sha256(f"{schedule.key}|{minute}".encode()).hexdigest()[:32]


def last_tick(matches: Any, now: datetime) -> datetime | None:
    """The latest minute at or before ``now`` that ``matches(minute)`` accepts (a cron's test),
    no more than :data:`MOST_LATE` ago; None when there is none."""
    minute = now.replace(second=0, microsecond=0)
    for _ in range(int(MOST_LATE / timedelta(minutes=1)) + 1):
        if matches(minute):
            return minute
        minute -= timedelta(minutes=1)
    return None
