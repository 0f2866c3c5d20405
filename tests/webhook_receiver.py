"""A webhook of the test's own: an HTTP server on 127.0.0.1 that records each POST (its parsed
body, its headers, its bytes); the first ``fail`` ones answer 500."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self):
        self.received: list[tuple[dict, dict]] = []
        self.raw: list[bytes] = []
        self.refused = 0
        self.fail = 0
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's spelling
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with hook.lock:
                    failing = hook.fail > 0
                    if failing:
                        hook.fail -= 1
                        hook.refused += 1
                    else:
                        hook.received.append((json.loads(body), dict(self.headers)))
                        hook.raw.append(body)
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int, seconds: float) -> list[tuple[dict, dict, bytes]]:
        """The first ``count`` POSTs received (body, headers, bytes), once they arrived."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return [(*got, raw) for got, raw in zip(self.received, self.raw, strict=True)]
            time.sleep(0.02)
        raise AssertionError(f"{count} POSTs did not arrive within {seconds} s: {self.received}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()
