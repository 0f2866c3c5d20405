"""Following a run from the outside: replay of its log, then live frames, deduplicated.

A tail merges two sources: the store's log (the replay, then whatever the process-wide
:class:`~bread_sync.tails.follower.LogFollower` finds there for runs that execute in another
process) and the transport's live frames. Its :class:`~bread_sync.wire.replay.Dedup` keeps the
rule of the contract.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from typing import Any

from ..crumbs import STREAM_END, TERMINAL, Frame, is_delta_frame
from ..engine import Runtime, recovery
from ..errors import RUN_NOT_FOUND, BreadError
from ..greenlets import give_way
from ..stores import FINISHED, has_crumb_log
from ..transports import can_subscribe
from ..wire.replay import LIVE, LOG, Dedup, Gap
from .follower import ENDED, FromLog
from .inbox import BEHIND, Inbox

#: Rows a replay reads from the store at once.
REPLAY_PAGE = 500
#: Live frames a tail hands over at once at most (a replay hands over a page at a time): a
#: writer formats them together, then sends them.
BATCH = 256


class Behind(Exception):
    """How a tail with a bound (``backlog``) ends once its consumer fell that many frames
    behind: its client catches up from the log after its last seq, as after any reconnect."""


def tail(
    bread: Runtime,
    run_id: str,
    after: int = 0,
    *,
    heartbeat: float | None = None,
    through_pause: bool = True,
    replay: bool = True,
    batched: bool = False,
    backlog: int | None = None,
    connection: Any = None,
) -> Iterator[Any]:
    """Replay a run's log past ``after``, then follow it live until its terminal crumb (or,
    with ``through_pause=False``, its pause). Yields frames (and :class:`Gap`), and ``None``
    after ``heartbeat`` idle seconds. ``RUN_NOT_FOUND`` is raised before iteration, so a route
    can answer 404.

    ``replay=False`` follows only the transport, for the response of a run route, subscribed
    before the run's first crumb (an unknown run then ends at the follower's next safety-net
    look). ``batched=True`` yields lists of what is there at once (a replay page, or up to BATCH
    live frames), for a writer that formats them together.

    ``backlog``: the frames it may hold for its consumer (None: no bound). Past them it raises
    :class:`Behind` once the consumer has taken what it held; ``connection`` (a client's
    socket) is shut there and then, as a writer blocked on it would never take them."""
    if replay and bread.store.get_run(run_id) is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
    bread.follower.let_go()  # what tails dropped unclosed held, when the follower is not running
    inbox = Inbox(connection)
    subscription = None
    if can_subscribe(bread.transport):
        subscription = bread.transport.subscribe(run_id, after, inbox.put)
    if backlog is not None:
        inbox.bound(backlog)
    follow = _Follow(bread, run_id, after, inbox, subscription, heartbeat, through_pause, replay)
    return follow.frames(batched)


class _Follow:
    """One open tail: an iterator of lists (the replay's pages, then each take of the inbox),
    not a generator, so that a body calling its ``__next__`` (``stream_body``) waits in the
    body's own frame: an idle stream's greenlet then saves one C-level frame of the interpreter
    less with its stack on each switch (about 0.4 kB a stream), and holds no generator of it."""

    # One per open stream: slots, not a dict each.
    __slots__ = (
        "_check_gap",
        "_done",
        "_following",
        "_left",
        "_local",
        "_replaying",
        "_watch",
        "after",
        "bread",
        "dedup",
        "ends",
        "has_log",
        "heartbeat",
        "inbox",
        "run_id",
        "subscription",
    )

    def __init__(self, bread, run_id, after, inbox, subscription, heartbeat, through_pause, replay):
        self.bread, self.run_id, self.after = bread, run_id, after
        self.inbox, self.subscription, self.heartbeat = inbox, subscription, heartbeat
        self.ends = TERMINAL if through_pause else STREAM_END
        self.dedup = Dedup(after)
        self.has_log = has_crumb_log(bread.store)
        # Without a log, a tail past the run's start says so once if the transport no longer has it.
        self._check_gap = not self.has_log and after > 0
        self._replaying = self._replay() if replay and self.has_log else None
        self._local = not replay  # the tail of the response that started the run here
        self._following = self._done = False
        self._watch = None
        self._left: list[Any] | None = None  # what a take brought past a full list, for the next

    def frames(self, batched: bool) -> Iterator[Any]:
        return self if batched else _OneByOne(self)

    def __iter__(self) -> _Follow:
        return self

    def __next__(self) -> Sequence[Frame | Gap] | None:
        """The replay's next page, then what the next take of the inbox brings, deduplicated (at
        most BATCH), or None after ``heartbeat`` idle seconds."""
        if self._done:
            behind = self._done is BEHIND
            self.close()
            if behind:
                raise Behind(f"a stream of run {self.run_id} fell behind")
            raise StopIteration
        try:
            replaying = self._replaying
            if replaying is not None and (page := self._next_page(replaying)) is not None:
                return page
            return self._live()
        except BaseException:  # the tail's end (StopIteration), a failure, or its greenlet killed
            self.close()
            raise

    def close(self) -> None:
        """Unsubscribe and unwatch now, not when the tail is collected; nothing comes after."""
        subscription, watch = self._end()
        if subscription is not None:
            subscription.close()
        if watch is not None:
            self.bread.follower.unwatch(self.run_id, watch)

    def __del__(self) -> None:
        # A tail dropped unclosed: the follower lets go of its subscription and watch, as this
        # may run inside a locked section of the follower or the transport (LogFollower.drop).
        subscription, watch = self._end()
        if subscription is not None or watch is not None:
            self.bread.follower.drop(self.run_id, watch, subscription)

    def _end(self) -> tuple[Any, Any]:
        """End the tail: what it held to let go of, its subscription and its watch."""
        self._done = True
        self.inbox.forget_connection()
        replaying, self._replaying = self._replaying, None
        if replaying is not None:
            replaying.close()
        subscription, self.subscription = self.subscription, None
        watch, self._watch = self._watch, None
        return subscription, watch

    def _next_page(self, replaying: Generator[list[Frame], None, bool]) -> list[Frame] | None:
        """The replay's next page; None once it is over and the stream goes on live."""
        try:
            return next(replaying)
        except StopIteration as over:
            self._replaying = None
            if over.value:  # the stream ends with its replay
                raise StopIteration from None
            return None

    def _live(self) -> list[Frame | Gap] | None:
        """What the next take of the inbox brings (or what the last one left), as a list of at
        most BATCH; None when it brought nothing within ``heartbeat`` seconds."""
        if not self._following:
            self._follow_log()
        batch = self._left
        if batch is None:
            batch = self.inbox.take(self.heartbeat, BATCH)
            if not batch:
                return None
        else:
            self._left = None
        live_text = self.dedup.live_text
        out: list[Frame | Gap] = []
        items = iter(batch)
        for item in items:
            if len(out) >= BATCH:  # a take brings at most BATCH, but a hole filled from the log more
                self._left = [item, *items]
                return out
            if is_delta_frame(item):
                # Most items: a live delta, which neither ends a stream nor shows a hole.
                if live_text(item) is not None:
                    out.append(item)
            elif ended := self._add(item, out):
                self._done = ended  # the next call ends the tail (and closes it)
                self.inbox.forget_connection()  # what is left to write is the stream's last
                return out
        return out

    def _follow_log(self) -> None:
        """Also follow the run's log from here on, where there is one: also for a run of this
        process, as the transport may go down."""
        self._following = True
        if self.has_log:
            self._watch = self.bread.follower.watch(self.run_id, self.inbox, self.dedup.last, local=self._local)

    def _replay(self) -> Generator[list[Frame], None, bool]:
        """The log past ``after``, a page at a time; True when the stream ends with it. Its own
        generator, so that the pages it read are let go once it is over: an idle tail of a paused
        run holds none of its replay while it waits."""
        # Read the status before the log: a run finished by then has its terminal crumb in it.
        finished = not _unfinished(self.bread, self.run_id)
        for page in self._log_pages():
            out = [frame for frame in page if self.dedup.accept(frame, LOG) is not None]
            ends = next((i for i, frame in enumerate(out) if frame.type in self.ends), None)
            if ends is not None:
                yield out[: ends + 1]
                return True
            yield out
        # Nothing more will come, or a sink transport has nothing live to offer.
        return finished or self.subscription is None

    def _add(self, item: Any, out: list[Frame | Gap]) -> Any:
        """Add to ``out`` what an inbox item other than a live delta brings (a hole in the
        live frames is filled from the log first); True once the stream has ended, BEHIND once
        it fell behind, else False."""
        if item.__class__ is FromLog:
            source, frame = LOG, item.frame
            if frame is ENDED:
                return True
        elif item is BEHIND:
            return BEHIND  # the next call raises Behind (its connection, where cut, takes nothing more)
        else:
            source, frame = LIVE, item
        if source == LIVE and self._past_a_hole(frame):
            for missed in self._from_log(frame.seq):
                out.append(missed)
                if missed.type in self.ends:
                    return True
        accepted = self.dedup.accept(frame, source)
        if accepted is None:
            return False
        if self._check_gap and accepted.durable:
            self._check_gap = False
            if accepted.seq > self.after + 1:
                out.append(Gap(accepted.seq))
        out.append(accepted)
        return accepted.type in self.ends

    def _log_pages(self) -> Iterator[list[Frame]]:
        """The log past ``after``, a page at a time: a long catch-up neither loads every row
        before its first frame nor keeps the worker from other requests (each page is a short
        SQLite call, and between pages it gives way to other greenlets under gevent)."""
        after = self.after
        while page := self.bread.store.get_crumbs(self.run_id, after=after, limit=REPLAY_PAGE):
            yield page
            if len(page) < REPLAY_PAGE:
                return
            after = page[-1].seq
            give_way()

    def _past_a_hole(self, frame: Frame) -> bool:
        """A live durable frame that does not follow the last one delivered: the transport
        dropped frames (Redis was down, or trimmed them). The log fills the hole. Right after
        live segments the next durable seq skips one per segment, their aggregated log entries."""
        if not frame.durable or not self.has_log:
            return False
        return frame.seq - self.dedup.last > 1 + self.dedup.segments

    def _from_log(self, before: int) -> list[Frame]:
        last = self.dedup.last
        frames = self.bread.store.get_crumbs(self.run_id, after=last, limit=before - last - 1)
        return [accepted for f in frames if (accepted := self.dedup.accept(f, LOG)) is not None]


class _OneByOne:
    """A tail's frames one at a time. Not a generator: one dropped unfinished runs its
    ``finally`` wherever it is let go or collected, and a close there takes locks; dropped, this
    only lets go of its tail, whose finalizer takes none."""

    __slots__ = ("_follow", "_items")

    def __init__(self, follow: _Follow):
        self._follow = follow
        self._items: Iterator[Any] = iter(())

    def __iter__(self) -> _OneByOne:
        return self

    def __next__(self) -> Any:
        for item in self._items:  # the rest of the last list first
            return item
        while True:
            items = next(self._follow)  # StopIteration at the tail's end, which closed it
            if items is None:
                return None  # a heartbeat
            if items:
                self._items = iter(items)
                return next(self._items)

    def close(self) -> None:
        self._follow.close()


def _unfinished(bread: Runtime, run_id: str) -> bool:
    """Whether the run is still going; one whose owner is gone is recovered first (carried on
    here, or interrupted: the replay that follows then ends with its RUN_INTERRUPTED crumb)."""
    record = bread.store.get_run(run_id)
    if record is not None and record["status"] == "running" and recovery.orphaned(bread, record):
        recovery.recover(bread, record)
        record = bread.store.get_run(run_id)
    return record is not None and record["status"] not in FINISHED
