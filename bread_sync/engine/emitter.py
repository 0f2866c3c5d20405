"""The choke point: every crumb of a run passes here exactly once.

It assigns seqs, aggregates the deltas (``text:delta``, ``reasoning:delta``) before they reach
the log, commits each durable crumb to the store before anyone else sees it, then hands the
frame to the local listeners and the transport. So what listeners see, what the transport
carries and what the log replays agree, the log holding each segment (a run of deltas of one
type) as one aggregated delta, in the order the deltas came.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..crumbs import NOT_DURABLE, STREAM_END, Frame, delta_wire_head, json_string
from ..stores import Store, batch, write_batch
from ..transports import Transport

log = logging.getLogger("bread_sync")


class Emitter:
    """One run's choke point: it numbers, logs and publishes each crumb, in that order.

    One per run (or continuation), used by one thread at a time: the driver's, or a process
    appending the terminal crumb of a run nobody drives. ``next_seq`` is where the run's log
    goes on (1 for a new run, a checkpoint's ``nextSeq`` for a continuation)."""

    def __init__(
        self,
        run_id: str,
        store: Store,
        publish: Callable[[Frame], None],
        next_seq: int = 1,
        metrics: Any = None,
    ):
        self.run_id = run_id
        self.last_seq = next_seq - 1
        self._store = store
        self._publish = publish
        #: the segments not logged yet: [delta type, its parts], a new one at each change of type
        self._segments: list[tuple[str, list[str]]] = []
        self._delta_heads = {kind: delta_wire_head(run_id, kind) for kind in NOT_DURABLE}
        self._deferred: list[Callable[[], Any]] = []
        #: The run's tally of its commits while metrics are on (bread_sync/metrics/), else None.
        self.tally = None if metrics is None else metrics.tally()
        #: What is told of each durable crumb once logged (:meth:`watch`), else None.
        self._watcher: Callable[[dict[str, Any]], None] | None = None

    @property
    def next_seq(self) -> int:
        """The seq the next durable crumb will take, counting the pending aggregated deltas."""
        return self.last_seq + len(self._segments) + 1

    def defer(self, write: Callable[[], Any]) -> None:
        """A store write to make in the transaction of the next durable crumb, after its rows:
        what a run records beside its log (its session's messages, its status) lands with the
        crumb that reports it, or not at all, and costs no transaction of its own."""
        self._deferred.append(write)

    def watch(self, committed: Callable[[dict[str, Any]], None]) -> None:
        """Call ``committed(crumb)`` with each durable crumb once it is logged, before it is
        published: never with a delta, so what watches a run (its tracing) costs nothing per
        delta, which a wrapper of the run's crumbs would."""
        self._watcher = committed

    def drop_text(self) -> None:
        """Forget the text not logged yet: what a remote run carried on after its process died
        had streamed and lost (engine/relay.py), which the local log must not keep either."""
        self._segments.clear()

    def emit(self, crumb: dict[str, Any]) -> Frame:
        """Pass ``crumb`` through: a durable crumb is committed (with the text aggregated before
        it and the deferred writes) before it is published; a delta is published at once and
        logged later, aggregated. Raises ``SEQ_CONFLICT`` when another writer took the seq
        (another process ended the run), and nothing is published then."""
        kind = crumb["type"]
        if kind in NOT_DURABLE:
            delta = crumb["delta"]
            segments = self._segments
            if segments and segments[-1][0] == kind:
                segments[-1][1].append(delta)
            else:
                segments.append((kind, [delta]))
            # Deltas are most of a run's crumbs: their wire is templated, not encoded as a dict.
            # (The template's key order is the agent run's; another order would be the same JSON.)
            templated = len(crumb) == 3 and crumb.get("runId") == self.run_id
            wire = self._delta_wire(kind, delta) if templated else None
            frame = Frame(self.run_id, self.last_seq, crumb, wire)
        else:
            frame = self._logged(crumb)
        self._publish(frame)
        return frame

    def _delta_wire(self, kind: str, text: str) -> str:
        return self._delta_heads[kind] + json_string(text) + "}"

    def _logged(self, crumb: dict[str, Any]) -> Frame:
        """``crumb`` committed; timed and tallied while metrics are on, then told to the watcher.
        (Chosen here, not by a bound method or closure kept on the emitter: that would make it a
        cycle, which holds a run's spans and tally until the garbage collector frees it.)"""
        tally = self.tally
        if tally is None:
            frame = self._commit(crumb)
        else:
            rows = len(self._segments) + 1  # its text and reasoning segments, then itself
            started = perf_counter()
            frame = self._commit(crumb)
            tally.commit(crumb, rows, perf_counter() - started)
        if self._watcher is not None:
            self._watcher(crumb)
        return frame

    def _commit(self, crumb: dict[str, Any]) -> Frame:
        rows = []
        seq = self.last_seq
        for kind, parts in self._segments:
            seq += 1
            text = "".join(parts)
            aggregated = {"type": kind, "runId": self.run_id, "delta": text}
            rows.append(Frame(self.run_id, seq, aggregated, self._delta_wire(kind, text)))
        seq += 1
        frame = Frame(self.run_id, seq, crumb)
        rows.append(frame)
        deferred, self._deferred = self._deferred, []
        if not deferred:  # most commits: no batch to open
            self._store.append_crumbs(self.run_id, rows)
        elif crumb["type"] in STREAM_END:
            # A run's end (or pause) writes the most (its text, messages, status, the session's
            # release), and many runs end at once: a store may write it off the event loop's
            # thread (SQLite under gevent). A smaller batch is cheaper than that hand-over.
            write_batch(self._store, [lambda: self._store.append_crumbs(self.run_id, rows), *deferred])
        else:
            with batch(self._store):
                self._store.append_crumbs(self.run_id, rows)
                for write in deferred:
                    write()
        self._segments.clear()
        self.last_seq = seq
        return frame


def fan_out(listeners: list[Callable[[Frame], None]], transport: Transport) -> Callable[[Frame], None]:
    """The publish step: local listeners, then the transport. A failing listener or a
    transport that is down is logged and never stops the run; the log already holds the crumb."""

    def publish(frame: Frame) -> None:
        for listener in listeners:
            try:
                listener(frame)
            except Exception:
                log.exception("crumb listener failed on run %s", frame.run_id)
        try:
            transport.publish(frame)
        except Exception:
            log.exception("transport publish failed on run %s", frame.run_id)

    return publish
