"""A small TCP proxy the browser tests put between the browser and a server, to cut every
connection at a moment of the test's choosing and to see what the browser sent."""

from __future__ import annotations

import socket
import threading

CHUNK = 65536


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``; :meth:`cut` drops every open connection
    (new ones are still forwarded). ``requests`` holds the bytes each connection sent upstream."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.requests: list[bytearray] = []
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sent(self) -> str:
        """Everything the browser sent through the proxy so far."""
        with self._lock:
            return b"".join(bytes(r) for r in self.requests).decode("latin-1")

    def cut(self) -> int:
        """Close every open connection, both ways, as a network drop would; how many it cut."""
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            _close(sock)
        return len(sockets) // 2

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            record = bytearray()
            with self._lock:
                self._open += [client, upstream]
                self.requests.append(record)
            threading.Thread(target=self._pipe, args=(client, upstream, record), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bytearray | None) -> None:
        try:
            while data := source.recv(CHUNK):
                if record is not None:
                    with self._lock:
                        record += data
                sink.sendall(data)
        except OSError:
            pass  # cut, or the other side went away
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
