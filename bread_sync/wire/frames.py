"""The Bread protocol: versioned frames a duplex transport speaks across a network boundary.

Sans-IO: encoding and decoding only. Any malformed frame is ``PROTOCOL_DECODE_ERROR``, so a
transport's read loop has one error shape to handle.
"""

from __future__ import annotations

from functools import lru_cache
from json.decoder import scanstring  # type: ignore[attr-defined]  # in json.decoder, not in its stubs
from typing import Any

from ..crumbs import TEXT_DELTA, Frame, delta_wire_head, dumps, from_wire_crumb, loads, to_wire_crumb
from ..errors import PROTOCOL_DECODE_ERROR, BreadError

BREAD_PROTOCOL_VERSION = 1


def subscribe_frame(run_id: str, after_seq: int) -> dict[str, Any]:
    return {"v": BREAD_PROTOCOL_VERSION, "type": "subscribe", "runId": run_id, "afterSeq": after_seq}


def encode_frame(frame: Frame | dict[str, Any]) -> str:
    """One frame as compact JSON text (no newline). A :class:`Frame` becomes a CrumbFrame."""
    if isinstance(frame, Frame):
        return crumb_frame_text(frame)
    else:
        _validate(frame)
        if frame["type"] == "crumb":
            frame = {**frame, "crumb": to_wire_crumb(frame["crumb"])}
    return dumps(frame)


def crumb_frame_text(frame: Frame, end: str = "") -> str:
    """A :class:`Frame` as CrumbFrame JSON text (then ``end``), around the crumb JSON the choke
    point already produced: no second serialisation."""
    return f'{_frame_head(frame.run_id)}"seq":{frame.seq},"crumb":{frame.wire}}}{end}'


@lru_cache(maxsize=4096)
def _frame_head(run_id: str) -> str:
    # The same for every frame of a run: encoded once per run, not once per frame.
    return f'{{"v":{BREAD_PROTOCOL_VERSION},"type":"crumb","runId":{dumps(run_id)},'


class DeltaLines:
    """Reads the CrumbFrame line of one run's ``text:delta`` exactly as :func:`crumb_frame_text`
    and the choke point's template write it, without the generic decoder: most lines of a
    stream are these, and only their seq and text vary. :meth:`frame` is None for any other
    line, which :func:`decode_frame` reads (and rejects, when malformed) as before."""

    __slots__ = ("run_id", "_head", "_middle")

    def __init__(self, run_id: str):
        self.run_id = run_id
        self._head = f'{_frame_head(run_id)}"seq":'
        self._middle = f',"crumb":{delta_wire_head(run_id)}"'  # to the delta's opening quote

    def frame(self, line: bytes) -> Frame | None:
        try:
            text = line.decode()
            head, middle = self._head, self._middle
            if not text.startswith(head):
                return None
            comma = text.find(",", len(head))
            seq = text[len(head) : comma]
            if not (text.startswith(middle, comma) and _is_json_seq(seq)):
                return None
            delta, end = scanstring(text, comma + len(middle))
        except ValueError:  # not UTF-8, or a malformed string: the generic decoder says how
            return None
        if end != len(text) - 2 or not text.endswith("}}"):
            return None
        return Frame(self.run_id, int(seq), {"type": TEXT_DELTA, "runId": self.run_id, "delta": delta})


def _is_json_seq(text: str) -> bool:
    # A non-negative JSON integer: ASCII digits, no leading zero; short enough for int() (a seq
    # past 19 digits is left to the generic decoder, which refuses it as the wire error it is).
    return len(text) <= 19 and text.isdigit() and text.isascii() and (text[0] != "0" or text == "0")


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """Parse and validate one frame; a crumb frame's errors come back as live BreadErrors."""
    try:
        data = loads(text.decode() if isinstance(text, bytes) else text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BreadError(PROTOCOL_DECODE_ERROR, "frame is not valid JSON") from exc
    _validate(data)
    if data["type"] == "crumb":
        data["crumb"] = from_wire_crumb(data["crumb"])
    return data


def frame_from_protocol(data: dict[str, Any]) -> Frame:
    """A decoded CrumbFrame as a runtime :class:`Frame`."""
    return Frame(data["runId"], data["seq"], data["crumb"])


def _validate(data: Any) -> None:
    if not isinstance(data, dict):
        _fail("frame is not a JSON object")
    if data.get("v") != BREAD_PROTOCOL_VERSION:
        _fail(f"unsupported protocol version {data.get('v')!r}, expected {BREAD_PROTOCOL_VERSION}")
    # An empty runId is allowed: the synthetic failure frame of a request that created no run.
    if not isinstance(data.get("runId"), str):
        _fail("frame has no runId string")
    kind = data.get("type")
    if kind == "crumb":
        _require_seq(data, "seq")
        crumb = data.get("crumb")
        if not isinstance(crumb, dict) or not isinstance(crumb.get("type"), str):
            _fail("crumb frame has no crumb object with a type")
    elif kind == "subscribe":
        _require_seq(data, "afterSeq")
    elif kind == "gap":  # bread_sync's addition: a passive stream that cannot replay from its start
        _require_seq(data, "earliestSeq")
    else:
        _fail(f"unknown frame type {kind!r}")


def _require_seq(data: dict[str, Any], key: str) -> None:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _fail(f"frame field {key} must be a non-negative integer")


def _fail(message: str) -> None:
    raise BreadError(PROTOCOL_DECODE_ERROR, message)
