"""Reading a run's log and its live frames as one stream, sans-IO: the dedup rule (which frames
a reader delivers, given where it started) and the gap it says once when it cannot serve some.

No durable crumb lost, none twice, and a text segment that arrives both live (deltas) and from
the log (their aggregate) is shown once. The text a reader holds drops what a run carried on
after its process died says was lost (:class:`LiveText`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..crumbs import AGENT_RUN_CONTINUED, TEXT_DELTA, Frame

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


class LiveText:
    """The text a reader of a run holds, each part under the seq it came with: at an
    ``agent:run:continued`` crumb, the parts whose seq (a live delta's watermark) is its
    ``afterSeq`` or more are dropped, so the text held is the log's.

    Those deltas were streamed by the model call that was in flight when the run's process
    died; they were never logged, and the continuation makes that call again. A log's
    aggregate always lies before the last durable crumb, so only lost live text is dropped.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[int, str]] = []  # in the order delivered: seqs never go down

    @property
    def text(self) -> str:
        return "".join(text for _, text in self._parts)

    def take(self, frame: Frame) -> None:
        """Hold the text of a delivered ``text:delta``; drop the lost text at ``agent:run:continued``."""
        kind = frame.crumb["type"]
        if kind == TEXT_DELTA:
            self._parts.append((frame.seq, frame.crumb["delta"]))
        elif kind == AGENT_RUN_CONTINUED:
            after = frame.crumb["afterSeq"]
            while self._parts and self._parts[-1][0] >= after:
                self._parts.pop()
