"""A thread-free HTTP/1.1 client for the benchmarks: raw non-blocking sockets and one selector.

One process holds thousands of streams with it, and it costs the same for every server it
talks to. It decodes ``Transfer-Encoding: chunked`` itself and keeps each chunk whole: gunicorn
writes one chunk per item a WSGI app yields, and bread_sync yields one item per write (an event,
or the events its stream had at once). A connection counts events, not chunks: the blank lines
that end SSE events, the lines of NDJSON, one per chunk of anything else. Every wait is bounded
by a deadline.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

RECV_BYTES = 256 * 1024
HEAD, SIZE, DATA, TRAILER, LENGTH, UNTIL_CLOSE, DONE = range(7)


def request(method: str, port: int, path: str, body: Any = None, headers: dict[str, str] | None = None) -> bytes:
    """The bytes of one request; a ``body`` that is not bytes is sent as JSON."""
    data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    if data or method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


class Conn:
    """One request and its streamed response.

    ``record``: keep every chunk (``chunks``). ``stamp``: the wall-clock time (``time.time()``)
    each event arrived (``stamps``: its chunk's time). ``count``: the events so far. ``watch``:
    bytes whose arrival in a chunk sets ``seen``.
    ``started``, ``first`` and ``finished`` are ``perf_counter()`` times: the request began
    (before connecting), its first chunk was complete, its last chunk arrived.
    """

    def __init__(self, port: int, data: bytes, *, record: bool = False, stamp: bool = False, watch: bytes = b""):
        self.port = port
        self.out = memoryview(data)
        self.record, self.stamp, self.watch = record, stamp, watch
        self.chunks: list[bytes] = []
        self.stamps: list[float] = []
        self.count = 0
        self.bytes = 0
        self.seen = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.state = HEAD
        self.error: str | None = None
        self.started = time.perf_counter()
        self.first: float | None = None
        self.finished: float | None = None
        self._buf = bytearray()
        self._need = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))

    @property
    def done(self) -> bool:
        return self.state == DONE or self.error is not None

    def close(self) -> None:
        self.sock.close()

    def feed(self, data: bytes, now: float) -> None:
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        while True:
            state = self.state
            if state == DATA:
                if end - pos < self._need + 2:
                    break
                self._chunk(bytes(buf[pos : pos + self._need]), now)
                pos += self._need + 2
                self.state = SIZE
            elif state == SIZE:
                i = buf.find(b"\r\n", pos)
                if i < 0:
                    break
                self._need = int(bytes(buf[pos:i]).split(b";")[0], 16)
                pos = i + 2
                self.state = DATA if self._need else TRAILER
            elif state == HEAD:
                i = buf.find(b"\r\n\r\n", pos)
                if i < 0:
                    break
                self._head(bytes(buf[pos:i]))
                pos = i + 4
            elif state == TRAILER:  # trailer lines, then an empty line
                i = buf.find(b"\r\n", pos)
                if i < 0:
                    break
                last, pos = i == pos, i + 2
                if last:
                    self._end(now)
            elif state == LENGTH:
                if not self._need:
                    self._end(now)
                    continue
                if pos >= end:
                    break
                take = min(self._need, end - pos)
                self.bytes, pos, self._need = self.bytes + take, pos + take, self._need - take
                if not self._need:
                    self._end(now)
            else:  # UNTIL_CLOSE, or DONE with bytes past the response: count them, keep nothing
                self.bytes += end - pos
                pos = end
                break
        del buf[:pos]

    def _head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ", 2)[1])
        for line in lines[1:]:
            key, _, value = line.partition(":")
            self.headers[key.strip().lower()] = value.strip()
        self._events_in = _event_counter(self.headers.get("content-type", ""))
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            self.state = SIZE
        elif "content-length" in self.headers:
            self._need = int(self.headers["content-length"])
            self.state = LENGTH
        elif self.status in (204, 304):
            self._need, self.state = 0, LENGTH
        else:
            self.state = UNTIL_CLOSE

    def _chunk(self, chunk: bytes, now: float) -> None:
        events = self._events_in(chunk)
        self.count += events
        self.bytes += len(chunk)
        if self.first is None:
            self.first = now
        if self.record:
            self.chunks.append(chunk)
        if self.stamp:
            self.stamps += [time.time()] * events
        if self.watch and not self.seen and self.watch in chunk:
            self.seen = True

    def _end(self, now: float) -> None:
        self.state = DONE
        self.finished = now

    def body(self) -> bytes:
        return b"".join(self.chunks)


def _event_counter(content_type: str) -> Callable[[bytes], int]:
    """How many events a chunk of this type holds (at least one)."""
    if content_type.startswith("text/event-stream"):
        return lambda chunk: chunk.count(b"\n\n") or chunk.count(b"\r\n\r\n") or 1
    if "ndjson" in content_type:
        return lambda chunk: chunk.count(b"\n") or 1
    return lambda chunk: 1


class Client:
    """Drives many :class:`Conn` at once on one selector, in this thread."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()

    def open(self, conns: Iterable[Conn]) -> list[Conn]:
        conns = list(conns)
        for conn in conns:
            self.selector.register(conn.sock, selectors.EVENT_WRITE, conn)
        return conns

    def pump(self, conns: list[Conn], until: Callable[[Conn], bool] = lambda c: c.done, timeout: float = 30.0) -> bool:
        """Serve every registered connection until ``until`` holds for each of ``conns`` (or
        it failed); False if the deadline came first."""
        waiting = {conn for conn in conns if not (until(conn) or conn.error)}
        deadline = time.monotonic() + timeout
        select, recv_bytes = self.selector.select, RECV_BYTES
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, events in select(min(left, 1.0)):
                conn: Conn = key.data
                if events & selectors.EVENT_WRITE:
                    self._send(conn)
                    continue
                try:
                    data = conn.sock.recv(recv_bytes)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    data, conn.error = b"", str(exc)
                now = time.perf_counter()
                if data:
                    conn.feed(data, now)
                else:
                    self._closed(conn, now)
                if conn in waiting and (until(conn) or conn.error):
                    waiting.discard(conn)
                if conn.done:
                    self._forget(conn)
        return True

    def _send(self, conn: Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            conn.error = str(exc)
            self._forget(conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            self.selector.modify(conn.sock, selectors.EVENT_READ, conn)

    def _closed(self, conn: Conn, now: float) -> None:
        if conn.state == UNTIL_CLOSE:
            conn._end(now)
        elif conn.state != DONE:
            conn.error = "the server closed the connection mid-response"

    def _forget(self, conn: Conn) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.close()

    def close(self, conns: Iterable[Conn]) -> None:
        for conn in conns:
            self._forget(conn)

    def fetch(self, conn: Conn, timeout: float = 30.0) -> Conn:
        """One request to its end; raises if it failed or timed out."""
        self.open([conn])
        if not self.pump([conn], timeout=timeout) or conn.error:
            self._forget(conn)
            raise RuntimeError(f"request to port {conn.port} failed: {conn.error or 'timed out'}")
        return conn
