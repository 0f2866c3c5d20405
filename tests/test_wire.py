"""The SSE and NDJSON codecs, with input split at every byte and every line ending."""

import json

import pytest

from bread_sync import BreadError
from bread_sync.crumbs import Frame, loads
from bread_sync.wire import (
    SSE_PING,
    NDJSONDecoder,
    SSEDecoder,
    ndjson_crumb,
    sse_crumb,
    sse_error,
    sse_retry,
)

FRAMES = [
    Frame("r", 1, {"type": "agent:run:start", "runId": "r", "agentId": "echo", "sessionId": "s", "input": "hé"}),
    Frame("r", 1, {"type": "text:delta", "runId": "r", "delta": "line one\nline two\r\n"}),
    Frame("r", 3, {"type": "agent:error", "runId": "r", "error": BreadError("RUN_CANCELLED", "stop")}),
]


def test_sse_crumb_is_id_and_type_payload_data():
    assert sse_crumb(FRAMES[1]) == (
        b'id: 1\ndata: {"type":"text:delta","payload":{"type":"text:delta","runId":"r",'
        b'"delta":"line one\\nline two\\r\\n"}}\n\n'
    )
    assert sse_error(BreadError("UNKNOWN_PROVIDER", "no")) == (
        b'data: {"type":"error","payload":{"code":"UNKNOWN_PROVIDER","message":"no"}}\n\n'
    )
    assert sse_retry() == b"retry: 3000\n\n"


def sse_body(ending: str) -> bytes:
    body = sse_retry() + SSE_PING + b"".join(sse_crumb(f) for f in FRAMES) + sse_error(BreadError("X", "y"))
    return body.replace(b"\n", ending.encode())


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_sse_decoder_reads_the_stream_split_at_every_byte(ending):
    body = sse_body(ending)
    expected = list(SSEDecoder().feed(body))
    assert [e.id for e in expected] == [None, "1", "1", "3", None]
    assert [e.json()["payload"] for e in expected[1:4]] == [json.loads(f.wire) for f in FRAMES]
    assert expected[0].retry == 3000 and expected[-1].json()["type"] == "error"
    for cut in range(len(body) + 1):
        decoder = SSEDecoder()
        events = [*decoder.feed(body[:cut]), *decoder.feed(body[cut:])]
        assert events == expected, f"split at byte {cut}"
        assert decoder.last_event_id == "3"


def test_sse_decoder_reads_byte_by_byte_through_multibyte_characters():
    body = sse_body("\n")
    decoder = SSEDecoder()
    events = [e for i in range(len(body)) for e in decoder.feed(body[i : i + 1])]
    assert events == list(SSEDecoder().feed(body))


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_ndjson_decoder_reads_frames_split_at_every_byte(ending):
    body = b"".join(ndjson_crumb(f) + b"\n" for f in FRAMES).replace(b"\n", ending)
    for cut in range(len(body) + 1):
        decoder = NDJSONDecoder()
        frames = [*decoder.feed(body[:cut]), *decoder.feed(body[cut:])]
        assert [(f["seq"], f["crumb"]) for f in frames] == [(f.seq, f.crumb) for f in FRAMES], cut


def test_an_ndjson_line_is_one_crumb_frame():
    line = ndjson_crumb(FRAMES[0])
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"v": 1, "type": "crumb", "runId": "r", "seq": 1, "crumb": FRAMES[0].crumb}


def test_loads_reads_bare_json_and_leaves_anything_else_to_json_loads():
    assert loads('{"a":[1,"hé"],"b":null}') == {"a": [1, "hé"], "b": None}
    assert loads(' {"a":1}\n') == {"a": 1}  # padded: json.loads's reading
    for bad in ("", "{", '{"a":1} x', "NaN?"):
        with pytest.raises(ValueError):
            loads(bad)
