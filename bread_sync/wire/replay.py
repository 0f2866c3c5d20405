"""Reading a run's log and its live frames as one stream, sans-IO: the dedup rule (which frames
a reader delivers, given where it started) and the gap it says once when it cannot serve some.

No durable crumb lost, none twice, and a text segment that arrives both live (deltas) and from
the log (their aggregate) is shown once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..crumbs import TEXT_DELTA, Frame

#: Where a frame came from: the transport, or the store's log.
LIVE, LOG = "live", "log"


@dataclass(frozen=True)
class Gap:
    """A reader cannot serve what lies between its start and ``earliest_seq``: the store keeps
    no log and the transport no longer retains it. Said once, never skipped silently."""

    earliest_seq: int


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

    @property
    def segment_text(self) -> str:
        """The text delivered live since the last durable frame."""
        return "".join(self._segment)

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
        text, shown = frame.crumb["delta"], self.segment_text
        self.last, self._segment = frame.seq, []
        if shown and text.startswith(shown):
            rest = text[len(shown) :]
            return Frame(frame.run_id, frame.seq, {**frame.crumb, "delta": rest}) if rest else None
        return frame
