"""Reading a run's log and its live frames as one stream, sans-IO: the dedup rule (which frames
a reader delivers, given where it started) and the gap it says once when it cannot serve some.

No durable crumb lost, none twice, and a segment (a run of text or reasoning deltas) that arrives
both live (deltas) and from the log (their aggregate) is shown once. The text a reader holds drops what a run carried on
after its process died says was lost (:class:`LiveText`). A client of a bridge, which cannot
run this rule itself, says how much of a segment it holds in the ids it echoes (:class:`ShownText`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from zlib import crc32

from ..crumbs import AGENT_RUN_CONTINUED, NOT_DURABLE, TEXT_DELTA, Frame

#: Where a frame came from: the transport, or the store's log.
LIVE, LOG = "live", "log"


@dataclass(frozen=True)
class Gap:
    """A reader cannot serve what lies between its start and ``earliest_seq``: the store keeps
    no log and the transport no longer retains it. Said once, never skipped silently."""

    earliest_seq: int


_NO_PARTS: list[str] = []


class Dedup:
    """Decides which frames of a run a tail delivers, given where it starts.

    ``last`` is the last log position delivered, ``durable`` the last durable one. Durable
    frames (and aggregated log deltas) pass only past ``last``. Between two durable crumbs the
    deltas come in segments (a run of deltas of one type: text, reasoning), each logged as one
    aggregated entry, in order, before the next durable crumb: the n-th segment after the durable
    crumb at ``durable`` is the log entry at ``durable + n``. So a live delta (watermark
    ``durable``) passes unless its segment was already delivered from the log, and its text is
    remembered under its segment, so when the log's entry for a segment arrives only the part not
    yet shown is delivered.
    """

    # One per open stream (its tail's): slots, not a dict each.
    __slots__ = ("_live", "_live_kind", "_live_parts", "_logged", "_shown", "durable", "last")

    def __init__(self, after: int):
        self.last = self.durable = after
        self._forget()

    def _forget(self) -> None:
        # Made at the first live segment, not at each durable frame: most durable frames have
        # none after them, and an idle tail holds neither.
        #: segment number (1, 2, ...) -> [its delta type, the parts of it shown live]
        self._shown: dict[int, tuple[str, list[str]]] | None = None
        self._live = 0  # the live segment under way, by number
        self._live_kind = ""
        #: the parts of the segment under way, as in _shown; a segment's first delta makes its
        #: own list (no kind is ""), so the shared empty one is never appended to
        self._live_parts: list[str] = _NO_PARTS
        self._logged = 0  # the segments delivered from the log

    @property
    def segments(self) -> int:
        """How many segments were shown live and not yet delivered from the log."""
        return max(self._live - self._logged, 0)

    @property
    def in_segment(self) -> bool:
        """Live deltas were delivered since the last durable frame."""
        return self._live > 0

    def segment_text(self, kind: str = TEXT_DELTA) -> str:
        """The deltas of ``kind`` delivered live and not yet from the log."""
        shown = self._shown or {}
        return "".join(part for n, (k, parts) in shown.items() if k == kind and n > self._logged for part in parts)

    def accept(self, frame: Frame, source: str) -> Frame | None:
        if frame.type in NOT_DURABLE:
            return self._logged_delta(frame) if source == LOG else self.live_text(frame)
        if frame.seq <= self.last:
            return None
        self.last = self.durable = frame.seq
        self._forget()
        return frame

    def live_text(self, frame: Frame) -> Frame | None:
        """``accept`` of a live delta (text or reasoning)."""
        if frame.seq < self.durable:
            return None  # its segment was already delivered from the log
        kind = frame.crumb["type"]
        if kind != self._live_kind:
            self._live_kind = kind
            self._live += 1
            # Its parts' list made once per segment, not looked up (and a default made) per delta.
            self._live_parts = []
            if self._live > self._logged:
                if self._shown is None:
                    self._shown = {}
                self._shown[self._live] = (kind, self._live_parts)
        if self._live <= self._logged:
            return None  # its segment was already delivered from the log
        self._live_parts.append(frame.crumb["delta"])
        return frame

    def _logged_delta(self, frame: Frame) -> Frame | None:
        if frame.seq <= self.last:
            return None
        self.last = frame.seq
        self._logged = frame.seq - self.durable
        shown = self._shown.pop(self._logged, None) if self._shown else None
        text = frame.crumb["delta"]
        if shown is None:
            return frame
        shown_text = "".join(shown[1])
        if text.startswith(shown_text):
            rest = text[len(shown_text) :]
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


_SHOWN_ID = re.compile(r"^([0-9]{1,19})(?::([0-9]{1,19}):([0-9a-f]{8}))?$")
_NOTHING: tuple[Frame, ...] = ()


class ShownText:
    """Where a bridge's client stands in a run's stream, as the SSE ``id`` of its events says it:
    ``<after>`` (the last log position it holds), then ``:<shown>:<crc32>`` once it holds
    ``shown`` characters of delta text past it (their CRC-32, in hex). A stream resumed from that
    id skips those characters.

    After a reconnect inside a segment the server sends the segment again from its start (the
    dedup rule's window), and a bridge's client (AG-UI, A2A) holds no state to drop the repeat
    with, as :class:`~bread_sync.wire.reader.RunStreamReader` does: so the server drops it, told
    where by the id. The checksum keeps a skip from losing text: when the text sent again is not
    the client's (the transport no longer held the segment's start), it is sent after all. Any
    durable frame ends the segments, so text the client held that did not come again (lost with
    a dead process, ``agent:run:continued``) is not skipped.
    """

    def __init__(self, after: int = 0, shown: int = 0, crc: int = 0):
        #: The position past the frames taken so far: the ``id`` of the events they make.
        self.after, self.shown, self.crc = after, 0, 0
        self._held, self._held_crc = shown, crc  # what a resumed stream's client holds already
        self._skipped_crc = 0
        self._pending: list[Frame] = []  # deltas taken for the held text, until its CRC is known

    @classmethod
    def from_id(cls, raw: str) -> ShownText:
        """The position of an id this class made; a ``ValueError`` for anything else."""
        match = _SHOWN_ID.match(raw.strip())
        if match is None:
            raise ValueError(f"{raw!r} is not a stream position: <seq> or <seq>:<characters>:<crc32>")
        return cls(int(match[1]), int(match[2] or 0), int(match[3] or "0", 16))

    @property
    def event_id(self) -> str:
        """The id of the event that carries the client to here."""
        return f"{self.after}:{self.shown}:{self.crc:08x}" if self.shown else str(self.after)

    def unseen(self, frame: Frame) -> tuple[Sequence[Frame], Sequence[Frame]]:
        """What the frames taken so far, ``frame`` the last, bring: the deltas (or their starts)
        the client holds, for a translator to take silently, and the frames it lacks, to send (a
        delta's rest when the client holds its start). Either may be empty."""
        if frame.crumb["type"] not in NOT_DURABLE:
            sent = [*self._give_back(), frame] if self._pending else (frame,)
            self.after, self.shown, self.crc, self._held = frame.seq, 0, 0, 0
            return _NOTHING, sent
        delta = frame.crumb["delta"]
        if frame.seq > self.after:  # a log's aggregate, a position of its own: held whole from here
            self.after, self.shown, self.crc = frame.seq, 0, 0
        else:
            self.shown += len(delta)
            self.crc = crc32(delta.encode(), self.crc)
        if not self._held:
            return _NOTHING, (frame,)
        return self._skip(frame, delta)

    def _skip(self, frame: Frame, delta: str) -> tuple[Sequence[Frame], Sequence[Frame]]:
        held = min(self._held, len(delta))
        self._held -= held
        self._skipped_crc = crc32(delta[:held].encode(), self._skipped_crc)
        self._pending.append(frame)
        if self._held:
            return _NOTHING, _NOTHING
        if self._skipped_crc != self._held_crc:  # not the client's text: sent again rather than lost
            return _NOTHING, self._give_back()
        dropped, self._pending = self._pending, []
        if held == len(delta):
            return dropped, _NOTHING
        dropped[-1] = _with_delta(frame, delta[:held])
        return dropped, (_with_delta(frame, delta[held:]),)

    def _give_back(self) -> list[Frame]:
        pending, self._pending, self._held = self._pending, [], 0
        return pending


def _with_delta(frame: Frame, delta: str) -> Frame:
    return Frame(frame.run_id, frame.seq, {**frame.crumb, "delta": delta})
