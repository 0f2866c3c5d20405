"""Hostile input, by hand, against real gunicorn servers: what test_guards.py and
test_bad_requests.py do not already try. Bodies that are not JSON objects on every route that
reads one, the default body limit with and without a Content-Length, clients that send a body
slowly or never, and positions past every end (paths and Host headers: test_hostile_paths.py).
Whatever is sent, nothing leaks and the server goes on serving.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote

import pytest

from .client import RUN_END, assert_error_body, fetch, open_stream, passive_url, run
from .servers import Server
from .test_bad_requests import assert_no_leak

DEFAULT_LIMIT = 1_048_576
BODY_TIMEOUT_SECONDS = 1.0

#: Every route that reads a body, and a body that would be accepted there.
BODY_ROUTES = {
    "/agents/echo/run": b'{"input": "hi"}',
    "/pipelines/draft-then-echo/run": b'{"input": {"topic": "t"}}',
    "/resume/cp_missing": b'{"response": {"approved": true}}',
    "/sessions/cleanup": b'{"olderThanDays": 400}',
}
NOT_JSON_OBJECTS = {
    "nested past the recursion limit": b"[" * 50_000 + b"]" * 50_000,
    "an object nested past it": b'{"input": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "NaN": b'{"input": NaN}',
    "Infinity": b'{"input": [Infinity]}',
    "a number too large for a float": b'{"input": 1e999}',
    "null": b"null",
    "a number": b"42",
    "true": b"true",
    "an array of objects": b'[{"input": "hi"}]',
    "cut short": b'{"input": "hi"',
    "two objects": b'{"input": 1}{"input": 2}',
    "a NUL byte": b'{"input": "\x00"}',
}


# -- raw HTTP: what a careless or hostile client sends, byte for byte ------------------------------


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def raw_request(server: Server, head: bytes, body: bytes = b"", seconds: float = 10.0) -> Raw:
    """Send ``head`` (request line and headers, no final blank line) and ``body``; read the
    answer to the end (the request asks the server to close)."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=seconds) as sock:
        sock.sendall(head + b"\r\nConnection: close\r\n\r\n" + body)
        return read_answer(sock)


def read_answer(sock: socket.socket) -> Raw:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    if headers.get("Transfer-Encoding") == "chunked":
        body = dechunk(body)
    return Raw(int(lines[0].split()[1]), headers, body)


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        if int(size, 16) == 0:
            break
        out, data = out + data[: int(size, 16)], data[int(size, 16) + 2 :]
    return out


def serves(server: Server) -> None:
    """The server still answers, promptly."""
    began = time.monotonic()
    answer = raw_request(server, b"GET /agents HTTP/1.1\r\nHost: localhost")
    assert answer.status == 200 and time.monotonic() - began < 2.0


@pytest.fixture
def sse(pool) -> Server:
    return pool.primary("http-sse")


@pytest.fixture(scope="module")
def impatient(tmp_path_factory):
    """A server that waits at most a second for a request body."""
    home = tmp_path_factory.mktemp("impatient")
    env = {"BREAD_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT_SECONDS)}
    server = Server("impatient", home, home / "bread.db", env=env).start()
    yield server
    server.stop()


# -- bodies -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", NOT_JSON_OBJECTS)
def test_a_body_that_is_not_a_json_object_is_400_on_every_route_that_reads_one(sse, case):
    for path in BODY_ROUTES:
        body = NOT_JSON_OBJECTS[case]
        head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}".encode()

        answer = raw_request(sse, head, body)

        assert answer.status == 400, (path, answer.status, answer.body[:200])
        assert answer.json()["error"]["code"] == "INVALID_REQUEST"
        assert_no_leak(answer.body)
    serves(sse)


def test_each_route_takes_its_good_body(http, sse):
    """The counterpart: the same routes answer a good body normally."""
    for path, body in BODY_ROUTES.items():
        answer = fetch(http, "POST", f"{sse.url}{path}", "sse", content=body)
        assert answer.status == 200, (path, answer.status, answer.text[:200])


def padded(size: int) -> bytes:
    body = b'{"input": "hi"}'
    return body + b" " * (size - len(body))


