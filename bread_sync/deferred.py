"""Clean-up asked for where it cannot run, run later where it can: a finalizer queues it, a let go
runs it.

A finalizer (``__del__``) runs wherever a garbage collection, or the release of a last reference,
happens: inside any locked section of the thread or greenlet that is there (a lock of ours, of a
transport, a store's pooled connection). A clean-up that takes a lock or writes there may wait for
itself for good. :meth:`Deferred.defer` takes none: a deque's append is atomic and switches no
greenlet. :meth:`Deferred.let_go` runs what was deferred, called only where no lock is held.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

log = logging.getLogger("bread_sync")


class Deferred:
    """Pieces of clean-up, each run once, in the order deferred, by the next :meth:`let_go`.

    ``failed`` is what the log says when a piece raises, ``%s`` standing for what the piece is
    about (e.g. its run's id): one failure stops neither the other pieces nor the let go's caller.
    """

    __slots__ = ("_failed", "_pieces")

    def __init__(self, failed: str):
        self._failed = failed
        self._pieces: deque[tuple[Callable[[], object], object]] = deque()

    def defer(self, piece: Callable[[], object], about: object) -> None:
        """Queue ``piece`` for the next let go; safe from a finalizer (it takes no lock)."""
        self._pieces.append((piece, about))

    def let_go(self) -> None:
        """Run the pieces deferred until now, and those deferred meanwhile, each once."""
        pieces = self._pieces
        while pieces:  # usually empty: a caller on a hot path (a run's start) pays one look
            try:
                piece, about = pieces.popleft()
            except IndexError:  # another thread, letting go too, took the last one since the look
                return
            try:
                piece()
            except Exception:
                log.exception(self._failed, about)
