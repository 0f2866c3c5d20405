"""The Huey executor (extra ``queue``): runs queued for ``bread-sync worker`` processes.

Huey carries only a run's id; the run record decides (engine/queued.py), so Huey's at-most-once
delivery loses nothing a sweep does not find again, and a message delivered twice is claimed
once. Huey's storage follows the store: an SQLite file beside the SQLite store, the Postgres
database of a Postgres store, or whatever ``BREAD_QUEUE_URL`` names (``redis://``,
``postgresql://``). The consumer runs greenlet workers: a run waits on its model and its store
most of the time, so one process drives many.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from huey import MemoryHuey, RedisHuey, crontab
from huey.api import Huey

from ..config import POSTGRES_SCHEMES
from ..engine.queued import drive_queued
from ..errors import QUEUE_UNAVAILABLE, BreadError
from ..schedules import last_tick
from .postgres_queue import LockedSchemaPostgresHuey
from .sqlite_queue import HandoutSqliteHuey

log = logging.getLogger("bread_sync")

#: The task's name (Huey prefixes its module): the same in the web tier and the workers.
TASK = "drive_run"
#: The periodic task's name: every minute, in every worker, it opens the schedules' runs due.
TICK = "schedules_tick"
#: Huey's consumer's pauses, first to longest: after a queue error (Redis, Postgres unreachable)
#: and between polls of the memory queue (an SQLite queue is polled by its handout instead).
CONSUMER_PAUSES = (0.05, 0.25)
#: How long a Redis queue may take to connect or answer before a run is refused (its reads block
#: for Huey's read timeout, 1 s, within it): an unreachable queue is an error, never a hang.
REDIS_TIMEOUT_SECONDS = 5.0
#: A process's connections to a Redis queue: a worker's greenlets hold one each in their blocking
#: read, a web tier's requests one each while they submit. Past it a call waits for one (within
#: the timeout) rather than failing at once, as a burst of 200 submissions did on redis-py's
#: default pool (100, then ``MaxConnectionsError``: runs refused, or queued and left for a sweep).
REDIS_POOL_SIZE = 128


class HueyExecutor:
    queues = True

    def __init__(self, huey: Huey):
        self.huey = huey
        #: The runtime that drives the tasks, in a worker process (:meth:`consumer`).
        self.runtime: Any = None
        #: The schedules' clock (tests set their own): what time a tick opens the runs of.
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._drive = huey.task(name=TASK)(self._run)
        self._tick_at = huey.periodic_task(crontab(), name=TICK)(self._tick)

    def submit(self, runtime: Any, run_id: str, delay: float = 0.0) -> None:
        with _queue_errors():
            if delay > 0:  # Huey's schedule: its consumers' scheduler enqueues it when due
                self._drive.schedule(args=(run_id,), delay=delay)
            else:
                self._drive(run_id)

    def ping(self) -> None:
        """``QUEUE_UNAVAILABLE`` unless the queue answers now (a Redis queue's PING; a queue in the
        store's own database is checked by the store's calls)."""
        conn = getattr(self.huey.storage, "conn", None)
        if isinstance(self.huey, RedisHuey) and conn is not None:
            with _queue_errors():
                conn.ping()

    def consumer(self, runtime: Any, workers: int, worker_type: str = "greenlet") -> Any:
        """A Huey consumer of ``workers`` greenlets (gevent must have patched the process
        first) driving this queue's runs with ``runtime``, which carries on the runs of dead
        workers from now on (recovery.py)."""
        self.runtime = runtime
        runtime.carries_on = True
        first, most = CONSUMER_PAUSES
        periodic = bool(runtime.config.schedules)  # Huey's tick, once a minute in each worker
        return self.huey.create_consumer(
            workers=workers, worker_type=worker_type, periodic=periodic, initial_delay=first, max_delay=most
        )

    def tick(self, now: datetime) -> list[str]:
        """Open the run of each schedule's last tick at or before ``now``, unless another worker
        did (schedules.py); the ids of the runs opened here."""
        opened = []
        for schedule in self.runtime.config.schedules:
            tick = last_tick(crontab(*schedule.fields), now)
            try:
                run_id = None if tick is None else self.runtime.run_scheduled(schedule, tick)
            except BreadError as exc:  # its agent gone, its session busy: the next tick tries again
                log.warning("schedule %r: its run at %s did not open (%s)", schedule.key, tick, exc.message)
                continue
            if run_id is not None:
                opened.append(run_id)
        return opened

    def enqueue_tick(self, at: datetime) -> None:
        """Have a worker tick the schedules as if it were ``at`` (each worker's Huey enqueues one
        tick a minute, timeless: now); a tick at a time already ticked opens nothing."""
        with _queue_errors():
            self._tick_at(at.isoformat())

    def _tick(self, at: str | None = None) -> None:
        # Huey's periodic tick gives no time: it is now. A message may name one (ISO-8601).
        self.tick(self.now() if at is None else datetime.fromisoformat(at))

    def _run(self, run_id: str) -> None:
        runtime = self.runtime
        if not runtime.carries_on:  # shutting down: back in the queue for another worker
            self.submit(runtime, run_id)
            return
        drive_queued(runtime, run_id)


def executor(path: str | Path | None = None, url: str | None = None, name: str = "bread") -> HueyExecutor:
    """A Huey executor on the SQLite file ``path``, or on the Redis or Postgres ``url``; with
    neither, in this process's memory (tests)."""
    return HueyExecutor(_huey(name, path, url))


@contextmanager
def _queue_errors() -> Iterator[None]:
    """The queue's failures as ``QUEUE_UNAVAILABLE``, the run's record untouched by them."""
    try:
        yield
    except Exception as exc:
        raise BreadError(QUEUE_UNAVAILABLE, "the run queue does not answer; retry later") from exc


def _huey(name: str, path: str | Path | None, url: str | None) -> Huey:
    options: dict[str, Any] = {"results": False, "utc": True}
    if url is not None and url.startswith(("redis://", "rediss://", "unix://")):
        from redis import BlockingConnectionPool

        seconds = REDIS_TIMEOUT_SECONDS
        timeouts = {"timeout": seconds, "socket_timeout": seconds, "socket_connect_timeout": seconds}
        pool = BlockingConnectionPool.from_url(url, max_connections=REDIS_POOL_SIZE, **timeouts)
        return RedisHuey(name, connection_pool=pool, **options)
    if url is not None and url.startswith(POSTGRES_SCHEMES):
        return LockedSchemaPostgresHuey(name, dsn=url, **options)
    if url is not None:
        raise ValueError(f"BREAD_QUEUE_URL must be a redis:// or postgresql:// URL, not {url!r}")
    if path is not None:
        return HandoutSqliteHuey(name, filename=str(path), **options)
    return MemoryHuey(name, **options)