def test_the_default_limit_holds_with_and_without_a_content_length(http, sse):
    url = f"{sse.url}/agents/echo/run"
    exact = fetch(http, "POST", url, "sse", content=padded(DEFAULT_LIMIT))
    over = fetch(http, "POST", url, "sse", content=padded(DEFAULT_LIMIT + 1))
    chunked = fetch(http, "POST", url, "sse", content=iter([padded(DEFAULT_LIMIT + 1)[i : i + 65536]
                                                            for i in range(0, DEFAULT_LIMIT + 1, 65536)]))  # fmt: skip
    lying = raw_request(sse, b"POST /agents/echo/run HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999")

    assert exact.status == 200 and exact.last_crumb.data["output"] == "hi"
    assert_error_body(over, 413, "BODY_TOO_LARGE")
    assert "transfer-encoding" in chunked.request_headers
    assert_error_body(chunked, 413, "BODY_TOO_LARGE")
    assert lying.status == 413 and lying.json()["error"]["code"] == "BODY_TOO_LARGE"
    serves(sse)


# -- slow clients -----------------------------------------------------------------------------------


class SlowBody(threading.Thread):
    """A client that sends its headers, then its body a byte every ``pause`` seconds, stopping
    after ``send`` bytes (all of them by default); ``answer`` is what came back."""

    def __init__(self, server: Server, body: bytes, pause: float, send: int | None = None):
        super().__init__(daemon=True)
        self.server, self.body, self.pause = server, body, pause
        self.send = len(body) if send is None else send
        self.answer: Raw | None = None
        self.took = 0.0

    def run(self) -> None:
        began = time.monotonic()
        with socket.create_connection(("127.0.0.1", port_of(self.server)), timeout=30) as sock:
            head = f"POST /agents/echo/run HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(self.body)}"
            sock.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n")
            for byte in self.body[: self.send]:
                sock.sendall(bytes([byte]))
                time.sleep(self.pause)
            self.answer = read_answer(sock)
        self.took = time.monotonic() - began


def test_a_trickled_body_is_served_and_holds_up_no_one(http, impatient):
    body = b'{"input": "slowly"}'
    slow = SlowBody(impatient, body, pause=BODY_TIMEOUT_SECONDS / len(body) / 3)  # within the deadline
    slow.start()
    waits = []
    while slow.is_alive() and len(waits) < 20:
        began = time.monotonic()
        assert http.get(f"{impatient.url}/health").status_code == 200
        waits.append(time.monotonic() - began)
    slow.join(10)

    assert slow.answer.status == 200 and b"slowly" in slow.answer.body
    assert waits and max(waits) < 0.5, waits


def test_a_stalled_body_times_out_with_408_and_holds_up_no_one(http, impatient):
    stalled = SlowBody(impatient, b'{"input": "never finished"}', pause=0.01, send=5)
    stalled.start()
    time.sleep(0.2)
    streamed = run(http, impatient.url, "echo", {"input": "meanwhile"}, "sse")  # served while it stalls
    stalled.join(BODY_TIMEOUT_SECONDS + 5)

    assert streamed.last_crumb.data["output"] == "meanwhile"
    assert stalled.answer.status == 408, stalled.answer
    assert stalled.answer.json() == {
        "error": {"code": "REQUEST_TIMEOUT", "message": stalled.answer.json()["error"]["message"]}
    }
    assert BODY_TIMEOUT_SECONDS <= stalled.took < BODY_TIMEOUT_SECONDS + 3
    assert "Traceback" not in impatient.log(limit=10**9)


def test_a_client_that_leaves_mid_body_leaves_no_trace(impatient):
    log_before = len(impatient.log(limit=10**9))
    with socket.create_connection(("127.0.0.1", port_of(impatient)), timeout=5) as sock:
        sock.sendall(b'POST /agents/echo/run HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n{"inp')
    serves(impatient)
    time.sleep(0.2)
    assert "Traceback" not in impatient.log(limit=10**9)[log_before:]


# -- positions past every end ------------------------------------------------------------------------

BAD_POSITIONS = ["-1", "-9223372036854775808", str(2**63), str(2**64), "1e3", "0x10", "+1", "1.0", " ", "½", "٣"]


def test_a_position_that_is_not_a_seq_is_400(http, sse):
    finished = run(http, sse.url, "echo", {"input": "done"}, "sse")
    for position in BAD_POSITIONS:
        in_query = raw_request(sse, f"GET /runs/{finished.run_id}/stream?after={quote(position)} HTTP/1.1"
                                    "\r\nHost: localhost".encode())  # fmt: skip
        in_header = raw_request(sse, f"GET /runs/{finished.run_id}/stream HTTP/1.1\r\nHost: localhost"
                                     f"\r\nLast-Event-ID: {position}".encode())  # fmt: skip
        for answer in (in_query, in_header):
            assert answer.status == 400, (position, answer.status, answer.body[:100])
            assert answer.json()["error"]["code"] == "INVALID_REQUEST"


