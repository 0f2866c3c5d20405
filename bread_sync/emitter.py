"""The choke point: every crumb of a run passes here exactly once.

It assigns seqs, aggregates ``text:delta`` crumbs before they reach the log, commits each
durable crumb to the store before anyone else sees it, then hands the frame to the local
listeners and the transport. So what listeners see, what the transport carries and what the
log replays agree, the log holding each text segment as one aggregated delta.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .crumbs import TEXT_DELTA, Frame, json_string, text_delta_wire_head

log = logging.getLogger("bread_sync")


class Emitter:
    def __init__(
        self,
        run_id: str,
        store: Any,
        publish: Callable[[Frame], None],
        next_seq: int = 1,
    ):
        self.run_id = run_id
        self.last_seq = next_seq - 1
        self._store = store
        self._publish = publish
        self._text: list[str] = []
        self._delta_head = text_delta_wire_head(run_id)

    @property
    def next_seq(self) -> int:
        """The seq the next durable crumb will take, counting a pending aggregated delta."""
        return self.last_seq + (2 if self._text else 1)

    def emit(self, crumb: dict[str, Any]) -> Frame:
        if crumb["type"] == TEXT_DELTA:
            delta = crumb["delta"]
            self._text.append(delta)
            # Deltas are most of a run's crumbs: their wire is templated, not encoded as a dict.
            templated = len(crumb) == 3 and crumb["runId"] == self.run_id
            wire = self._delta_head + json_string(delta) + "}" if templated else None
            frame = Frame(self.run_id, self.last_seq, crumb, wire)
        else:
            frame = self._commit(crumb)
        self._publish(frame)
        return frame

    def _commit(self, crumb: dict[str, Any]) -> Frame:
        rows = []
        seq = self.last_seq
        if self._text:
            seq += 1
            text = "".join(self._text)
            aggregated = {"type": TEXT_DELTA, "runId": self.run_id, "delta": text}
            rows.append(Frame(self.run_id, seq, aggregated, self._delta_head + json_string(text) + "}"))
        seq += 1
        frame = Frame(self.run_id, seq, crumb)
        rows.append(frame)
        self._store.append_crumbs(self.run_id, rows)
        self._text.clear()
        self.last_seq = seq
        return frame


def fan_out(listeners: list[Callable[[Frame], None]], transport: Any) -> Callable[[Frame], None]:
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
