"""A server worker's life around its runs: sweeps while it is up, and a graceful stop.

gunicorn calls these from the hooks in gunicorn_conf.py, in the worker process. Runs are driven
off the request (runner.py), so gunicorn's graceful timeout does not wait for them: told to stop,
the worker starts no more runs, lets the live ones go on while most of the graceful time is left,
then stops each at its next step and hands it over (its record released, for another process to
carry on at once: engine/recovery.py); a run that cannot be carried on ends ``RUN_INTERRUPTED``.
A run still inside a tool call at the master's deadline is left as it is: once this process is
gone, another carries it on with that call's outcome unknown. Every ``sweep_seconds`` the worker
looks for runs whose owner is gone (or handed them over), to carry them on.
docs/reliability.md ("Graceful shutdown") tells the whole story.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import logs
from ..engine import recovery
from ..errors import RUN_INTERRUPTED, BreadError
from ..plugins import hooks
from ..runtime import Bread
from ..webhooks.runs import start_sender
from .runner import Runner

log = logging.getLogger("bread_sync.server")

#: How often the watcher looks whether the worker was told to stop.
WATCH_SECONDS = 0.1
#: At most this long, at the end of the graceful time, for runs to reach a step boundary.
INTERRUPT_SECONDS = 3.0
#: Left before the master's deadline, for marking what is left.
MARGIN_SECONDS = 1.0
#: A stop for another reason than SIGTERM (SIGINT, SIGQUIT, a crash) has this long.
QUICK_SECONDS = 1.5
SHUTTING_DOWN = BreadError(RUN_INTERRUPTED, "the server shut down before the run ended")


class Lifecycle:
    def __init__(self, bread: Bread, runner: Runner, graceful_timeout: float):
        self.bread = bread
        self.runner = runner
        self.graceful_timeout = graceful_timeout
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._stopping = False
        self._stop_sweeping = threading.Event()

    def sweep_later(self) -> None:
        """Sweep every ``sweep_seconds`` until the stop (with 0: once, a lease and a second
        after start-up, for the owners the start-up sweep could not judge). Each pass also lets
        go of what tails dropped unclosed held (tails/follower.py ``drop``): one dropped before
        it followed the log keeps nothing else coming to let go of its subscription, whose inbox
        would gather the run's frames until a tail opens. And it closes the runs dropped
        unfinished (engine/lease.py ``drop``): the lease keeper's passes do too, but the keeper
        stops once no run is watched, and a run whose end was logged is watched no more."""
        every = self.bread.config.sweep_seconds
        interval = every or self.bread.config.lease_seconds + 1.0
        threading.Thread(target=self._sweeping, args=(interval, not every), name="bread-sweep", daemon=True).start()

    def _sweeping(self, interval: float, once: bool) -> None:
        swept = False
        while not self._stop_sweeping.wait(interval):
            self.bread.let_go()
            if not (once and swept):
                self._sweep_now()
                swept = True

    def watch(self, alive: Callable[[], bool]) -> None:
        """Wait until ``alive()`` is False, then stop within the graceful time."""
        while alive():
            time.sleep(WATCH_SECONDS)
        self.stop(self.graceful_timeout - WATCH_SECONDS)

    def stop(self, seconds: float, drain: bool = True) -> None:
        """End this worker's runs within ``seconds``, as the module's doc says; without
        ``drain``, runs are interrupted at once rather than given most of the time to finish."""
        if not self._begin():
            self.done.wait(seconds)
            return
        try:
            deadline = time.monotonic() + seconds - min(MARGIN_SECONDS, seconds / 10)
            interrupt_at = deadline - min(INTERRUPT_SECONDS, seconds / 3) if drain else time.monotonic()
            self.runner.close()
            if not self._idle(interrupt_at):
                count = self.bread.cancels.cancel_all(SHUTTING_DOWN)
                log.warning("shutting down: handing %d runs over at their next step", count)
                self._idle(deadline)
            self.mark_the_rest()
        finally:
            self.done.set()

    def _idle(self, until: float) -> bool:
        """Wait until no run is live in this process (the runner's, and those it carries on)."""
        if not self.runner.wait_idle(until - time.monotonic()):
            return False
        while self.bread.cancels.live_run_ids():
            if time.monotonic() >= until:
                return False
            time.sleep(WATCH_SECONDS)
        return True

    def mark_the_rest(self) -> int:
        """Mark each run this process still owns and that cannot be carried on as interrupted
        (one that can is left for another process once this one is gone); how many."""
        marked = 0
        for record in self.bread.store.list_runs(status="running"):
            if record["owner"] != self.bread.owner or recovery.can_carry_on(self.bread, record):
                continue
            if self._interrupt(record):
                log.warning("shutting down: run %s did not reach a step boundary; marked interrupted", record["id"])
                marked += 1
        return marked

    def _interrupt(self, record: dict[str, Any]) -> bool:
        if self.bread.interrupt(record):
            return True
        fresh = self.bread.store.get_run(record["id"])  # its lease was renewed meanwhile
        return fresh is not None and fresh["owner"] == self.bread.owner and self.bread.interrupt(fresh)

    def _begin(self) -> bool:
        with self._lock:
            if self._stopping:
                return False
            self._stopping = True
        self._stop_sweeping.set()
        self.bread.carries_on = False
        return True

    def _sweep_now(self) -> None:
        try:
            swept = self.bread.sweep_interrupted()
        except BreadError as exc:  # the store busy or down a moment: the next sweep looks again
            log.warning("the sweep of runs whose owner is gone stopped: %s", exc.code)
            return
        except Exception:
            log.exception("the sweep of runs whose owner is gone failed")
            return
        if swept:
            log.warning("recovered %d runs whose owner was gone", swept)


# -- gunicorn's hooks, in the worker ------------------------------------------------------------


def started(worker: Any) -> Lifecycle | None:
    """After the app is loaded: configure logging, sweep later, watch for the stop."""
    logs.configure()
    for name in ("gunicorn.error", "gunicorn.access"):
        logs.reformat(logging.getLogger(name))
    current = getattr(worker.wsgi, "extensions", {}).get("bread_sync")
    if current is None:
        return None  # an app that does not mount bread_sync, or wraps the Flask app
    life = worker.bread_lifecycle = Lifecycle(current.bread, current.runner, worker.cfg.graceful_timeout)
    life.sweep_later()
    start_sender(current.bread, current.bread.config.server.allow_private_webhooks)  # the runs' webhooks
    for start in hooks(current.bread.config.plugins, "start"):  # what a plugin runs beside the requests
        start(current.bread)
    watcher = threading.Thread(target=life.watch, args=(lambda: worker.alive,), name="bread-shutdown", daemon=True)
    watcher.start()
    return life


def exiting(worker: Any) -> None:
    """The worker's last moment: wait for the stop, or stop quickly if it never began."""
    life: Lifecycle | None = getattr(worker, "bread_lifecycle", None)
    if life is not None:
        life.stop(QUICK_SECONDS, drain=False)
        life.done.wait(life.graceful_timeout)


def interrupted(worker: Any) -> None:
    """SIGINT or SIGQUIT: gunicorn exits right after, so interrupt the runs now."""
    life: Lifecycle | None = getattr(worker, "bread_lifecycle", None)
    if life is not None:
        life.stop(QUICK_SECONDS, drain=False)
