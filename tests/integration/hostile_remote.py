"""A hostile "remote bread_sync server" on 127.0.0.1 (the outside world, scripted): it answers
every request with a line that never ends, to see that a caller holds no more of it than its
bound and hangs up.
"""

from __future__ import annotations

import socket
import threading

#: The most it sends on one connection before it gives up and closes it (a caller that reads
#: all this has no bound).
CAP_BYTES = 64 * 1024 * 1024
PIECE = b"x" * 65_536
#: A send blocked this long means the caller stopped reading without hanging up.
SEND_SECONDS = 10.0


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class EndlessRemote:
    """Answers each request ``status`` with ``Content-Type: content_type`` and a chunked body
    of ``prefix`` then ``x`` without end, until the caller hangs up or :data:`CAP_BYTES`.
    ``sent`` holds the bytes each connection took, once it is over."""

    def __init__(self, content_type: str = "application/x-ndjson", status: int = 200, prefix: bytes = b""):
        self.head = (
            f"HTTP/1.1 {status} Whatever\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        self.prefix = prefix
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.sent: list[int] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> EndlessRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(SEND_SECONDS)
            self.requests.append(_read_request(conn))
            sent = 0
            try:
                conn.sendall(self.head + (_chunk(self.prefix) if self.prefix else b""))  # (an empty chunk ends it)
                while sent < CAP_BYTES:
                    conn.sendall(_chunk(PIECE))
                    sent += len(PIECE)
            except OSError:
                pass  # the caller hung up: what this is for
            self.sent.append(sent)


def _read_request(conn: socket.socket) -> bytes:
    """The request's line, its head and body read (so closing leaves nothing unread to reset)."""
    data = b""
    while b"\r\n\r\n" not in data and (more := conn.recv(65_536)):
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    fields = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:])
    length = int(fields.get(b"content-length", 0))
    while len(body) < length and (more := conn.recv(65_536)):
        body += more
    return head.split(b"\r\n", 1)[0]
