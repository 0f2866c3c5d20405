"""POST /ag-ui/run on a real gunicorn gevent server: the demo's echo as AG-UI events, every event
valid for the official clients, and every malformed body a 400 before any run."""

from __future__ import annotations

import json

import httpx2 as httpx
import pytest

from ..ag_ui_rules import check_stream, decode_sse, decode_sse_ids
from .client import assert_error_body
from .tcp_proxy import TCPProxy

URL = "/ag-ui/run"
HELLO = {"id": "m1", "role": "user", "content": "hello there"}


def body(**fields):
    """The body @ag-ui/client's HttpAgent sends, with ``fields`` changed."""
    sent = {"threadId": "thread-1", "runId": "client-run-1", "protocolVersion": "1.0", "tools": [], "context": [],
            "forwardedProps": {}, "state": {}, "messages": [HELLO]}  # fmt: skip
    sent.update(fields)
    return sent


@pytest.fixture
def sse_server(pool):
    return pool.primary("http-sse")


def post(http, server, payload, **headers):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **headers}
    return http.post(server.url + URL, content=data, headers=headers)


def test_echo_streams_conformant_ag_ui_events(http, sse_server):
    answer = post(http, sse_server, body())
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["bread-run-id"].startswith("run_")
    events = decode_sse(answer.text)
    check_stream(events)
    assert events[0] == {
        "type": "RUN_STARTED",
        "threadId": "thread-1",
        "runId": "client-run-1",
        "protocolVersion": "1.0",
    }
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "hello there"
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["runId"] == "client-run-1"


def test_the_thread_is_the_session_and_bread_runs_under_its_own_id(http, sse_server):
    answer = post(http, sse_server, body(threadId="thread-session-check", runId="r-1"))
    run_id = answer.headers["bread-run-id"]
    record = http.get(f"{sse_server.url}/runs/{run_id}").json()
    assert record["sessionId"] == "thread-session-check" and record["status"] == "completed"


def test_only_the_last_message_is_the_new_turn(http, sse_server):
    history = [{"id": "m0", "role": "user", "content": "old"}, {"id": "m1", "role": "assistant", "content": "old"},
               {"id": "m2", "role": "user", "content": [{"type": "text", "text": "new turn"}]}]  # fmt: skip
    events = decode_sse(post(http, sse_server, body(threadId="thread-last", messages=history)).text)
    check_stream(events)
    assert events[-1]["result"] == "new turn"


MALFORMED = {
    "not JSON": b'{"threadId":',
    "a JSON array": b"[]",
    "no threadId": {k: v for k, v in body().items() if k != "threadId"},
    "an empty threadId": body(threadId=""),
    "no runId": {k: v for k, v in body().items() if k != "runId"},
    "no messages": {k: v for k, v in body().items() if k != "messages"},
    "empty messages": body(messages=[]),
    "a last message from the assistant": body(messages=[{"id": "m", "role": "assistant", "content": "hi"}]),
    "a last message that is a tool result": body(messages=[{"id": "m", "role": "tool", "content": "x",
                                                              "toolCallId": "t"}]),
    "a last message without text": body(messages=[{"id": "m", "role": "user", "content": [
        {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}]}]),
    "a message without an id": body(messages=[{"role": "user", "content": "hi"}]),
    "an unknown role": body(messages=[{"id": "m", "role": "wizard", "content": "hi"}]),
    "threadId not a string": body(threadId=5),
    "a state that is not an object": body(state=["plan"]),
    "a context entry without its value": body(context=[{"description": "tz"}]),
}  # fmt: skip


@pytest.mark.parametrize("payload", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_body_is_400_before_any_run(http, sse_server, payload):
    before = len(http.get(f"{sse_server.url}/runs?agent=echo").json())
    answer = post(http, sse_server, payload)
    assert_error_body(answer, 400, "INVALID_REQUEST")
    assert "bread-run-id" not in answer.headers
    assert len(http.get(f"{sse_server.url}/runs?agent=echo").json()) == before


def test_the_writers_interrupt_resumes_on_another_process(http, pool):
    """The pause's interrupt, answered on a peer (another gunicorn on the same SQLite file): the
    continuation reads the checkpoint from the store."""
    primary, peer = pool.primary("http-sse"), pool.peer("http-sse")
    first = body(threadId="thread-hitl", runId="c-1", messages=[{"id": "m1", "role": "user", "content": "rye"}])
    paused = decode_sse(http.post(primary.url + "/ag-ui/writer", json=first).text)
    check_stream(paused)
    (interrupt,) = paused[-1]["outcome"]["interrupts"]
    assert (interrupt["reason"], interrupt["metadata"]) == (
        "approval",
        {"toolName": "publish", "input": {"title": "rye"}},
    )
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    again = body(threadId="thread-hitl", runId="c-2", messages=[], resume=[entry])
    answer = http.post(peer.url + "/ag-ui/writer", json=again)
    events = decode_sse(answer.text)
    check_stream(events)
    assert events[0]["runId"] == "c-2" and events[-1]["result"] == "Published."
    assert http.get(f"{primary.url}/runs/{answer.headers['bread-run-id']}").json()["status"] == "completed"
    used = decode_sse(http.post(peer.url + "/ag-ui/writer", json=again).text)
    assert [(e["type"], e["code"]) for e in used] == [("RUN_ERROR", "CHECKPOINT_ALREADY_RESUMED")]


def test_a_connection_cut_inside_a_message_resumes_with_only_the_unseen_text(http, sse_server, pool):
    """The slow agent's stream, cut by the network after a few ticks and resumed from the last id
    the client got (a delta's), on the run's server and on a peer sharing the store: the resumed
    stream is valid alone, and the client holds the run's text once."""
    ticks = "".join(f"tick {n} " for n in range(1, 21))
    for target in (sse_server, pool.peer("http-sse")):
        thread = f"thread-cut-{target.port}"
        run_id, seen = read_until_cut(
            http, sse_server, body(threadId=thread, messages=[{"id": "m1", "role": "user", "content": "20"}])
        )
        last_id = [event_id for event_id, _ in seen if event_id is not None][-1]
        assert ":" in last_id  # the cut fell inside the message
        resumed = http.get(f"{target.url}/ag-ui/slow/runs/{run_id}/stream", headers={"Last-Event-ID": last_id})
        assert resumed.status_code == 200
        events = decode_sse(resumed.text)
        check_stream(events)
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
        text = "".join(e["delta"] for e in [e for _, e in seen] + events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == ticks == events[-1]["result"]


def read_until_cut(http, server, payload):
    """The run's id and the events (with their ids) a client got of its stream, through a proxy
    that cuts the connection after the fourth tick."""
    seen, buffer, cut = [], "", False
    proxy = TCPProxy(server.port)
    try:
        with http.stream("POST", proxy.url + "/ag-ui/slow", json=payload) as answer:
            run_id = answer.headers["bread-run-id"]
            try:
                for chunk in answer.iter_text():
                    *frames, buffer = (buffer + chunk).split("\n\n")
                    seen += decode_sse_ids("".join(f"{frame}\n\n" for frame in frames))
                    if not cut and sum(event["type"] == "TEXT_MESSAGE_CONTENT" for _, event in seen) >= 4:
                        cut = proxy.cut() > 0
            except httpx.HTTPError:
                pass  # the cut
    finally:
        proxy.close()
    assert cut
    return run_id, seen
