"""A remote run's stream, read by the relay against a scripted remote server (the outside world):
what counts as the remote still answering."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bread_sync.crumbs import AGENT_RUN_END, AGENT_RUN_START, TEXT_DELTA
from bread_sync.errors import PROTOCOL_DECODE_ERROR, RUN_INTERRUPTED, BreadError
from bread_sync.transports import http_chunked, http_sse
from bread_sync.wire import NDJSON, SSE
from tests.integration.hostile_remote import EndlessRemote

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class ScriptedRemote(threading.Thread):
    """Answers its first request with the run's first frame, then ``heartbeats`` heartbeats 0.1 s
    apart, then drops the connection; every later request (the passive stream) with the rest."""

    def __init__(self, frames: list[bytes], heartbeats: int, whole: bool = False):
        super().__init__(daemon=True)
        self.frames, self.heartbeats, self.whole = frames, heartbeats, whole
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.requests.append(conn.recv(65536).split(b"\r\n", 1)[0])
                if self.whole:
                    conn.sendall(HEAD + b"".join(chunk(f) for f in self.frames) + b"0\r\n\r\n")
                elif len(self.requests) == 1:
                    conn.sendall(HEAD + chunk(self.frames[0]))
                    for _ in range(self.heartbeats):
                        time.sleep(0.1)
                        conn.sendall(chunk(b"\n"))
                else:
                    conn.sendall(HEAD + b"".join(chunk(f) for f in self.frames[1:]) + b"0\r\n\r\n")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def echo_frames(make_bread):
    bread = make_bread()
    run = bread.run("echo", "hello there")
    list(run)
    return run.run_id, [NDJSON.frame(f) for f in bread.store.get_crumbs(run.run_id)]


def relayed(url: str, run_id: str, unreachable_seconds: float, heartbeat_timeout: float = 45.0) -> list[str]:
    agent = http_chunked.remote_agent(url=url, agent_id="echo", unreachable_seconds=unreachable_seconds,
                                      heartbeat_timeout=heartbeat_timeout)  # fmt: skip
    return [frame.type for frame in agent.start(run_id, "hello there", "s1", None)]


def test_heartbeats_count_as_the_remote_answering(echo_frames):
    """Silent but for heartbeats for longer than ``unreachable_seconds``, then dropped: the relay
    re-opens the stream instead of giving the remote up."""
    run_id, frames = echo_frames
    remote = ScriptedRemote(frames, heartbeats=8)
    remote.start()
    try:
        types = relayed(remote.url, run_id, unreachable_seconds=0.3)
    finally:
        remote.close()
    assert types[0] == AGENT_RUN_START and types[-1] == AGENT_RUN_END and TEXT_DELTA in types
    assert remote.requests[1].startswith(b"GET /runs/")


def test_a_remote_silent_past_unreachable_seconds_is_given_up(echo_frames):
    """Connections are taken (the listener's backlog) but nothing ever answers: each read times
    out after the heartbeat timeout, and past ``unreachable_seconds`` the relay gives up."""
    run_id, _ = echo_frames
    with socket.create_server(("127.0.0.1", 0), backlog=64) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(BreadError) as given_up:
            relayed(url, run_id, unreachable_seconds=0.5, heartbeat_timeout=0.2)
    assert given_up.value.code == RUN_INTERRUPTED and "stopped answering" in given_up.value.message
    assert time.monotonic() - started < 10


def test_a_closed_stream_hands_on_nothing_more_though_more_was_read(echo_frames):
    """close() (a cancel) stops the relay at once, even where the rest of the run's bytes came
    in with its first read."""
    run_id, frames = echo_frames
    remote = ScriptedRemote(frames, heartbeats=0, whole=True)
    remote.start()
    try:
        stream = http_chunked.remote_agent(url=remote.url, agent_id="echo").start(run_id, "hello there", "s1", None)
        relayed = iter(stream)
        assert next(relayed).type == AGENT_RUN_START
        stream.close()
        assert list(relayed) == []
    finally:
        remote.close()


@pytest.mark.parametrize("url", ["http://user:secret@127.0.0.1:1", "http://127.0.0.1:1/?key=k", "ftp://127.0.0.1/"])
def test_a_url_that_would_lose_what_it_says_is_refused(url):
    with pytest.raises(ValueError):
        http_chunked.remote_agent(url=url, agent_id="echo")


BOUND = 100_000


@pytest.mark.parametrize("make, wire, prefix", [(http_chunked, NDJSON, b""), (http_sse, SSE, b"data: ")])
def test_a_stream_line_that_never_ends_is_a_decode_error_not_the_callers_memory(make, wire, prefix):
    with EndlessRemote(wire.content_type, prefix=prefix) as remote:
        agent = make.remote_agent(url=remote.url, agent_id="echo", max_line_bytes=BOUND)
        stream = agent.start("run_1", "hello there", "s1", None)
        with pytest.raises(BreadError) as refused:
            list(stream)
    assert refused.value.code == PROTOCOL_DECODE_ERROR and str(BOUND) in refused.value.message
    assert len(remote.requests) == 1  # not re-opened: a remote that sends this is not sending crumbs


@pytest.mark.parametrize(
    "status, call",
    [
        (200, lambda agent: agent.describe()),
        (200, lambda agent: agent.cancel("run_1")),
        (200, lambda agent: agent.run_status("run_1")),
        (500, lambda agent: agent.cancel("run_1")),  # an error's body
        (500, lambda agent: list(agent.start("run_1", "hi", "s1", None))),  # a run route's refusal
    ],
)
def test_an_answer_read_whole_that_never_ends_is_a_decode_error(status, call):
    with EndlessRemote("application/json", status=status) as remote:
        agent = http_chunked.remote_agent(url=remote.url, agent_id="echo", max_body_bytes=BOUND)
        with pytest.raises(BreadError) as refused:
            call(agent)
    assert refused.value.code == PROTOCOL_DECODE_ERROR and str(BOUND) in refused.value.message