def test_the_largest_seq_is_204_for_a_finished_run_and_400_for_a_running_one(http, sse):
    largest = str(2**63 - 1)
    finished = run(http, sse.url, "echo", {"input": "done"}, "sse")
    assert fetch(http, "GET", passive_url(sse.url, finished.run_id, largest), "sse").status == 204

    with open_stream(
        http, "POST", f"{sse.url}/agents/slow/run", "sse", body={"input": {"count": 40, "delayMs": 25}}
    ) as live:
        live.until(lambda e: e.type == "text:delta", "a tick")
        for headers, after in (({"Last-Event-ID": largest}, None), ({}, largest), ({}, "2")):
            # A tail past the log's end would wait beyond the run's end for a frame that cannot come.
            started = time.monotonic()
            answer = fetch(http, "GET", passive_url(sse.url, live.run_id, after), "sse", headers=headers, seconds=5)
            assert_error_body(answer, 400, "INVALID_REQUEST")
            assert time.monotonic() - started < 2
        caught_up = fetch(http, "GET", passive_url(sse.url, live.run_id, 1), "sse", seconds=10)
        live.rest()
    assert caught_up.last_crumb.type == RUN_END and live.last_crumb.type == RUN_END


# -- a web page of another site ---------------------------------------------------------------------


@pytest.mark.parametrize("sent", ["Origin: https://evil.example", "Sec-Fetch-Site: cross-site"])
def test_a_cross_site_write_is_refused_before_its_body_arrives(sse, sent):
    """The 403 comes before the body is read: the body is never sent here, and the server (which
    waits a minute for a body it reads) answers at once."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port_of(sse)), timeout=10) as sock:
        sock.sendall(f"POST /sessions/cleanup HTTP/1.1\r\nHost: localhost\r\n{sent}\r\nContent-Length: 100\r\n"
                     "Content-Type: text/plain\r\nConnection: close\r\n\r\n".encode())  # fmt: skip
        answer = read_answer(sock)
    assert answer.status == 403 and answer.json() == {"error": "Forbidden"}
    assert time.monotonic() - began < 5
    serves(sse)


def test_a_cross_site_refusal_is_told_in_the_servers_log_once(start_server):
    """The 403 body says nothing more (the spec fixes it): the worker's log names the origin and
    the setting that would allow it, once however often that origin is refused (one worker). A
    server of its own: the warnings a process logs are bounded, and other tests send origins."""
    server = start_server("cross-site")
    origin = "http://localhost:5173"
    head = f"GET /sessions HTTP/1.1\r\nHost: localhost:3000\r\nOrigin: {origin}".encode()
    for _ in range(3):
        answer = raw_request(server, head)
        assert answer.status == 403 and answer.body == b'{"error":"Forbidden"}\n'
    # The worker writes its line (unbuffered, to the log file) before it answers.
    lines = [line for line in server.log().splitlines() if f"from Origin {origin!r}" in line]
    assert len(lines) == 1, server.log()
    assert "[WARNING]" in lines[0] and "ServerSettings(cors_origins=[...])" in lines[0]


#: Chunk sizes gunicorn cannot parse: not hex, negative, an extension that never ends.
MALFORMED_CHUNK_SIZES = [b"zz", b"-5", b"5;" + b"x" * 10_000]


@pytest.mark.parametrize("size", MALFORMED_CHUNK_SIZES)
def test_a_malformed_chunked_body_is_400_and_leaves_no_traceback(sse, size):
    assert_malformed_chunks_refused(sse, size)
    serves(sse)


def assert_malformed_chunks_refused(server: Server, size: bytes, headers: str = "") -> None:
    """A chunked body whose first chunk size is ``size``: 400 ``INVALID_REQUEST``, no traceback."""
    log_before = len(server.log(limit=10**9))
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        head = f"POST /agents/echo/run HTTP/1.1\r\nHost: localhost\r\n{headers}Transfer-Encoding: chunked\r\n\r\n"
        sock.sendall(head.encode() + size + b"\r\n{}\r\n0\r\n\r\n")
        answer = read_answer(sock)
    assert answer.status == 400, answer
    assert answer.json() == {"error": {"code": "INVALID_REQUEST", "message": answer.json()["error"]["message"]}}
    assert "Traceback" not in server.log(limit=10**9)[log_before:]
