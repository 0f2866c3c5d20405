"""Keeps the runs this process executes alive in the store, and honours cancels recorded there.

One background thread per ``Bread`` (a greenlet under gevent), running only while the process
has live runs: it renews each run's owner lease, and at a short interval asks the store whether
another process recorded a cancel for one of them. When the transport has a cancel channel
(Redis), a cancel also travels on it, and the owner hears it at once; the store stays the
fallback when the channel is down.

It also holds the crumbs of every run handed out as a :class:`~bread_sync.runs.Run`, so that a
run its caller drops unfinished is closed by a pass of this keeper (or another let go), never by
the garbage collector: see :meth:`LeaseKeeper.drop`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator
from functools import partial
from inspect import GEN_CLOSED, getgeneratorstate
from typing import Any

from ..deferred import Deferred
from ..logs import RunLabels, run_context
from ..transports import cancel_channel
from . import Runtime
from .execution import close_driven

log = logging.getLogger("bread_sync")


def lease_end(config: Any) -> float:
    """When a lease taken or renewed now lapses."""
    return time.time() + config.lease_seconds


class LeaseKeeper:
    def __init__(self, bread: Runtime):
        self.bread = bread
        self._lock = threading.Lock()
        self._runs: set[str] = set()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._channel = cancel_channel(bread.transport)
        self._stop_hearing = self._channel.on_cancel(bread.cancels.cancel) if self._channel else None
        #: The crumbs of the runs handed out (see hold): what keeps them from the collector.
        self._held: set[Generator[Any, None, None]] = set()
        #: Runs dropped unfinished: closed at this keeper's next pass, or another let go.
        self._dropped = Deferred("closing run %s, dropped unfinished, failed")

    def announce_cancel(self, run_id: str) -> None:
        """Tell the process running ``run_id`` over the cancel channel, if there is one."""
        if self._channel is not None:
            self._channel.request_cancel(run_id)

    def watch(self, run_id: str) -> None:
        with self._lock:
            self._runs.add(run_id)
            if self._thread is None:
                self._wake.clear()
                self._thread = threading.Thread(target=self._loop, name="bread-lease", daemon=True)
                self._thread.start()

    def unwatch(self, run_id: str) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def hold(self, crumbs: Generator[Any, None, None]) -> None:
        """Keep a run's crumbs reachable until its caller closes the run or drops it: a run
        dropped in a reference cycle would otherwise be closed by the garbage collector, its
        clean-up (taking this keeper's lock, writing its abandon to the store) run wherever a
        collection happens, inside a locked section of this keeper or a use of the store too,
        on the thread or greenlet that holds it, which then waits for itself for good."""
        self._held.add(crumbs)

    def drop(self, labels: RunLabels, crumbs: Generator[Any, None, None]) -> None:
        """A run's caller let go of it, from its finalizer (which a collection may run inside a
        locked section): an unfinished run is kept to be closed later, as taking a lock or
        writing here could wait forever. A set's discard and a defer take none."""
        if getgeneratorstate(crumbs) == GEN_CLOSED:  # it ended: nothing is left to do
            self._held.discard(crumbs)
        else:
            self._dropped.defer(partial(self.close, labels, crumbs), labels.run_id)

    def close(self, labels: RunLabels, crumbs: Generator[Any, None, None]) -> None:
        """Close a held run's crumbs now (an unfinished run ends interrupted, one never started
        too), and let go of them."""
        try:
            with run_context(labels):  # its clean-up's log records name the run
                close_driven(labels.run_id, crumbs)
        finally:
            self._held.discard(crumbs)

    def let_go(self) -> None:
        """Close the runs dropped unfinished, where no lock is held: this keeper's passes and
        ``Bread.let_go``. A run dropped under way is still watched, so the passes go on; one
        never iterated was never watched, and waits for a pass some other run keeps going, or a
        let go."""
        self._dropped.let_go()

    def stop(self) -> None:
        with self._lock:
            self._runs.clear()
        self._wake.set()
        if self._stop_hearing is not None:
            self._stop_hearing()
            self._stop_hearing = None

    def _loop(self) -> None:
        config = self.bread.config
        renewed = time.monotonic()
        # A short lease is renewed at a third of it even when cancels are polled less often.
        tick = min(config.cancel_poll_seconds, config.lease_seconds / 3)
        while not self._wake.wait(tick):
            self.let_go()
            with self._lock:
                runs = list(self._runs)
                if not runs:
                    self._thread = None
                    return
            try:
                self._honour_cancels(runs)
                if time.monotonic() - renewed > config.lease_seconds / 3:
                    self._renew(runs)
                    renewed = time.monotonic()
            except Exception:
                log.exception("lease keeper: the store did not answer; retrying")
        with self._lock:
            self._thread = None

    def _honour_cancels(self, runs: list[str]) -> None:
        for run_id in self.bread.store.cancel_requested(self.bread.owner):
            if run_id in runs:
                self.bread.cancels.cancel(run_id)

    def _renew(self, runs: list[str]) -> None:
        until = lease_end(self.bread.config)
        for run_id in runs:
            self.bread.store.update_run(
                run_id, expect={"owner": self.bread.owner, "status": "running"}, leaseUntil=until
            )
