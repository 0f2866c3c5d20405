"""Runs started over HTTP are driven off the request: a client that goes away stalls nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import gevent

from .. import greenlets
from ..cancel import CancelRegistry, CancelToken
from ..errors import RUN_TIMEOUT, TOO_MANY_RUNS, BreadError

log = logging.getLogger("bread_sync.server")


class Runner:
    """Drives each run in a thread of its own (a greenlet under gevent), within a per-process
    cap on runs at once and an optional time limit per run."""

    def __init__(self, max_runs: int, timeout: float | None, live: CancelRegistry | None = None):
        self.max_runs = max_runs
        self.timeout = timeout
        #: The process's registry of live runs. A run handed to its thread is entered at once, so
        #: until that thread first runs, nothing (the log follower) takes it for a run elsewhere.
        self.live = live
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.active = 0
        self.closed = False

    def slot(self) -> Slot:
        """Reserve room for one run, or ``TOO_MANY_RUNS`` before anything starts."""
        with self._lock:
            if self.closed:
                raise BreadError(TOO_MANY_RUNS, "this process is shutting down; retry on another")
            if self.active >= self.max_runs:
                raise BreadError(TOO_MANY_RUNS, f"this process already runs {self.max_runs} runs; retry later")
            self.active += 1
        return Slot(self)

    def close(self) -> None:
        """Start no more runs: each later :meth:`slot` is ``TOO_MANY_RUNS``."""
        with self._lock:
            self.closed = True

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every run to end; True if they did."""
        with self._idle:
            return self._idle.wait_for(lambda: self.active == 0, max(timeout, 0.0))

    def _release(self) -> None:
        with self._lock:
            self.active -= 1
            self._idle.notify_all()


class Slot:
    """One reserved run: start it with :meth:`drive`, or leave the ``with`` block to give it back."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.token = CancelToken()
        self._handed_over = False
        #: The run's time limit counts from here: its opening (``before_run``, in the request) too.
        self._stop_timer = self._time_limit()

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._handed_over:
            self._give_back()

    def drive(self, run: Any) -> None:
        if run.attached:
            return  # another request's slot drives it
        self._handed_over = True
        if self.runner.live is not None:
            self.runner.live.register(run.run_id, self.token)
        try:
            if greenlets.patched():  # a patched threading.Thread costs ten times a spawn
                gevent.spawn(self._drive, run)
            else:
                threading.Thread(target=self._drive, args=(run,), name=f"bread-run-{run.run_id}", daemon=True).start()
        except BaseException:
            if self.runner.live is not None:
                self.runner.live.unregister(run.run_id, self.token)
            self._handed_over = False  # the slot goes back when its with block ends
            raise

    def _drive(self, run: Any) -> None:
        try:
            run.drain()
        except Exception:
            log.exception("run %s: its driver failed", run.run_id, extra={"run_id": run.run_id})
        finally:
            self._give_back()

    def _time_limit(self) -> Callable[[], None] | None:
        """Cancel the run with ``RUN_TIMEOUT`` once the runner's time limit passes; the undo."""
        timeout = self.runner.timeout
        if timeout is None:
            return None
        error = BreadError(RUN_TIMEOUT, f"the run took longer than {timeout:g} s")
        return greenlets.call_later(timeout, partial(self.token.cancel, error))

    def _give_back(self) -> None:
        if self._stop_timer is not None:
            self._stop_timer()
        self.runner._release()
