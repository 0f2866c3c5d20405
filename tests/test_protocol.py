"""Crumbs' wire form and the Bread protocol frames."""

import json

import pytest

from bread_sync import (
    BREAD_PROTOCOL_VERSION,
    BreadError,
    decode_frame,
    encode_frame,
    from_wire_crumb,
    to_wire_crumb,
)
from bread_sync.crumbs import Frame
from bread_sync.engine.emitter import Emitter
from bread_sync.wire import ndjson_crumb
from bread_sync.wire.frames import DeltaLines, frame_from_protocol, subscribe_frame


def test_protocol_version_is_one():
    assert BREAD_PROTOCOL_VERSION == 1


def test_wire_crumb_flattens_and_rebuilds_errors():
    live = {"type": "agent:error", "runId": "r", "error": BreadError("RUN_CANCELLED", "stop", {"k": 1})}
    flat = to_wire_crumb(live)
    assert flat["error"] == {
        "name": "BreadError",
        "code": "RUN_CANCELLED",
        "message": "stop",
        "context": {"k": 1},
    }
    assert json.loads(json.dumps(flat)) == flat
    assert from_wire_crumb(flat) == live
    assert to_wire_crumb({"type": "text:delta", "runId": "r", "delta": "x"}) == {
        "type": "text:delta",
        "runId": "r",
        "delta": "x",
    }


def test_a_foreign_exception_on_the_wire_says_nothing_of_its_text():
    flat = to_wire_crumb({"type": "tool:error", "runId": "r", "error": OSError("/etc/secret missing")})
    assert flat["error"]["code"] == "INTERNAL" and "/etc" not in flat["error"]["message"]


def test_crumb_frame_round_trips_with_live_errors():
    frame = Frame("run_1", 7, {"type": "agent:error", "runId": "run_1", "error": BreadError("INTERNAL", "boom")})
    text = encode_frame(frame)
    assert json.loads(text) == {
        "v": 1, "type": "crumb", "runId": "run_1", "seq": 7,
        "crumb": {"type": "agent:error", "runId": "run_1",
                  "error": {"name": "BreadError", "code": "INTERNAL", "message": "boom", "context": {}}},
    }  # fmt: skip
    decoded = decode_frame(text)
    assert decoded["crumb"]["error"] == BreadError("INTERNAL", "boom")
    assert encode_frame(decoded) == text


def test_subscribe_frame_round_trips():
    frame = subscribe_frame("run_1", 4)
    assert decode_frame(encode_frame(frame)) == {"v": 1, "type": "subscribe", "runId": "run_1", "afterSeq": 4}


MALFORMED = [
    "not json",
    b"\xff\xfe",
    "[]",
    "null",
    '{"v": 2, "type": "crumb", "runId": "r", "seq": 1, "crumb": {"type": "x"}}',
    '{"type": "crumb", "runId": "r", "seq": 1, "crumb": {"type": "x"}}',
    '{"v": 1, "type": "crumb", "runId": 7, "seq": 1, "crumb": {"type": "x"}}',
    '{"v": 1, "type": "crumb", "runId": "r", "seq": -1, "crumb": {"type": "x"}}',
    '{"v": 1, "type": "crumb", "runId": "r", "seq": true, "crumb": {"type": "x"}}',
    '{"v": 1, "type": "crumb", "runId": "r", "seq": 1, "crumb": "text"}',
    '{"v": 1, "type": "crumb", "runId": "r", "seq": 1, "crumb": {}}',
    '{"v": 1, "type": "subscribe", "runId": "r"}',
    '{"v": 1, "type": "unsubscribe", "runId": "r", "afterSeq": 0}',
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_frames_are_protocol_decode_errors(text):
    with pytest.raises(BreadError) as caught:
        decode_frame(text)
    assert caught.value.code == "PROTOCOL_DECODE_ERROR"


def test_encoding_an_invalid_frame_dict_is_a_protocol_decode_error():
    with pytest.raises(BreadError) as caught:
        encode_frame({"v": 1, "type": "crumb", "runId": "r"})
    assert caught.value.code == "PROTOCOL_DECODE_ERROR"


def delta_line(run_id: str, text: str, seq: int = 0) -> bytes:
    """A text delta's NDJSON line as the server writes it: the choke point's templated wire."""
    emitter = Emitter(run_id, store=None, publish=lambda frame: None, next_seq=seq + 1)
    return ndjson_crumb(emitter.emit({"type": "text:delta", "runId": run_id, "delta": text})).rstrip(b"\n")


@pytest.mark.parametrize("text", ["Hel", "", 'a "quote" and a \\', "wörld \u2028 \n\t\x00", "😀"])
@pytest.mark.parametrize("seq", [0, 7, 12345])
def test_a_delta_line_reads_the_same_through_its_fast_path(text, seq):
    line = delta_line("run_1", text, seq)
    fast = DeltaLines("run_1").frame(line)
    generic = frame_from_protocol(decode_frame(line))
    assert fast is not None
    assert (fast.run_id, fast.seq, fast.crumb) == (generic.run_id, generic.seq, generic.crumb)
    assert list(fast.crumb) == list(generic.crumb)


OTHER_LINES = [
    delta_line("run_2", "x"),  # another run's
    delta_line("run_1", "x").replace(b'"seq":0', b'"seq":01'),  # not JSON
    delta_line("run_1", "x").replace(b'"seq":0', b'"seq":-1'),
    delta_line("run_1", "x").replace(b'"seq":0', b'"seq":' + b"9" * 5000),  # past int()'s digit limit
    delta_line("run_1", "x").replace(b'"x"', b'"\\q"'),  # a bad escape
    delta_line("run_1", "x").replace(b'"x"', b"7"),  # not a string
    delta_line("run_1", "x").replace(b'"x"', b'"x","extra":1'),
    delta_line("run_1", "x") + b" ",
    delta_line("run_1", "x")[:-1],
    delta_line("run_1", "é")[:-5] + b'\xff"}}',  # not UTF-8
    encode_frame(Frame("run_1", 2, {"type": "tool:call", "runId": "run_1", "toolCallId": "c"})).encode(),
    b'{"v":1,"type":"crumb","runId":"run_1","seq":1}',
    b"",
]


@pytest.mark.parametrize("line", OTHER_LINES)
def test_any_other_line_is_left_to_the_generic_decoder(line):
    assert DeltaLines("run_1").frame(line) is None
