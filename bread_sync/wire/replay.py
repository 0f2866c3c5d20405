"""Reading a run's log and its live frames as one stream, sans-IO: the dedup rule (which frames
a reader delivers, given where it started) and the gap it says once when it cannot serve some.

No durable crumb lost, none twice, and a segment (a run of text or reasoning deltas) that arrives
both live (deltas) and from the log (their aggregate) is shown once. The text a reader holds drops what a run carried on
after its process died says was lost (:class:`LiveText`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..crumbs import AGENT_RUN_CONTINUED, NOT_DURABLE, TEXT_DELTA, Frame

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
    pass only past it; live deltas only at it, and their text is remembered by type, so when the
    log's aggregated entry for a segment arrives only the part not yet shown is delivered. The
    same rule holds for each type of delta: a segment's entry is checked against what was shown
    live of its own type since the last durable frame.
    """

    def __init__(self, after: int):
        self.last = after
        #: delta type -> parts shown live since the last durable frame, joined only when needed
        self._shown: dict[str, list[str]] = {}
        #: how many segments were shown live since the last durable frame (a new one per change of type)
        self.segments = 0
        self._kind = ""

    @property
    def in_segment(self) -> bool:
        """Live deltas were delivered since the last durable frame."""
        return self.segments > 0

    def segment_text(self, kind: str = TEXT_DELTA) -> str:
        """The deltas of ``kind`` delivered live since the last durable frame."""
        return "".join(self._shown.get(kind, ()))

    def accept(self, frame: Frame, source: str) -> Frame | None:
        if frame.type in NOT_DURABLE:
            return self._logged_delta(frame) if source == LOG else self.live_text(frame)
        if frame.seq <= self.last:
            return None
        self.last = frame.seq
        self._forget()
        return frame

    def live_text(self, frame: Frame) -> Frame | None:
        """``accept`` of a live delta (text or reasoning)."""
        if frame.seq < self.last:
            return None  # its segment was already delivered from the log
        kind = frame.crumb["type"]
        if kind != self._kind:
            self._kind = kind
            self.segments += 1
        self._shown.setdefault(kind, []).append(frame.crumb["delta"])
        return frame

    def _forget(self) -> None:
        self._shown, self.segments, self._kind = {}, 0, ""

    def _logged_delta(self, frame: Frame) -> Frame | None:
        if frame.seq <= self.last:
            return None
        kind, text = frame.crumb["type"], frame.crumb["delta"]
        shown = self.segment_text(kind)
        self.last = frame.seq
        self.segments = max(self.segments - 1, 0)
        if not shown:
            return frame
        if shown.startswith(text):  # a whole segment shown live, with more of its type after it
            self._shown[kind] = [shown[len(text) :]]
            return None
        del self._shown[kind]
        if text.startswith(shown):
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
