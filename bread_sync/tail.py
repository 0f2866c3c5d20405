"""Following a run from the outside: replay of its log, then live frames, deduplicated.

A tail merges two sources: the store's log (the replay, then whatever a process-wide follower
finds there for runs that execute in another process) and the transport's live frames. Its
:class:`Dedup` keeps the rule of the contract: no durable crumb lost, none twice, and a text
segment that arrives both live and aggregated is shown once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .crumbs import STREAM_END, TERMINAL, TEXT_DELTA, Frame
from .errors import RUN_NOT_FOUND, BreadError
from .stores import FINISHED, has_crumb_log
from .transports import can_subscribe

if TYPE_CHECKING:
    from .runtime import Bread

LIVE, LOG = "live", "log"


class Dedup:
    """Decides which frames of a run a tail delivers, given where it starts.

    ``last`` is the last log position delivered. Durable frames (and aggregated log deltas)
    pass only past it; live deltas only at it, and their text is remembered, so when the log's
    aggregated entry for that segment arrives only the part not yet shown is delivered.
    """

    def __init__(self, after: int):
        self.last = after
        self._segment = ""

    def accept(self, frame: Frame, source: str) -> Frame | None:
        if frame.type == TEXT_DELTA:
            return self._log_text(frame) if source == LOG else self._live_text(frame)
        if frame.seq <= self.last:
            return None
        self.last, self._segment = frame.seq, ""
        return frame

    def _live_text(self, frame: Frame) -> Frame | None:
        if frame.seq < self.last:
            return None  # its segment was already delivered from the log
        self._segment += frame.crumb["delta"]
        return frame

    def _log_text(self, frame: Frame) -> Frame | None:
        if frame.seq <= self.last:
            return None
        text, shown = frame.crumb["delta"], self._segment
        self.last, self._segment = frame.seq, ""
        if shown and text.startswith(shown):
            rest = text[len(shown) :]
            return Frame(frame.run_id, frame.seq, {**frame.crumb, "delta": rest}) if rest else None
        return frame


class LogFollower:
    """One thread per ``Bread`` that reads the store for tails of runs executing elsewhere.

    Without a shared transport, the store is the only way a crumb written by another process
    reaches this one. Runs executing in this process are left to the transport.
    """

    def __init__(self, bread: Bread, interval: float = 0.25):
        self.bread = bread
        self.interval = interval
        self._lock = threading.Lock()
        self._watching: dict[str, list[tuple[queue.Queue, list[int]]]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, run_id: str, inbox: queue.Queue, after: int) -> Any:
        entry = (inbox, [after])
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
        while True:
            time.sleep(self.interval)
            with self._lock:
                if not self._watching:
                    self._thread = None
                    return
                watched = {run_id: list(entries) for run_id, entries in self._watching.items()}
            for run_id, entries in watched.items():
                if run_id not in self.bread.cancels:
                    self._poll(run_id, entries)

    def _poll(self, run_id: str, entries: list[tuple[queue.Queue, list[int]]]) -> None:
        after = min(position[0] for _, position in entries)
        frames = self.bread.store.get_crumbs(run_id, after=after)
        if not frames:
            self._check_owner(run_id)
            return
        for inbox, position in entries:
            for frame in frames:
                if frame.seq > position[0]:
                    inbox.put((LOG, frame))
            position[0] = frames[-1].seq

    def _check_owner(self, run_id: str) -> None:
        record = self.bread.store.get_run(run_id)
        if record and record["status"] == "running" and record["leaseUntil"] < time.time():
            self.bread.interrupt(record)


def tail(
    bread: Bread,
    run_id: str,
    after: int = 0,
    *,
    heartbeat: float | None = None,
    through_pause: bool = True,
) -> Iterator[Frame | None]:
    """Replay a run's log past ``after``, then follow it live until its terminal crumb (or,
    with ``through_pause=False``, its pause). Yields ``None`` after ``heartbeat`` idle seconds.

    ``RUN_NOT_FOUND`` is raised here, before iteration, so a route can answer 404.
    """
    if bread.store.get_run(run_id) is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
    inbox: queue.Queue = queue.Queue()
    subscription = None
    if can_subscribe(bread.transport):
        subscription = bread.transport.subscribe(run_id, after, lambda frame: inbox.put((LIVE, frame)))
    return _follow(bread, run_id, after, inbox, subscription, heartbeat, through_pause)


def _follow(bread, run_id, after, inbox, subscription, heartbeat, through_pause) -> Iterator[Frame | None]:
    ends = TERMINAL if through_pause else STREAM_END
    dedup = Dedup(after)
    watch = None
    try:
        # Read the status before the log: a run finished by then has its terminal crumb in it.
        finished = not _unfinished(bread, run_id)
        for frame in _replay(bread, run_id, after):
            if dedup.accept(frame, LOG) is not None:
                yield frame
                if frame.type in ends:
                    return
        if finished or subscription is None:
            return  # nothing more will come, or a sink transport has nothing live to offer
        watch = bread.follower.watch(run_id, inbox, dedup.last)
        while True:
            try:
                source, frame = inbox.get(timeout=heartbeat)
            except queue.Empty:
                yield None
                continue
            accepted = dedup.accept(frame, source)
            if accepted is not None:
                yield accepted
                if accepted.type in ends:
                    return
    finally:
        if subscription is not None:
            subscription.close()
        if watch is not None:
            bread.follower.unwatch(run_id, watch)


def _replay(bread: Bread, run_id: str, after: int) -> list[Frame]:
    return bread.store.get_crumbs(run_id, after=after) if has_crumb_log(bread.store) else []


def _unfinished(bread: Bread, run_id: str) -> bool:
    record = bread.store.get_run(run_id)
    return record is not None and record["status"] not in FINISHED
