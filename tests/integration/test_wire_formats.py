"""Both wire formats, byte for byte, as http-api.md and transports.md write them."""

from __future__ import annotations

import uuid

from .client import MEDIA_TYPES, dumps, open_stream, replay


def expected_body(wire: str, frames: list[tuple[int, dict]], prelude: bytes = b"") -> bytes:
    """What a response carrying these (seq, crumb) pairs must be, byte for byte."""
    if wire == "sse":
        body = "".join(
            f'id: {seq}\ndata: {{"type":{dumps(crumb["type"])},"payload":{dumps(crumb)}}}\n\n' for seq, crumb in frames
        )
    else:
        body = "".join(
            f'{{"v":1,"type":"crumb","runId":{dumps(crumb["runId"])},"seq":{seq},"crumb":{dumps(crumb)}}}\n'
            for seq, crumb in frames
        )
    return prelude + body.encode()


def echo_crumbs(run_id: str, session_id: str) -> dict[str, dict]:
    return {
        "start": {"type": "agent:run:start", "runId": run_id, "agentId": "echo", "sessionId": session_id,
                  "input": "a b"},
        "a": {"type": "text:delta", "runId": run_id, "delta": "a "},
        "b": {"type": "text:delta", "runId": run_id, "delta": "b"},
        "ab": {"type": "text:delta", "runId": run_id, "delta": "a b"},
        "end": {"type": "agent:run:end", "runId": run_id, "output": "a b"},
    }  # fmt: skip


def assert_stream_headers(stream, wire: str, run_id: str) -> None:
    assert stream.status == 200
    assert stream.media_type == MEDIA_TYPES[wire]
    assert stream.headers["cache-control"] == "no-cache"
    assert stream.headers["x-accel-buffering"] == "no"
    assert stream.headers.get("content-encoding", "identity") == "identity"
    assert stream.run_id == run_id


def test_run_response_is_byte_exact(http, server, wire):
    run_id, session_id = f"run-wire-{uuid.uuid4().hex}", f"ses-wire-{uuid.uuid4().hex}"
    body = {"input": "a b", "runId": run_id, "session": {"id": session_id}}
    with open_stream(
        http, "POST", f"{server.url}/agents/echo/run", wire, body=body, headers={"Accept-Encoding": "gzip"}
    ) as stream:
        stream.rest()

    assert_stream_headers(stream, wire, run_id)
    c = echo_crumbs(run_id, session_id)
    # Live deltas repeat the watermark; the aggregated entry (seq 2) is log-only.
    assert bytes(stream.raw) == expected_body(wire, [(1, c["start"]), (1, c["a"]), (1, c["b"]), (3, c["end"])])
    assert [e.seq for e in stream.events] == [1, 1, 1, 3]
    assert {e.data["runId"] for e in stream.events} == {run_id}


def test_passive_replay_is_byte_exact(http, server, wire):
    run_id, session_id = f"run-wire-{uuid.uuid4().hex}", f"ses-wire-{uuid.uuid4().hex}"
    body = {"input": "a b", "runId": run_id, "session": {"id": session_id}}
    with open_stream(http, "POST", f"{server.url}/agents/echo/run", wire, body=body) as stream:
        stream.rest()
    assert stream.last_crumb.type == "agent:run:end"

    replayed = replay(http, server.url, run_id, wire, headers={"Accept-Encoding": "gzip"})

    assert_stream_headers(replayed, wire, run_id)
    c = echo_crumbs(run_id, session_id)
    prelude = b"retry: 3000\n\n" if wire == "sse" else b""
    # The log holds the text as one aggregated delta with a position of its own.
    assert bytes(replayed.raw) == expected_body(wire, [(1, c["start"]), (2, c["ab"]), (3, c["end"])], prelude)
