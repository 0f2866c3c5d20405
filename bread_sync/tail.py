"""Following a run from the outside: replay of its log, then live frames, deduplicated.

A tail merges two sources: the store's log (the replay, then whatever a process-wide follower
finds there for runs that execute in another process) and the transport's live frames. Its
:class:`Dedup` keeps the rule of the contract: no durable crumb lost, none twice, and a text
segment that arrives both live and aggregated is shown once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .crumbs import STREAM_END, TERMINAL, TEXT_DELTA, Frame, is_delta_frame
from .errors import RUN_NOT_FOUND, BreadError
from .greenlets import give_way
from .inbox import Inbox
from .stores import FINISHED, has_crumb_log, last_seqs
from .transports import can_subscribe, is_healthy, reports_health

if TYPE_CHECKING:
    from .runtime import Bread

LIVE, LOG = "live", "log"
#: What the follower sends a tail whose run ended with nothing more after the tail's position.
ENDED = object()


class FromLog(NamedTuple):
    """An inbox item the log follower read from the store (a Frame, or ENDED). The transport's
    live frames go into the inbox as they are: nothing is wrapped per live crumb."""

    frame: Any


#: Rows a replay reads from the store at once.
REPLAY_PAGE = 500
#: Live frames a tail hands over at once at most (a replay hands over a page at a time): a
#: writer formats them together, then sends them.
BATCH = 256
#: While a transport shared between processes (Redis) is healthy it carries the frames of runs
#: executing elsewhere: the store is read for them only this often, as a safety net.
SAFETY_NET_SECONDS = 2.0


class Dedup:
    """Decides which frames of a run a tail delivers, given where it starts.

    ``last`` is the last log position delivered. Durable frames (and aggregated log deltas)
    pass only past it; live deltas only at it, and their text is remembered, so when the log's
    aggregated entry for that segment arrives only the part not yet shown is delivered.
    """

    def __init__(self, after: int):
        self.last = after
        self._segment: list[str] = []  # parts, joined only when the log's aggregate arrives

    @property
    def in_segment(self) -> bool:
        """Live text was delivered since the last durable frame."""
        return bool(self._segment)

    def accept(self, frame: Frame, source: str) -> Frame | None:
        if frame.type == TEXT_DELTA:
            return self._log_text(frame) if source == LOG else self.live_text(frame)
        if frame.seq <= self.last:
            return None
        self.last, self._segment = frame.seq, []
        return frame

    def live_text(self, frame: Frame) -> Frame | None:
        """``accept`` of a live delta."""
        if frame.seq < self.last:
            return None  # its segment was already delivered from the log
        self._segment.append(frame.crumb["delta"])
        return frame

    def _log_text(self, frame: Frame) -> Frame | None:
        if frame.seq <= self.last:
            return None
        text, shown = frame.crumb["delta"], "".join(self._segment)
        self.last, self._segment = frame.seq, []
        if shown and text.startswith(shown):
            rest = text[len(shown) :]
            return Frame(frame.run_id, frame.seq, {**frame.crumb, "delta": rest}) if rest else None
        return frame


class _Watch(NamedTuple):
    inbox: Inbox
    position: list[int]  # the last seq the follower gave this tail
    local: bool  # the tail of the response that started the run here


class LogFollower:
    """One thread per ``Bread`` that reads the store for tails of runs executing elsewhere.

    Without a shared transport, the store is the only way a crumb written by another process
    reaches this one. With one (Redis), while it is healthy, those runs are read every
    SAFETY_NET_SECONDS only, for a writer that could not reach it. Runs executing in this
    process are left to the transport while it is healthy, and so are runs whose only tails are
    the responses that started them here (``local``) but for the safety net (another process may
    have taken one over). While the transport is unhealthy, and once more after it recovers,
    every run is read every ``interval``, so a tail misses nothing it dropped.
    """

    def __init__(self, bread: Bread, interval: float = 0.25):
        self.bread = bread
        self.interval = interval
        self._lock = threading.Lock()
        self._watching: dict[str, list[_Watch]] = {}
        self._thread: threading.Thread | None = None
        self._degraded = False

    def watch(self, run_id: str, inbox: Inbox, after: int, local: bool = False) -> Any:
        entry = _Watch(inbox, [after], local)
        with self._lock:
            self._watching.setdefault(run_id, []).append(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="bread-follower", daemon=True)
                self._thread.start()
        return entry

    def unwatch(self, run_id: str, entry: Any) -> None:
        with self._lock:
            entries = self._watching.get(run_id, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self._watching.pop(run_id, None)

    def _loop(self) -> None:
        since_net = 0.0
        while True:
            time.sleep(self.interval)
            with self._lock:
                if not self._watching:
                    self._thread = None
                    return
                watched = {run_id: list(entries) for run_id, entries in self._watching.items()}
            degraded = not is_healthy(self.bread.transport)
            everything, self._degraded = degraded or self._degraded, degraded
            since_net += self.interval
            net = since_net >= SAFETY_NET_SECONDS
            if net:
                since_net = 0.0
            shared = reports_health(self.bread.transport)
            due = [
                run_id for run_id, entries in watched.items() if everything or self._due(run_id, entries, shared, net)
            ]
            if due:
                self._pass(due, watched, look_at_records=everything or net)

    def _pass(self, due: list[str], watched: dict[str, list[_Watch]], look_at_records: bool) -> None:
        """One read of the last seqs of every due run; their logs only where something is new.
        Their records (a lapsed lease, an end with nothing new to show) only now and then: an
        idle tail costs an index seek a pass, not two queries."""
        last = last_seqs(self.bread.store, due)
        for run_id in due:
            entries = watched[run_id]
            if last.get(run_id, 0) > min(entry.position[0] for entry in entries):
                self._poll(run_id, entries)
            elif look_at_records and self._finished(run_id):  # e.g. a tail that started at the terminal crumb
                for entry in entries:
                    entry.inbox.put(FromLog(ENDED))

    def _due(self, run_id: str, entries: list[_Watch], shared: bool, net: bool) -> bool:
        if run_id in self.bread.cancels:
            return False  # executing here: the transport carries it
        if net:
            return True
        return not shared and not all(entry.local for entry in entries)

    def _poll(self, run_id: str, entries: list[_Watch]) -> None:
        after = min(entry.position[0] for entry in entries)
        frames = self.bread.store.get_crumbs(run_id, after=after)
        if not frames:
            return
        for entry in entries:
            for frame in frames:
                if frame.seq > entry.position[0]:
                    entry.inbox.put(FromLog(frame))
            entry.position[0] = frames[-1].seq

    def _finished(self, run_id: str) -> bool:
        """Whether the run has ended; a run whose owner is gone is interrupted first."""
        record = self.bread.store.get_run(run_id)
        if record and record["status"] == "running" and self.bread.owner_gone(record):
            self.bread.interrupt(record)
            return False  # its RUN_INTERRUPTED crumb reaches the tail with the next poll
        return record is None or record["status"] in FINISHED


@dataclass(frozen=True)
class Gap:
    """The tail cannot serve what lies between its start and ``earliest_seq``: the store keeps
    no log and the transport no longer retains it. Said once, never skipped silently."""

    earliest_seq: int


def tail(
    bread: Bread,
    run_id: str,
    after: int = 0,
    *,
    heartbeat: float | None = None,
    through_pause: bool = True,
    replay: bool = True,
    batched: bool = False,
) -> Iterator[Any]:
    """Replay a run's log past ``after``, then follow it live until its terminal crumb (or,
    with ``through_pause=False``, its pause). Yields frames (and :class:`Gap`), and ``None``
    after ``heartbeat`` idle seconds.

    ``replay=False`` follows only the transport: what the response of a run route does, having
    subscribed before the run's first crumb (the log follower then leaves the run to the
    transport but for its safety net). ``batched=True`` yields lists of what is there at once (a
    replay page; what the run published meanwhile, up to BATCH frames) instead of one frame at a
    time, for a writer that formats them together. ``RUN_NOT_FOUND`` is raised here, before
    iteration, so a route can answer 404; not with ``replay=False``, whose caller holds the run
    it just started (an unknown one ends at the follower's next safety-net look, SAFETY_NET_SECONDS,
    when the store keeps a crumb log; with none, only when the caller stops).
    """
    if replay and bread.store.get_run(run_id) is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
    inbox = Inbox()
    subscription = None
    if can_subscribe(bread.transport):
        subscription = bread.transport.subscribe(run_id, after, inbox.put)
    follow = _Follow(bread, run_id, after, inbox, subscription, heartbeat, through_pause)
    return follow.frames(replay and has_crumb_log(bread.store), batched)


class _Follow:
    def __init__(self, bread, run_id, after, inbox, subscription, heartbeat, through_pause):
        self.bread, self.run_id, self.after = bread, run_id, after
        self.inbox, self.subscription, self.heartbeat = inbox, subscription, heartbeat
        self.ends = TERMINAL if through_pause else STREAM_END
        self.dedup = Dedup(after)
        self.has_log = has_crumb_log(bread.store)
        # Without a log, a tail past the run's start says so once if the transport no longer has it.
        self._check_gap = not self.has_log and after > 0

    def frames(self, replay: bool, batched: bool) -> Iterator[Any]:
        lists = self._lists(replay)
        try:
            for items in lists:
                if batched or items is None:
                    yield items
                else:
                    yield from items
        finally:
            lists.close()  # unsubscribes and unwatches now, not when the generator is collected

    def _lists(self, replay: bool) -> Iterator[list[Frame | Gap] | None]:
        watch = None
        try:
            if replay:
                # Read the status before the log: a run finished by then has its terminal crumb in it.
                finished = not _unfinished(self.bread, self.run_id)
                for page in self._log_pages():
                    out = [frame for frame in page if self.dedup.accept(frame, LOG) is not None]
                    ends = next((i for i, frame in enumerate(out) if frame.type in self.ends), None)
                    if ends is not None:
                        yield out[: ends + 1]
                        return
                    yield out
                if finished or self.subscription is None:
                    return  # nothing more will come, or a sink transport has nothing live to offer
            if self.has_log:  # also for a run of this process: the transport may go down
                watch = self.bread.follower.watch(self.run_id, self.inbox, self.dedup.last, local=not replay)
            yield from self._live()
        finally:
            if self.subscription is not None:
                self.subscription.close()
            if watch is not None:
                self.bread.follower.unwatch(self.run_id, watch)

    def _live(self) -> Iterator[list[Frame | Gap] | None]:
        """What each take of the inbox brings, deduplicated, as lists of at most BATCH."""
        live_text = self.dedup.live_text
        while True:
            batch = self.inbox.take(self.heartbeat, BATCH)
            if not batch:
                yield None
                continue
            out: list[Frame | Gap] = []
            for item in batch:
                if len(out) >= BATCH:  # a take brings at most BATCH, but a hole filled from the log more
                    yield out
                    out = []
                if is_delta_frame(item):
                    # Most items: a live delta, which neither ends a stream nor shows a hole.
                    if live_text(item) is not None:
                        out.append(item)
                elif self._add(item, out):
                    yield out
                    return
            yield out

    def _add(self, item: Any, out: list[Frame | Gap]) -> bool:
        """Add to ``out`` what an inbox item other than a live delta brings (a hole in the
        live frames is filled from the log first); True once the stream has ended."""
        if item.__class__ is FromLog:
            source, frame = LOG, item.frame
            if frame is ENDED:
                return True
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
        a text segment the next durable seq skips one, the segment's aggregated log entry."""
        if not frame.durable or not self.has_log:
            return False
        hole = frame.seq - self.dedup.last
        return hole > 2 or (hole == 2 and not self.dedup.in_segment)

    def _from_log(self, before: int) -> list[Frame]:
        last = self.dedup.last
        frames = self.bread.store.get_crumbs(self.run_id, after=last, limit=before - last - 1)
        return [accepted for f in frames if (accepted := self.dedup.accept(f, LOG)) is not None]


def _unfinished(bread: Bread, run_id: str) -> bool:
    """Whether the run is still going; one whose owner is gone is interrupted first, so the
    replay that follows ends with its RUN_INTERRUPTED crumb."""
    record = bread.store.get_run(run_id)
    if record is None:
        return False
    if record["status"] == "running" and bread.owner_gone(record) and bread.interrupt(record):
        return False
    return record["status"] not in FINISHED
