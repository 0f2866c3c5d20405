"""What a run call hands out: a :class:`Run` to iterate, or with ``mode="sync"`` its :class:`RunResult`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import crumbs as c
from .engine.execution import drain
from .errors import RUN_CANCELLED, BreadError, internal_error
from .logs import BoundRun, RunLabels, run_context

if TYPE_CHECKING:
    from .engine.lease import LeaseKeeper

log = logging.getLogger("bread_sync")
#: Bound once: :meth:`_Held.__next__` looks at every crumb's type.
_STREAM_END = c.STREAM_END


@dataclass
class RunResult:
    """What ``mode="sync"`` returns. ``status`` is ``completed``, ``paused``, ``failed`` or
    ``cancelled``; a paused run carries its ``checkpoint`` (``checkpointId``, ``kind``,
    ``toolName``, ``toolCallId``, ``input``)."""

    run_id: str
    status: str
    output: Any = None
    error: BreadError | None = None
    checkpoint: dict[str, Any] | None = None
    crumbs: list[dict[str, Any]] = field(default_factory=list, repr=False)


class Run:
    """A started run: iterate it for its crumbs. ``run_id`` is fixed before the first crumb.
    Its last crumb (its end or pause) is handed out with the run's clean-up done (its span
    ended, its metrics counted): a caller may stop there. A paused run stays paused, resumable.
    :meth:`close` one left unfinished, or never iterated: it ends ``RUN_INTERRUPTED`` at once.
    One dropped unclosed (this and its iterator) ends so too, a little later (see :class:`_Held`)."""

    def __init__(
        self,
        run_id: str,
        crumbs: Generator[dict[str, Any], None, None],
        attached: bool = False,
        first_seq: int = 1,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        trace: Any = None,
        rest: Callable[[int], Iterator[dict[str, Any]]] | None = None,
        ready: bool = False,
        keeper: LeaseKeeper | None = None,
    ):
        self.run_id = run_id
        #: True when this follows a run another request started (same ``run_id``).
        self.attached = attached
        #: The seq of this stream's first durable crumb: 1, or where a resumed run continues.
        self.first_seq = first_seq
        self._steps = crumbs
        self._labels = RunLabels(run_id, session_id, agent_id, trace)
        #: True when a worker drives the run (executors/): its crumbs here end with its opening,
        #: and ``rest(after)`` follows the rest from the log.
        self.queued = rest is not None
        #: Whether its first crumb comes without a wait for another run: see :meth:`open`.
        self.ready = ready
        seen = crumbs if rest is None else _ThenFollow(crumbs, rest, first_seq)
        # Its log records carry its labels; its driver's crumbs, what a keeper holds.
        self._crumbs = BoundRun(self._labels, seen) if keeper is None else _Held(self._labels, seen, crumbs, keeper)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._crumbs

    def __next__(self) -> dict[str, Any]:
        return next(self._crumbs)

    def close(self) -> None:
        self._crumbs.close()

    def open(self) -> None:
        """Drive a run that is :attr:`ready` to its first crumb here, logged and published (a
        caller subscribed to it gets it at once), and leave the rest to :meth:`drain`: the
        server's start answers without handing the run to its driver's thread and back first."""
        if self.ready:
            with run_context(self._labels):
                next(self._steps, None)

    def drain(self) -> None:
        """Drive the run to its end or pause, for a caller that only needs it to happen (the
        server's runner: its clients read the crumbs from the transport)."""
        drain(self._labels, self._steps)

    def result(self) -> RunResult:
        """Drive the run to its end or pause and sum it up."""
        seen = list(self._crumbs)
        return summarize(self.run_id, seen)


class _Held(BoundRun):
    """A run's crumbs as its caller iterates them (a ``for`` loop holds this, not the
    :class:`Run`), whose driver's crumbs ``driven`` its lease keeper holds: dropped unfinished,
    the run is left to the keeper to close where no lock is held, as a garbage collection may run
    this finalizer inside one (:meth:`~bread_sync.engine.lease.LeaseKeeper.drop`)."""

    def __init__(
        self, labels: RunLabels, crumbs: Iterator[Any], driven: Generator[Any, None, None], keeper: LeaseKeeper
    ):
        super().__init__(labels, crumbs)
        self._driven = driven
        self._keeper = keeper
        keeper.hold(driven)

    def __next__(self) -> dict[str, Any]:
        crumb = BoundRun.__next__(self)  # not super()'s lookup: this is per crumb
        if crumb["type"] in _STREAM_END:  # its last: a caller may stop here, never asking for more
            try:
                self.close()  # so what follows it (its span's end, its metrics) is done now
            except Exception:  # the crumb is the caller's all the same (a pause's checkpoint id)
                log.exception("run %s: its clean-up after its last crumb failed", self.labels.run_id)
        return crumb

    def close(self) -> None:
        # The driver's crumbs by the keeper first: closed through the iterator (the same
        # generator, unless queued), one never started would only be marked closed, its run
        # left running (see close_driven).
        try:
            self._keeper.close(self.labels, self._driven)
        finally:  # even when the driver's clean-up failed: else a queued run's follower goes on
            super().close()  # a queued run's follower of the rest

    def __del__(self) -> None:
        self._keeper.drop(self.labels, self._driven)


class _ThenFollow:
    """A queued run's crumbs: its opening, driven here, then the rest, followed from the log
    after it (``rest(after)``, a tail), to the run's end or pause (a worker drives them).

    Not a generator: its :meth:`close` (the caller's, or :class:`_Held`'s at the run's last
    crumb) closes the tail now, while one dropped only lets go of the tail, whose finalizer
    takes no lock; a generator's close, run by its finalizer, would close the tail there."""

    __slots__ = ("_after", "_last", "_opening", "_rest", "_tail")

    def __init__(
        self, opening: Iterator[dict[str, Any]], rest: Callable[[int], Iterator[dict[str, Any]]], first_seq: int
    ):
        self._opening = opening
        self._rest = rest
        self._after = first_seq - 1
        self._last: str | None = None
        self._tail: Iterator[dict[str, Any]] | None = None

    def __iter__(self) -> _ThenFollow:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._tail is None:
            crumb = next(self._opening, None)
            if crumb is not None:
                self._last = crumb["type"]
                self._after += self._last not in c.NOT_DURABLE
                return crumb
            # An opening that ended the run (or paused it) has no rest to follow.
            self._tail = iter(()) if self._last in c.STREAM_END else self._rest(self._after)
        return next(self._tail)

    def close(self) -> None:
        """Nothing more comes; the tail, if open, is closed now."""
        tail, self._tail = self._tail, iter(())
        close_tail(tail)


def close_tail(tail: Iterator[Any] | None) -> None:
    """Close a run's tail now, if one was opened (an iterator that has no ``close`` holds nothing)."""
    close = getattr(tail, "close", None)
    if close is not None:
        close()


def summarize(run_id: str, seen: list[dict[str, Any]]) -> RunResult:
    last = seen[-1] if seen else None
    if last is None:
        return RunResult(run_id, "failed", error=internal_error(RuntimeError("no crumbs")), crumbs=seen)
    if last["type"] == c.AGENT_RUN_END:
        return RunResult(run_id, "completed", output=last["output"], crumbs=seen)
    if last["type"] == c.HUMAN_REQUIRED:
        keys = ("checkpointId", "kind", "toolName", "toolCallId", "input")
        return RunResult(run_id, "paused", checkpoint={k: last[k] for k in keys}, crumbs=seen)
    error = last.get("error")
    error = error if isinstance(error, BreadError) else BreadError.from_wire(error or {})
    status = "cancelled" if error.code == RUN_CANCELLED else "failed"
    return RunResult(run_id, status, error=error, crumbs=seen)
