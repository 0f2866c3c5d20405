"""One run at a time per session, across threads, workers and replicas sharing the store.

Two runs writing one session's history at once would interleave it. A run claims its session
in the store before it starts and lets go when it ends or pauses. A second run follows its
policy: ``reject`` (``SESSION_BUSY`` before it starts), ``enqueue`` (it waits for the claim)
or ``interrupt`` (it cancels the holder, then waits). A claim whose holder is no longer running
(paused, finished, or its owner died) is taken over.
"""

from __future__ import annotations

from collections.abc import Callable

from ..cancel import CancelToken
from ..errors import INVALID_REQUEST, SESSION_BUSY, BreadError
from . import Runtime, recovery

POLICIES = ("reject", "enqueue", "interrupt")
WAIT_POLL_SECONDS = 0.05


class SessionGuard:
    def __init__(self, bread: Runtime):
        self.bread = bread

    def claim(
        self, session_id: str, run_id: str, policy: str, may_interrupt: Callable[[str], bool] | None = None
    ) -> bool:
        """Claim at once (True), or apply the policy: reject raises, the others return False
        and the run :meth:`wait` s for the claim before its first crumb. ``interrupt`` cancels
        the holder only if ``may_interrupt(holder)`` (when given) says so: else ``SESSION_BUSY``."""
        if policy not in POLICIES:
            raise BreadError(INVALID_REQUEST, f"sessionPolicy must be one of {', '.join(POLICIES)}")
        holder = self._try(session_id, run_id)
        if holder is None:
            return True
        if policy == "interrupt" and may_interrupt is not None and not may_interrupt(holder):
            raise BreadError(SESSION_BUSY, f"session {session_id} is busy with a run this caller may not interrupt")
        if policy == "reject":
            raise BreadError(SESSION_BUSY, f"session {session_id} is busy with {_named(holder, may_interrupt)}")
        if policy == "interrupt":
            self.bread.cancel(holder)
        return False

    def wait(self, session_id: str, run_id: str, token: CancelToken) -> None:
        while self._try(session_id, run_id) is not None:
            if token.wait(WAIT_POLL_SECONDS):
                token.raise_if_cancelled()

    def take(self, session_id: str, run_id: str) -> bool:
        """Claim the session for ``run_id`` if it is free (or ``run_id``'s already); never waits."""
        return self._try(session_id, run_id) is None

    def release(self, session_id: str, run_id: str) -> None:
        self.bread.store.release_session(session_id, run_id)

    def _try(self, session_id: str, run_id: str) -> str | None:
        """None when ``run_id`` holds the session now; else the run that holds it."""
        store = self.bread.store
        holder = store.claim_session(session_id, run_id)
        if holder is None or not self._stale(holder):
            return holder
        return store.claim_session(session_id, run_id, take_from=holder)

    def _stale(self, holder: str) -> bool:
        record = self.bread.store.get_run(holder)
        if record is not None and record["status"] == "queued":
            return False  # it holds the session from its opening, for the worker that claims it
        if record is None or record["status"] != "running":
            return True
        if recovery.orphaned(self.bread, record):
            recovery.recover(self.bread, record)
            # Interrupted now, or else carried on (and then still holding it).
            fresh = self.bread.store.get_run(holder)
            return fresh is None or fresh["status"] != "running"
        return False


def _named(holder: str, may_reach: Callable[[str], bool] | None) -> str:
    """The run holding a session as a refusal names it: by its id only to a caller the
    run-ownership check lets reach it (another caller's run id is not this caller's to learn)."""
    return f"run {holder}" if may_reach is None or may_reach(holder) else "another run"
