"""A client that stops reading its stream: its writer blocks, the run goes on, and the stream's
inbox fills to its bound (``BREAD_MAX_STREAM_BACKLOG``). The server then shuts the connection,
so the stream ends before its run; the client reconnects with its Last-Event-ID and gets every
durable crumb of the log that it lacks, none twice."""

from __future__ import annotations

import json
import socket

from ..waiting import wait_for
from .client import new_client

FLOOD = "tests.integration.backlog_config:config"
#: About 25 MB and 6,000 frames: more than the kernel's buffers take and the backlog after them.
STEPS = 1000
#: Above the 1,024 frames the transport keeps of a run, which a reconnect's tail is given at once.
BACKLOG = 2000
#: A receive buffer this small keeps the kernel's share of the stalled stream small.
RECEIVE_BUFFER = 4096
DEADLINE_SECONDS = 60.0
TEXT_DELTA = "text:delta"


def test_a_client_that_stops_reading_is_cut_off_and_catches_up_from_the_log(start_server):
    server = start_server("stalled", env={"BREAD_CONFIG": FLOOD, "BREAD_MAX_STREAM_BACKLOG": str(BACKLOG)})
    with stalled_stream(server.port, "/agents/flood/run", {"input": {"steps": STEPS}}) as sock:
        head = read_until(sock, b"\r\n\r\n")  # the response began; from here the client reads nothing
        run_id = header(head, "Bread-Run-Id")
        wait_for_status(server.url, run_id, "completed")
        first = parse_events(read_to_the_end(sock))
    assert first and all(kind != "agent:run:end" for _, kind in first), "the stream was not cut off"
    last_id = first[-1][0]
    with new_client() as http:
        again = sse_events(http, f"{server.url}/runs/{run_id}/stream", {"Last-Event-ID": str(last_id)})
        log = sse_events(http, f"{server.url}/runs/{run_id}/stream", {})
    assert again[-1][1] == "agent:run:end"
    assert durable_ids(first) + durable_ids(again) == durable_ids(log)
    assert "[ERROR]" not in server.log(), "the cut-off logged an error"


class stalled_stream:
    """A raw HTTP/1.0 request (a body that ends with the connection: no chunks to undo) on a
    socket with a small receive buffer."""

    def __init__(self, port: int, path: str, body: dict):
        data = json.dumps(body).encode()
        self.request = (
            f"POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        self.port = port

    def __enter__(self) -> socket.socket:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        self.sock.settimeout(DEADLINE_SECONDS)
        self.sock.connect(("127.0.0.1", self.port))
        self.sock.sendall(self.request)
        return self.sock

    def __exit__(self, *exc_info: object) -> None:
        self.sock.close()


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(1)
        assert chunk, f"the connection ended before {marker!r}: {data!r}"
        data += chunk
    return data


def read_to_the_end(sock: socket.socket) -> bytes:
    """Everything left, to the end of the connection (a timeout fails the test)."""
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def header(head: bytes, name: str) -> str:
    for line in head.decode().split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    raise AssertionError(f"no {name} header in {head!r}")


def wait_for_status(url: str, run_id: str, status: str) -> None:
    with new_client() as http:
        wait_for(lambda: http.get(f"{url}/runs/{run_id}").json().get("status") == status, DEADLINE_SECONDS,
                 f"run {run_id} {status}")  # fmt: skip


def parse_events(body: bytes) -> list[tuple[int, str]]:
    """The (id, crumb type) of each whole SSE event with an id (a cut may leave half of one)."""
    events = []
    for block in body.decode(errors="replace").split("\n\n")[:-1]:
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line and not line.startswith(":"))
        if "id" in fields and "data" in fields:
            events.append((int(fields["id"]), json.loads(fields["data"])["type"]))
    return events


def sse_events(http, url: str, headers: dict[str, str]) -> list[tuple[int, str]]:
    response = http.get(url, headers={"Accept": "text/event-stream", **headers}, timeout=DEADLINE_SECONDS)
    assert response.status_code == 200
    return parse_events(response.content)


def durable_ids(events: list[tuple[int, str]]) -> list[int]:
    """The ids of the crumbs other than text (the text of the segment in flight may come again,
    aggregated, after a reconnect: the dedup rule)."""
    return [seq for seq, kind in events if kind != TEXT_DELTA]
