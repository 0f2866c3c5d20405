"""The choke point: every crumb of a run passes here exactly once.

It assigns seqs, aggregates ``text:delta`` crumbs before they reach the log, commits each
durable crumb to the store before anyone else sees it, then hands the frame to the local
listeners and the transport. So what listeners see, what the transport carries and what the
log replays agree, the log holding each text segment as one aggregated delta.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..crumbs import STREAM_END, TEXT_DELTA, Frame, json_string, text_delta_wire_head
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
        self._text: list[str] = []
        self._delta_head = text_delta_wire_head(run_id)
        self._deferred: list[Callable[[], Any]] = []
        #: The run's tally of its commits while metrics are on (bread_sync/metrics/), else None.
        self.tally = None if metrics is None else metrics.tally()
        #: How a durable crumb is committed: timed and tallied only while metrics are on.
        self._log = self._commit if self.tally is None else self._measured(self._commit, self.tally)

    @property
    def next_seq(self) -> int:
        """The seq the next durable crumb will take, counting a pending aggregated delta."""
        return self.last_seq + (2 if self._text else 1)

    def defer(self, write: Callable[[], Any]) -> None:
        """A store write to make in the transaction of the next durable crumb, after its rows:
        what a run records beside its log (its session's messages, its status) lands with the
        crumb that reports it, or not at all, and costs no transaction of its own."""
        self._deferred.append(write)

    def drop_text(self) -> None:
        """Forget the text not logged yet: what a remote run carried on after its process died
        had streamed and lost (engine/relay.py), which the local log must not keep either."""
        self._text.clear()

    def emit(self, crumb: dict[str, Any]) -> Frame:
        """Pass ``crumb`` through: a durable crumb is committed (with the text aggregated before
        it and the deferred writes) before it is published; a ``text:delta`` is published at
        once and logged later, aggregated. Raises ``SEQ_CONFLICT`` when another writer took the
        seq (another process ended the run), and nothing is published then."""
        if crumb["type"] == TEXT_DELTA:
            delta = crumb["delta"]
            self._text.append(delta)
            # Deltas are most of a run's crumbs: their wire is templated, not encoded as a dict.
            # (The template's key order is the agent run's; another order would be the same JSON.)
            templated = len(crumb) == 3 and crumb.get("runId") == self.run_id
            wire = self._delta_wire(delta) if templated else None
            frame = Frame(self.run_id, self.last_seq, crumb, wire)
        else:
            frame = self._log(crumb)
        self._publish(frame)
        return frame

    def _delta_wire(self, text: str) -> str:
        return self._delta_head + json_string(text) + "}"

    def _measured(self, commit: Callable[[dict[str, Any]], Frame], tally: Any) -> Callable[[dict[str, Any]], Frame]:
        """``commit``, each call timed and its crumbs tallied."""

        def measured(crumb: dict[str, Any]) -> Frame:
            rows = 2 if self._text else 1
            started = perf_counter()
            frame = commit(crumb)
            tally.commit(crumb, rows, perf_counter() - started)
            return frame

        return measured

    def _commit(self, crumb: dict[str, Any]) -> Frame:
        rows = []
        seq = self.last_seq
        if self._text:
            seq += 1
            text = "".join(self._text)
            aggregated = {"type": TEXT_DELTA, "runId": self.run_id, "delta": text}
            rows.append(Frame(self.run_id, seq, aggregated, self._delta_wire(text)))
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
        self._text.clear()
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
