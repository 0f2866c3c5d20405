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
from bread_sync.protocol import subscribe_frame


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
