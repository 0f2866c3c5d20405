"""A deadline for reading a request body: a client that sends its headers and then trickles
(or stalls) its body holds a connection, and a greenlet, until it is cut off.

gunicorn reads the body from the connection's socket with no time limit. When the deadline
passes, the socket's read side is shut: the read that waits returns what came, and the guard
answers ``REQUEST_TIMEOUT`` (408) while the write side still works. Other requests are never
held up meanwhile: under gevent a waiting read only parks its own greenlet.
"""

from __future__ import annotations

import socket
from typing import Any

from .. import greenlets


class BodyDeadline:
    """``with BodyDeadline(environ, seconds) as deadline:`` the body has ``seconds`` to arrive;
    ``deadline.passed`` says whether it was cut off.

    Only a server that hands the socket over (gunicorn's ``gunicorn.socket``) can be cut off;
    elsewhere (the development server, a test client) there is no deadline. Armed on every
    request with a body, so it is a plain flag and one timer of the event loop: no event, no
    closure, no generator of its own."""

    __slots__ = ("_cancel", "_sock", "passed")

    def __init__(self, environ: dict[str, Any], seconds: float | None):
        self.passed = False
        self._sock = environ.get("gunicorn.socket")
        armed = self._sock is not None and seconds
        self._cancel = greenlets.call_later(seconds, self._cut_off, spawn=False) if armed else None

    def __enter__(self) -> BodyDeadline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._cancel is not None:
            self._cancel()

    def _cut_off(self) -> None:
        self.passed = True  # before the shutdown: the read it ends sees the flag set
        try:
            self._sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # the client is gone already
