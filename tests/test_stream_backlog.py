"""A stream's bound: the inbox of a tail whose consumer stopped taking holds at most its
backlog, the tail ends with ``Behind`` (its client's connection shut), and a reconnect from
the last seq it delivered gets every durable crumb of the log, none twice."""

from __future__ import annotations

import socket

import pytest
from flask import Flask

from bread_sync import ServerSettings, create_bread
from bread_sync.crumbs import AGENT_RUN_END, Frame, is_delta_frame
from bread_sync.protocols.a2a import a2a_server
from bread_sync.server import BreadSync, create_server
from bread_sync.tails import Behind
from bread_sync.tails.inbox import BEHIND, Inbox
from bread_sync.wire import SSE_BEHIND

from .replica_config import config as stepper_config

BACKLOG = 20
STEPS = {"count": 60, "delayMs": 0}
TICKS = {"count": 300, "delayMs": 0}


@pytest.fixture
def bread():
    bread = create_bread(stepper_config().model_copy(update={"store": "memory", "transport": "http-sse"}))
    yield bread
    bread.close()


@pytest.fixture
def connection():
    """Both ends of a connected pair: the server's end (the inbox's) and the client's."""
    server_end, client_end = socket.socketpair()
    client_end.settimeout(5)
    yield server_end, client_end
    server_end.close()
    client_end.close()


def test_an_inbox_past_its_bound_takes_nothing_more_and_its_consumer_finds_behind_last():
    inbox = Inbox()
    inbox.bound(3)
    for item in range(10):
        inbox.put(item)
    assert inbox.take(0) == [0, 1, 2, BEHIND]
    inbox.put(10)
    assert inbox.take(0.01) == []


def test_an_inbox_without_a_bound_takes_everything():
    inbox = Inbox()
    for item in range(50_000):
        inbox.put(item)
    assert inbox.take(0) == list(range(50_000))  # all of them, and no BEHIND after


def test_an_inbox_falling_behind_shuts_its_clients_connection(connection):
    server_end, client_end = connection
    inbox = Inbox(server_end)
    inbox.bound(2)
    for item in range(3):
        inbox.put(item)
    assert client_end.recv(1) == b""  # the client reads the end of the stream
    with pytest.raises(OSError):  # a writer blocked in a send fails, and ends its response
        server_end.sendall(b"x")


def test_an_inbox_whose_stream_is_over_leaves_the_connection_to_the_clients_next_request(connection):
    server_end, client_end = connection
    inbox = Inbox(server_end)
    inbox.bound(2)
    inbox.forget_connection()
    for item in range(3):
        inbox.put(item)
    server_end.sendall(b"next")
    assert client_end.recv(4) == b"next"


def test_a_tail_whose_consumer_stopped_holds_its_backlog_and_a_reconnect_misses_no_durable_crumb(bread):
    run = bread.run("stepper", STEPS)
    crumbs = iter(run)
    next(crumbs)  # the run has begun
    stalled = bread.tail(run.run_id, 0, batched=True, backlog=BACKLOG)
    first = list(next(stalled))  # its replay; then its consumer takes nothing while the run goes on
    for _ in crumbs:
        assert len(stalled.inbox._items) <= 1 + BACKLOG + 1  # what it subscribed to, its bound, BEHIND
    with pytest.raises(Behind):
        for items in stalled:
            first += items
    assert first and first[-1].type != AGENT_RUN_END
    again = [frame for items in bread.tail(run.run_id, first[-1].seq, batched=True) for frame in items]
    assert again[-1].type == AGENT_RUN_END
    log = bread.store.get_crumbs(run.run_id)
    assert durable_seqs(first) + durable_seqs(again) == durable_seqs(log)


def test_a_stream_that_fell_behind_says_so_and_ends_before_its_run(bread):
    bread.config.server = ServerSettings(max_stream_backlog=BACKLOG)
    client = create_server(bread).test_client()
    run = bread.run("stepper", STEPS)
    crumbs = iter(run)
    next(crumbs)  # the run has begun
    response = client.get(f"/runs/{run.run_id}/stream", headers={"Accept": "text/event-stream"}, buffered=False)
    body = iter(response.response)
    opening = next(body) + next(body)  # its prelude and its replay; then its client stops reading
    for _ in crumbs:
        pass
    rest = b"".join(body)
    assert rest.endswith(SSE_BEHIND)
    assert b"agent:run:end" not in opening + rest


