"""A local HTTP server that plays a model provider's wire: scripted SSE streams and errors.

Real HTTP on 127.0.0.1, so each provider's official SDK is pointed at it with its base-URL
setting and exercised whole (its parsing, its retries, its errors). It records what it was sent.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from bread_sync import CancelToken, ToolContext, tool
from bread_sync.errors import RUN_CANCELLED

#: Longest a scripted stall holds a server thread; the tests that stall end long before it.
STALL_LIMIT = 5.0
#: A stall in a scripted stream: the server waits for release (or STALL_LIMIT), then hangs up.
STALL = object()


@dataclass
class Stream:
    """A 200 ``text/event-stream``: one event per item (a dict as ``data:`` JSON, a string as is,
    an ``(event, dict)`` pair with its ``event:`` line), then ``end`` (OpenAI's ``[DONE]``) if any."""

    chunks: list[Any]
    end: str | None = "[DONE]"

    def send(self, handler: Handler, fake: FakeProvider) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for item in self.chunks:
            if item is STALL:
                fake.stalled.set()
                fake.release.wait(STALL_LIMIT)
                handler.close_connection = True
                return
            handler.write_chunk(_event(item).encode())
        if self.end is not None:
            handler.write_chunk(f"data: {self.end}\n\n".encode())
        handler.write_chunk(b"")


def _event(item: Any) -> str:
    if isinstance(item, tuple):
        name, data = item
        return f"event: {name}\ndata: {json.dumps(data)}\n\n"
    return f"data: {item if isinstance(item, str) else json.dumps(item)}\n\n"


@dataclass
class Fail:
    """An error answer: ``body`` as JSON (OpenAI's shape around ``message`` by default), with
    headers that ask for a quick retry so retry tests stay fast."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=lambda: {"retry-after-ms": "1"})
    body: dict[str, Any] | None = None

    def send(self, handler: Handler, fake: FakeProvider) -> None:
        body = json.dumps(self.body or {"error": {"message": self.message, "type": "server_error"}}).encode()
        handler.send_response(self.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in self.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = STALL_LIMIT  # an idle keep-alive connection never pins a thread for long

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake.requests.append(
            {
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "headers": {name.lower(): value for name, value in self.headers.items()},
                "traceparent": self.headers.get("traceparent"),
                "body": body,
            }
        )
        response = fake.responses.popleft() if fake.responses else Fail(500, "nothing scripted", {})
        response.send(self, fake)

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close joins the handler threads: nothing outlives a test
    block_on_close = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is fine
            super().handle_error(request, client_address)


class FakeProvider:
    """The server: ``play`` scripts its next answers, ``requests`` records what it was sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responses: deque[Stream | Fail] = deque()
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.fake = self
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (``/v1``)."""
        return f"{self.origin}/v1"

    def play(self, *responses: Stream | Fail) -> None:
        self.responses.extend(responses)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Add(BaseModel):
    a: int
    b: int


@tool  # the tool every provider's tests offer their model; its docstring is its description
def add(input: Add, ctx: ToolContext) -> int:
    """Add two numbers."""
    return input.a + input.b


def types(crumbs: list[dict[str, Any]]) -> list[str]:
    return [crumb["type"] for crumb in crumbs]


def assert_a_cancel_interrupts_a_blocked_read(bread: Any, fake: FakeProvider, is_reading: Any) -> None:
    """Run agent ``a`` of ``bread`` against a stream that stalls after its first delta, cancel
    once the SDK's reading thread is blocked in its read (``is_reading(thread_id, deadline)``),
    and assert the run ends cancelled at once: the read was woken, not timed out."""
    token, first_delta = CancelToken(), threading.Event()
    reader, seen_blocked = threading.get_ident(), []

    def cancel_once_blocked() -> None:
        if first_delta.wait(STALL_LIMIT) and fake.stalled.wait(STALL_LIMIT):
            seen_blocked.append(is_reading(reader, time.monotonic() + STALL_LIMIT))
            token.cancel()

    canceller = threading.Thread(target=cancel_once_blocked)
    canceller.start()
    started = time.monotonic()
    crumbs = []
    for crumb in bread.run("a", "hi", signal=token):
        crumbs.append(crumb)
        if crumb["type"] == "text:delta":
            first_delta.set()
    elapsed = time.monotonic() - started
    canceller.join()

    assert seen_blocked == [True]
    assert types(crumbs) == ["agent:run:start", "text:delta", "agent:error"]
    assert crumbs[-1]["error"].code == RUN_CANCELLED
    assert elapsed < STALL_LIMIT / 2


def is_reading_the_socket(thread_id: int, deadline: float) -> bool:
    """Poll the thread's stack until it sits in httpx's socket read (the OpenAI and Anthropic
    SDKs' client): no event says so."""
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread_id)
        if frame is not None and frame.f_code.co_name == "read" and "_backends" in frame.f_code.co_filename:
            return True
        threading.Event().wait(0.005)
    return False
