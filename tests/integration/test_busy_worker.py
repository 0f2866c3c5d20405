"""One huge run never holds its worker: ``GET /health`` on the same gevent worker answers while
the run streams to a client that keeps up (so no write of the response ever blocks)."""

from __future__ import annotations

import json
import socket
import threading
import time

from .client import new_client

#: One-letter words: about 500,000 text deltas (70-90 MB of response) from a body within 1 MiB.
WORDS = 500_000
#: Generous for a loaded machine: a worker that gives way every few milliseconds answers in
#: milliseconds, one that does not answers when the whole response is written (seconds).
HEALTH_SECONDS = 1.0
MAX_PROBES = 5_000
STREAM_SECONDS = 120.0
ENDED = b'"agent:run:end"'


class FastReader:
    """A streaming request read on a thread of its own as fast as the socket gives it; only its
    size, its status line and whether the run's end came are kept."""

    def __init__(self, port: int, path: str, body: dict):
        data = json.dumps(body).encode()
        self.request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        self.port = port
        self.head, self.tail, self.received, self.ended = b"", b"", 0, False
        self.error: BaseException | None = None
        self.streaming = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=STREAM_SECONDS) as sock:
                sock.sendall(self.request)
                while data := sock.recv(1 << 20):
                    self.received += len(data)
                    self.head = self.head or data[:200]
                    self.ended = self.ended or ENDED in self.tail + data
                    self.tail = data[-64:]
                    self.streaming.set()
        except BaseException as exc:  # reported on the test's thread
            self.error = exc
        finally:
            self.streaming.set()


def test_health_answers_while_one_huge_run_streams_to_a_fast_client(pool):
    server = pool.primary("http-chunked")
    reader = FastReader(server.port, "/agents/echo/run", {"input": "a " * WORDS})
    reader.thread.start()
    assert reader.streaming.wait(STREAM_SECONDS), "the run sent nothing"
    latencies = []
    with new_client() as http:
        for _ in range(MAX_PROBES):
            if not reader.thread.is_alive():
                break
            started = time.monotonic()
            assert http.get(f"{server.url}/health").status_code == 200
            latencies.append(time.monotonic() - started)
    reader.thread.join(STREAM_SECONDS)

    assert reader.error is None and not reader.thread.is_alive()
    assert reader.head.startswith(b"HTTP/1.1 200"), reader.head
    assert reader.ended and reader.tail.endswith(b"0\r\n\r\n"), reader.tail
    assert reader.received > 50_000_000  # every delta came, one event each
    assert latencies, "the response ended before the first probe"
    assert max(latencies) < HEALTH_SECONDS, f"the slowest of {len(latencies)} answers took {max(latencies):.2f} s"
