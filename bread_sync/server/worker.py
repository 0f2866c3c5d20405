"""``bread-sync worker``: a Huey consumer driving the runs the web tier queued (executors/huey.py).

The process is gevent's, patched before anything else runs, with greenlet workers: a run waits on
its model and the store most of the time. Beside the consumer it does what a server worker does
around runs (lifecycle.py): it sweeps (runs whose owner is gone are carried on here, runs left
queued past a lease are submitted again), and told to stop (SIGTERM, SIGINT) it takes no more
runs and hands the unfinished ones over at their next step, for another worker to carry on.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

log = logging.getLogger("bread_sync.server")

#: How long a worker told to stop gives its runs to reach a step and be handed over.
STOP_SECONDS = 5.0
#: A worker sweeps at least every half lease, but not more often than this.
MIN_SWEEP_SECONDS = 0.1


def live_text_note(config: Any) -> str | None:
    """What ``start`` and ``worker`` say about the live channel between the workers and the web
    tier when runs are queued: Redis, the Postgres store's notifications, or none (then text
    reaches a stream only with the next durable crumb)."""
    from ..transports import carrier, reports_health

    if config.executor != "huey":
        return None
    transport = config.transport
    if transport is not None and not isinstance(transport, str) and reports_health(transport):
        channel = type(carrier(transport)).__module__.rsplit(".", 1)[-1]
        via = "the Postgres store's notifications (LISTEN/NOTIFY)" if channel == "postgres" else channel
        return f"note: runs are queued for workers (BREAD_EXECUTOR=huey); live crumbs reach the web tier through {via}"
    return (
        "note: runs are queued for workers (BREAD_EXECUTOR=huey) with no live channel to the web tier "
        "(REDIS_URL, or a Postgres store): a stream gets each text segment with the run's next durable crumb"
    )


def metrics_note(config: Any) -> str | None:
    """What ``worker`` says when its metrics are on but counted where no scrape reads them: a
    worker serves no ``/metrics``; its metrics reach the web tier's through the folder of
    prometheus_client's multiprocess mode, which the operator names for both."""
    if not config.server.metrics:
        return None
    from ..metrics.prometheus import multiprocess

    if multiprocess():
        return None
    return (
        "note: metrics are on (BREAD_METRICS=1) but PROMETHEUS_MULTIPROC_DIR is not set: this worker's "
        "metrics reach no /metrics; set it to one folder for the worker and the web tier on this host"
    )


def patch() -> None:
    """Make the process gevent's, before the config loads: what it builds (a Redis transport's
    connections and threads, psycopg's wait) must be gevent's too."""
    from gevent import monkey

    monkey.patch_all()


def work(config: Any, workers: int) -> None:
    """Drive queued runs with ``workers`` greenlets until told to stop (see the module's doc);
    :func:`patch` first."""
    from .. import logs
    from ..runtime import Bread
    from ..webhooks.runs import start_sender
    from .lifecycle import Lifecycle
    from .runner import Runner

    logs.configure()
    bread = Bread(_with_store_committing_in_the_loop(_sweeping_every_half_lease(config)))
    if not bread.executor.queues:
        bread.close()
        raise ValueError("bread-sync worker drives queued runs: set BREAD_EXECUTOR=huey (or Config.executor)")
    from huey.consumer import ConsumerStopped  # only now: an install without huey is told the line above

    for note in (live_text_note(config), metrics_note(config)):
        if note:
            print(note, file=sys.stderr)
    consumer = bread.executor.consumer(bread, workers)
    life = Lifecycle(bread, Runner(0, None, bread.cancels), STOP_SECONDS)
    bread.start()
    life.sweep_later()
    start_sender(bread, config.server.allow_private_webhooks)  # the runs' webhooks, from here too
    consumer.start()
    print(f"bread-sync worker: {workers} greenlets driving queued runs", file=sys.stderr, flush=True)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # instead of Huey's: the runs are handed over first
        signal.signal(signum, lambda signum, frame: stopping.set())
    try:
        while not stopping.is_set():
            consumer.loop()
    except ConsumerStopped:
        pass
    life.stop(STOP_SECONDS, drain=False)  # each run handed over at its next step
    consumer.stop(graceful=True)  # the greenlets' tasks return once their runs are handed over
    bread.close()
    _leave_metrics(bread)


def _with_store_committing_in_the_loop(config: Any) -> Any:
    """The config with its store opened, a default SQLite store committing a run's end in the
    driving greenlet, not handed to the store's thread of the OS: a worker's event loop is busy
    with runs, so that thread waited for the GIL between statements while holding the file's
    write lock, which the other workers' commits then waited for; and the hand-over cost CPU.
    Measured on the drain of 500 queued runs (bench/queued_runs.py): 1.1 ms of a worker's CPU a
    run instead of 1.3, two workers 1.56x to 1.66x one instead of 1.02x to 1.33x
    (docs/performance.md, "Queued runs")."""
    from ..config import make_store

    return config.model_copy(update={"store": make_store(config, writes_in_thread=False)})


def _leave_metrics(bread: Any) -> None:
    """This process's live gauges (runs active) leave the shared folder's sum, as a gunicorn
    master drops a dead worker's (prometheus_client's ``mark_process_dead``); its counters stay."""
    if bread.metrics is None:
        return
    from prometheus_client.multiprocess import mark_process_dead

    from ..metrics.prometheus import multiprocess

    if multiprocess():
        mark_process_dead(os.getpid())


def _sweeping_every_half_lease(config: Any) -> Any:
    """The config with sweeps at least every half lease: a worker's sweep is what carries on the
    runs of a dead worker, and submits again a run whose enqueue was lost."""
    half = max(config.lease_seconds / 2, MIN_SWEEP_SECONDS)
    if config.sweep_seconds and config.sweep_seconds <= half:
        return config
    return config.model_copy(update={"sweep_seconds": half})
