"""Keeps the runs this process executes alive in the store, and honours cancels recorded there.

One background thread per ``Bread`` (a greenlet under gevent), running only while the process
has live runs: it renews each run's owner lease, and at a short interval asks the store whether
another process recorded a cancel for one of them. When the transport has a cancel channel
(Redis), a cancel also travels on it, and the owner hears it at once; the store stays the
fallback when the channel is down.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..transports import cancel_channel
from . import Runtime

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
