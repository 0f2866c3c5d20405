"""The log follower: one thread per ``Bread`` reading the store for tails of runs that execute in
another process, and what it puts in their inboxes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection
from functools import partial
from typing import Any, NamedTuple

from ..deferred import Deferred
from ..engine import Runtime, recovery
from ..errors import STORE_BUSY, STORE_UNAVAILABLE, BreadError
from ..stores import FINISHED, AppendListener, append_listener, last_seqs
from ..transports import Subscription, is_healthy, reports_health
from .inbox import Inbox

log = logging.getLogger("bread_sync")

#: What the follower sends a tail whose run ended with nothing more after the tail's position.
ENDED = object()
#: While a transport shared between processes (Redis) is healthy it carries the frames of runs
#: executing elsewhere: the store is read for them only this often, as a safety net.
SAFETY_NET_SECONDS = 2.0
#: A store that cannot answer now: the follower tries again at its next pass.
UNREACHABLE = (STORE_BUSY, STORE_UNAVAILABLE)


class FromLog(NamedTuple):
    """An inbox item the log follower read from the store (a Frame, or ENDED). The transport's
    live frames go into the inbox as they are: nothing is wrapped per live crumb."""

    frame: Any


class _Watch:
    """One tail the follower reads a run's log for: one per open stream, so one small object
    with slots (a tuple with a list for its position was two)."""

    __slots__ = ("inbox", "local", "position")

    def __init__(self, inbox: Inbox, position: int, local: bool):
        self.inbox = inbox
        self.position = position  # the last seq the follower gave this tail
        self.local = local  # the tail of the response that started the run here


class LogFollower:
    """One thread per ``Bread`` that reads the store for tails of runs executing elsewhere.

    Without a shared transport the store is the only way another process's crumbs reach this
    one: every followed run is read every ``interval`` (or, with a store that hears appends,
    SQLite's data_version or Postgres' LISTEN/NOTIFY, when its log may have grown), and anyway
    every SAFETY_NET_SECONDS, but for a paused run where the store hears appends. With a
    healthy shared transport (Redis) runs are read every SAFETY_NET_SECONDS only, for a writer
    that could not reach it; while it is unhealthy, and once after it recovers, every run is
    read every ``interval``, so a tail misses nothing the transport dropped."""

    def __init__(self, bread: Runtime, interval: float = 0.25):
        self.bread = bread
        self.interval = interval
        self._lock = threading.Lock()
        self._watching: dict[str, list[_Watch]] = {}
        self._thread: threading.Thread | None = None
        self._degraded = False
        #: Runs watched since the last pass: read at the next one, whatever the store heard,
        #: as what was appended before their watch began went by unheeded.
        self._fresh: set[str] = set()
        #: Runs whose record said paused at the last look, their logs unchanged since: the
        #: safety net reads neither their records nor (where the store hears appends) their
        #: logs, unless the store heard that they may have grown (see _looked_at).
        self._paused: set[str] = set()
        #: What tails dropped unclosed held: let go at the next pass, or when a tail opens.
        self._dropped = Deferred("run %s: letting go of a tail dropped unclosed failed")

    def watch(self, run_id: str, inbox: Inbox, after: int, local: bool = False) -> Any:
        entry = _Watch(inbox, after, local)
        with self._lock:
            self._watching.setdefault(run_id, []).append(entry)
            self._fresh.add(run_id)
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
                self._paused.discard(run_id)

    def drop(self, run_id: str, entry: Any, subscription: Subscription | None) -> None:
        """What a tail dropped unclosed held (its watch, its subscription), from its finalizer:
        kept to be let go later, as taking a lock there could wait forever. A collection runs
        finalizers wherever it happens, inside a locked section of this follower or of the
        transport too (each allocates), on the thread or greenlet that holds the lock. A defer
        takes none."""
        self._dropped.defer(partial(self._let_go_of, run_id, entry, subscription), run_id)

    def let_go(self) -> None:
        """Let go of what dropped tails held, where no lock is held: the follower's passes
        (which a dropped watch keeps going), a tail's opening and ``Bread.let_go``."""
        self._dropped.let_go()

    def _let_go_of(self, run_id: str, entry: _Watch | None, subscription: Subscription | None) -> None:
        if entry is not None:
            self.unwatch(run_id, entry)
        if subscription is not None:
            subscription.close()

    def _loop(self) -> None:
        shared = reports_health(self.bread.transport)
        listener = None if shared else append_listener(self.bread.store)
        try:
            self._follow(shared, listener)
        finally:
            if listener is not None:
                listener.close()

    def _follow(self, shared: bool, listener: AppendListener | None) -> None:
        net_at = time.monotonic() + SAFETY_NET_SECONDS
        missed = False  # the last pass failed: the next one reads every due log
        while True:
            heard = self._wait(listener)
            self.let_go()
            degraded = not is_healthy(self.bread.transport)
            everything, self._degraded = degraded or self._degraded, degraded
            net = time.monotonic() >= net_at
            if net:
                net_at = time.monotonic() + SAFETY_NET_SECONDS
            with self._lock:
                if not self._watching:
                    self._thread = None
                    return
                fresh, self._fresh = self._fresh, set()
                heard = None if missed or heard is None else heard | fresh
                looked_at = self._looked_at(shared, listener is not None, everything, net, heard)
                watched = {run_id: list(self._watching[run_id]) for run_id in looked_at if run_id in self._watching}
            due = [run_id for run_id, entries in watched.items() if everything or self._due(run_id, entries, net)]
            if due:
                missed = not self._tried_pass(due, watched, look_at_records=everything or net)

    def _looked_at(
        self, shared: bool, hears: bool, everything: bool, net: bool, heard: set[str] | None
    ) -> Collection[str]:
        """The runs this pass may read, found without a look at each followed run: a quiet pass
        of thousands of idle tails costs nothing per tail. Those whose logs may have grown
        (without a shared transport: what the store heard, or all); at the safety net also
        every other run, but a paused one only where the store cannot hear appends (a paused
        run changes only by an append, which the store hears: a resume, a cancel)."""
        watching = self._watching
        if everything or (net and not hears):
            return watching.keys()
        grown: Collection[str] = () if shared else (watching.keys() if heard is None else heard)
        if not net:
            return grown
        return (watching.keys() - self._paused) | set(grown)

    def _wait(self, listener: AppendListener | None) -> set[str] | None:
        """Until the next pass: the runs whose logs grew meanwhile, or None (any may have)."""
        if listener is None:
            time.sleep(self.interval)
            return None
        return listener.wait(self.interval)

    def _tried_pass(self, due: list[str], watched: dict[str, list[_Watch]], look_at_records: bool) -> bool:
        try:
            self._pass(due, watched, look_at_records)
            return True
        except BreadError as exc:  # e.g. Postgres restarting: tails wait, the next pass reads on
            if exc.code not in UNREACHABLE:
                raise
            log.warning("the log follower cannot read the store (%s): trying again", exc.message)
            return False

    def _pass(self, due: list[str], watched: dict[str, list[_Watch]], look_at_records: bool) -> None:
        """One read of the last seqs of every due run; their logs only where something is new.
        Their records (a lapsed lease, an end with nothing new to show) only now and then: an
        idle tail costs an index seek a pass, not two queries."""
        last = last_seqs(self.bread.store, due)
        for run_id in due:
            entries = watched[run_id]
            if last.get(run_id, 0) > min(entry.position for entry in entries):
                self._paused.discard(run_id)
                self._poll(run_id, entries)
            elif look_at_records and run_id not in self._paused and self._finished(run_id):
                # e.g. a tail that started at the terminal crumb
                for entry in entries:
                    entry.inbox.put(FromLog(ENDED))

    def _due(self, run_id: str, entries: list[_Watch], net: bool) -> bool:
        """Whether a run this pass looks at is read: not one executing here (the transport
        carries it), and between safety nets not one only the tail of its own response follows."""
        if run_id in self.bread.cancels:
            return False
        return net or not all(entry.local for entry in entries)

    def _poll(self, run_id: str, entries: list[_Watch]) -> None:
        after = min(entry.position for entry in entries)
        frames = self.bread.store.get_crumbs(run_id, after=after)
        if not frames:
            return
        for entry in entries:
            for frame in frames:
                if frame.seq > entry.position:
                    entry.inbox.put(FromLog(frame))
            entry.position = frames[-1].seq

    def _finished(self, run_id: str) -> bool:
        """Whether the run has ended; a run whose owner is gone is recovered first."""
        record = self.bread.store.get_run(run_id)
        if record and record["status"] == "paused":
            self._paused.add(run_id)
        if record and record["status"] == "running" and recovery.orphaned(self.bread, record):
            recovery.recover(self.bread, record)
            return False  # what comes of it (carried on, or RUN_INTERRUPTED) reaches the tail next
        return record is None or record["status"] in FINISHED
