"""The HTTP client against real gunicorn servers, through a TCP proxy the test owns: a
connection dropped mid-run, or gone silent, is repaired with nothing lost and nothing twice."""

from __future__ import annotations

import threading

import pytest

from bread_sync.client import create_agent_client, http
from bread_sync.errors import PROTOCOL_DECODE_ERROR, SERVER_UNREACHABLE, BreadError

from .hostile_remote import EndlessRemote
from .servers import free_port
from .tcp_proxy import TCPProxy

TICKS = 30
SLOW = {"count": TICKS, "delayMs": 40}
EXPECTED_TEXT = "".join(f"tick {n} " for n in range(1, TICKS + 1))


@pytest.fixture
def connect():
    """Clients through the facade, closed when the test ends."""
    made = []

    def make(url, **options):
        made.append(create_agent_client(http.transport(url, **options)))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture
def proxy(server):
    proxy = TCPProxy(server.port)
    yield proxy
    proxy.close()


def log_shape(client, run_id):
    frames = list(client.run(run_id))
    return [(f.type, f.seq) for f in frames if f.type != "text:delta"], "".join(
        f.crumb["delta"] for f in frames if f.type == "text:delta"
    )


def read_with(run, after_deltas: int, fault) -> list:
    frames, deltas = [], 0
    for frame in run:
        frames.append(frame)
        if frame.type == "text:delta":
            deltas += 1
            if deltas == after_deltas:
                assert fault() >= 1  # the run's own connection, at least
    return frames


def assert_whole(client, run, frames):
    durable = [(f.type, f.seq) for f in frames if f.type != "text:delta"]
    assert [s for _, s in durable] == sorted({s for _, s in durable}), durable  # each once, in order
    text = "".join(f.crumb["delta"] for f in frames if f.type == "text:delta")
    assert text == EXPECTED_TEXT
    logged, logged_text = log_shape(client, run.run_id)
    assert durable == logged and logged_text == EXPECTED_TEXT
    assert client.transport.get_run(run.run_id)["status"] == "completed"


def test_a_connection_dropped_mid_run_is_resumed_with_nothing_lost_or_twice(server, proxy, connect):
    client = connect(proxy.url)
    run = client.thread().send("slow", SLOW)
    frames = read_with(run, 5, proxy.cut)
    assert proxy.connections >= 2  # it reconnected
    assert_whole(client, run, frames)


def test_a_connection_gone_silent_is_given_up_after_the_heartbeat_timeout(server, proxy, connect):
    client = connect(proxy.url, heartbeat_timeout=1.0)
    run = client.thread().send("slow", SLOW)
    frames = read_with(run, 5, proxy.freeze)
    assert proxy.connections >= 2
    assert_whole(client, run, frames)


def test_a_watched_thread_survives_a_drop(server, proxy, connect):
    client = connect(proxy.url)
    thread = client.thread()
    stop = threading.Event()
    watch = thread.watch(interval=0.05, stop=stop)
    assert next(watch).kind == "snapshot"
    run = thread.send("slow", SLOW)
    run.close()
    crumbs, deltas = [], 0
    for event in watch:
        if event.kind != "crumb":
            continue
        crumbs.append(event.frame)
        deltas += event.frame.type == "text:delta"
        if deltas == 5:
            proxy.cut()
        if event.frame.type == "agent:run:end":
            break
    stop.set()
    watch.close()
    assert_whole(client, run, crumbs)


def test_a_server_that_is_gone_is_a_typed_error(connect):
    client = connect(f"http://127.0.0.1:{free_port()}", reconnect_attempts=2)
    with pytest.raises(BreadError) as caught:
        client.thread().send("echo", "anyone?")
    assert caught.value.code == SERVER_UNREACHABLE


AUTH_CONFIG = "tests.integration.ownership_config:config"
SECRET = "a-stream-token-secret-of-forty-characters!"


@pytest.mark.parametrize("content_type, prefix", [("application/x-ndjson", b""), ("text/event-stream", b"data: ")])
def test_a_stream_line_that_never_ends_is_a_decode_error(content_type, prefix):
    """The client reads streams with the relay's reader: a server's line is bounded for it too."""
    with EndlessRemote(content_type, prefix=prefix) as hostile:
        transport = http.transport(hostile.url, max_line_bytes=100_000)
        try:
            with pytest.raises(BreadError) as refused:
                list(transport.stream_run("run_1"))
        finally:
            transport.close()
    assert refused.value.code == PROTOCOL_DECODE_ERROR and "100000" in refused.value.message


@pytest.fixture
def auth_server(start_server, wire):
    from .client import TRANSPORTS

    return start_server("auth", transport=TRANSPORTS[wire], env={"BREAD_CONFIG": AUTH_CONFIG, "BREAD_SECRET": SECRET})


def test_auth_headers_and_stream_tokens(auth_server, connect):
    from bread_sync.errors import FORBIDDEN, UNAUTHENTICATED

    from .ownership_config import KEYS

    for options in ({}, {"api_key": "not-a-key"}):
        with pytest.raises(BreadError) as caught:
            connect(auth_server.url, **options).thread().send("echo", "let me in")
        assert caught.value.code == UNAUTHENTICATED
    ops = connect(auth_server.url, api_key=KEYS["ops"])
    thread = ops.thread()
    assert thread.send("writer", {"topic": "keys"}).wait_until_idle().status == "paused"
    done = thread.respond({"approved": True})
    assert done.wait_until_idle().output == "Published."
    # The app key may use the run routes, but not reach a run whose id is not its own.
    app = connect(auth_server.url, headers={"Authorization": f"Bearer {KEYS['app']}"})
    with pytest.raises(BreadError) as caught:
        app.transport.get_run(done.run_id)
    assert caught.value.code == FORBIDDEN
    # A stream token opens that run's stream, and only that, for a holder without the key.
    token = ops.transport.mint_stream_token(done.run_id)
    bare = connect(auth_server.url)
    frames = list(bare.transport.stream_run(done.run_id, token=token))
    assert [f.type for f in frames][0] == "agent:run:start" and frames[-1].type == "agent:run:end"
    with pytest.raises(BreadError) as caught:
        bare.transport.stream_run(done.run_id)
    assert caught.value.code == UNAUTHENTICATED


GEVENT_SCRIPT = """
from gevent import monkey

monkey.patch_all()

import sys
import time

import gevent

from bread_sync.client import create_agent_client, http

url = sys.argv[1]


def read(n):
    with create_agent_client(http.transport(url)) as client:
        outcome = client.thread().send("slow", {"count": 10, "delayMs": 100}).wait_until_idle()
        return outcome.status, outcome.text


started = time.monotonic()
jobs = [gevent.spawn(read, n) for n in range(4)]
gevent.joinall(jobs, timeout=20, raise_error=True)
print([job.value for job in jobs], round(time.monotonic() - started, 1))
"""


def test_the_client_is_correct_under_gevent(server):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, server.url], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results, seconds = done.stdout.rsplit(" ", 1)
    text = "".join(f"tick {n} " for n in range(1, 11))
    assert results == repr([("completed", text)] * 4)
    assert float(seconds) < 4 * 1.0  # four 1 s runs read side by side by greenlets, not one after another