def durable_seqs(frames: list[Frame]) -> list[int]:
    """The seqs of the crumbs other than text, in order (the text of the segment in flight may
    come again, aggregated, after a reconnect: the dedup rule)."""
    return [frame.seq for frame in frames if not is_delta_frame(frame)]


def test_a_request_that_reads_its_run_to_answer_at_its_end_has_no_bound(bread):
    """A2A's blocking message/send folds the run's events in the request: nothing stalls it,
    so a backlog of one frame neither ends its tail nor cuts its connection."""
    bread.config.server = ServerSettings(max_stream_backlog=1)
    bread.config.plugins = [a2a_server("slow")]
    client = create_server(bread).test_client()
    message = {"role": "user", "parts": [{"kind": "data", "data": TICKS}], "messageId": "m", "kind": "message"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}

    task = client.post("/a2a", json=body).get_json()["result"]

    assert task["status"]["state"] == "completed"
    text = "".join(part["text"] for artifact in task["artifacts"] for part in artifact["parts"])
    assert text.split()[-2:] == ["tick", str(TICKS["count"])]


def test_a_reconnects_replay_of_what_the_transport_keeps_does_not_count_against_its_bound(bread):
    """A bound below the frames the transport keeps of a run would end every reconnect before
    its first byte: the frames its subscription replays are not counted."""
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")  # the transport keeps its frames
    tail = bread.tail(paused.run_id, 0, batched=True, backlog=1, heartbeat=0.05)
    frames = []
    while (items := next(tail)) is not None:  # its replay, then what is live: nothing, a heartbeat
        frames += items
    tail.close()
    assert durable_seqs(frames) == durable_seqs(bread.store.get_crumbs(paused.run_id))


def test_a_tail_that_reached_its_end_ends_so_whatever_comes_after(bread):
    """Frames put after the pause a tail ends at (a quick resume) may overflow its inbox: the
    tail still ends as a stream that reached its end, not as one that fell behind."""
    run = bread.run("writer", {"topic": "bread"})
    crumbs = iter(run)
    next(crumbs)  # the run has begun; the tail follows it live from here
    tail = bread.tail(run.run_id, 0, batched=True, through_pause=False)
    seen = list(next(tail))
    paused = list(crumbs)[-1]
    while paused["type"] not in [frame.type for frame in seen]:
        seen += next(tail) or []
    tail.inbox.bound(1)  # the resume's crumbs overflow it
    bread.resume(bread.store.get_run(run.run_id)["checkpointId"], {"approved": True}, mode="sync")
    with pytest.raises(StopIteration):
        next(tail)


def test_a_head_request_never_shuts_the_connection_it_came_on(bread, connection):
    """A HEAD of a stream writes no body: its tail, left unread, must not cut the connection
    (kept alive for the client's next request) when its run goes on past the bound."""
    server_end, client_end = connection
    bread.config.server = ServerSettings(max_stream_backlog=BACKLOG)
    client = create_server(bread).test_client()
    run = bread.run("stepper", STEPS)
    crumbs = iter(run)
    next(crumbs)
    head = client.head(f"/runs/{run.run_id}/stream", environ_base={"gunicorn.socket": server_end})
    assert head.status_code == 200
    for _ in crumbs:
        pass
    server_end.sendall(b"next")
    assert client_end.recv(4) == b"next"


@pytest.mark.parametrize("backlog", [0, "100", None, True])
def test_a_flask_apps_backlog_that_is_not_a_number_of_frames_is_a_config_error(bread, backlog):
    app = Flask("host")
    app.config["BREAD_SYNC_MAX_STREAM_BACKLOG"] = backlog
    with pytest.raises(ValueError, match="BREAD_SYNC_MAX_STREAM_BACKLOG"):
        BreadSync(app, bread)
