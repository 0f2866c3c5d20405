"""A TCP proxy a test owns, between a client and a real server: it can cut every connection it
carries (a dropped network) or freeze them (a network that goes silent without closing)."""

from __future__ import annotations

import socket
import threading

CHUNK = 65536


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        self.frozen = threading.Event()
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class TCPProxy:
    """Listens on 127.0.0.1 (a free port) and forwards every connection to ``target_port``."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self.connections = 0
        threading.Thread(target=self._accept, name="proxy accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> int:
        """Close every connection open now, both ways; how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()
        return len(pairs)

    def freeze(self) -> int:
        """Stop forwarding on every connection open now, leaving them open; how many."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.frozen.set()
        return len(pairs)

    def close(self) -> None:
        try:  # wakes the accept() blocked in another thread: close() alone leaves it listening
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self.cut()

    def reopen(self) -> None:
        """Listen again on the same port after :meth:`close` (a server back after an outage)."""
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, name="proxy accept", daemon=True).start()

    def _accept(self) -> None:
        listener = self._listener
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            upstream.settimeout(None)
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
                self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(pair, src, dst), daemon=True).start()

    @staticmethod
    def _pump(pair: _Pair, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                if pair.frozen.is_set():
                    pair.closed.wait()  # swallow everything until the test cuts it
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            pair.close()
