"""Cancel tokens and the process-wide registry of live runs.

A token is a ``threading.Event`` underneath, so it is thread-safe and, once gevent has
monkey-patched ``threading``, cooperative. Only an explicit ``cancel()`` sets it: a dropped
connection never does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from . import greenlets
from .errors import RUN_CANCELLED, BreadError


class CancelToken:
    """A signal passed to ``bread.run(..., signal=token)``."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self._reason = BreadError(RUN_CANCELLED, "the run was cancelled")

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> BreadError:
        """What the run ends with once cancelled (``RUN_CANCELLED`` unless told otherwise)."""
        return self._reason

    def cancel(self, reason: BreadError | None = None) -> None:
        """Stop the run at its next step; it ends with ``reason`` (default ``RUN_CANCELLED``)."""
        with self._lock:
            if self._event.is_set():
                return
            if reason is not None:
                self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds; True as soon as the token is cancelled."""
        return greenlets.wait_event(self._event, timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once on cancel (at once if already cancelled); returns an undo."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise BreadError(self._reason.code, self._reason.message, self._reason.context)

    def _discard(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


class CancelRegistry:
    """Maps the ids of runs executing in this process to their tokens."""

    def __init__(self) -> None:
        # Taken a few times a run and by the log follower's passes; nothing blocks under it.
        self._lock = greenlets.os_rlock()
        self._tokens: dict[str, CancelToken] = {}

    def register(self, run_id: str, token: CancelToken) -> None:
        with self._lock:
            self._tokens[run_id] = token

    def unregister(self, run_id: str, token: CancelToken) -> None:
        with self._lock:
            if self._tokens.get(run_id) is token:
                del self._tokens[run_id]

    def cancel(self, run_id: str) -> bool:
        """Cancel a live run of this process; False when it runs nowhere here."""
        with self._lock:
            token = self._tokens.get(run_id)
        if token is None:
            return False
        token.cancel()
        return True

    def cancel_all(self, reason: BreadError) -> int:
        """Stop every live run of this process at its next step with ``reason``; how many."""
        with self._lock:
            tokens = list(self._tokens.values())
        for token in tokens:
            token.cancel(reason)
        return len(tokens)

    def live_run_ids(self) -> list[str]:
        with self._lock:
            return list(self._tokens)

    def __contains__(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._tokens


#: The registry every ``Bread`` of this process shares.
registry = CancelRegistry()
