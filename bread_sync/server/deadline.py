"""A deadline for reading a request body: a client that sends its headers and then trickles
(or stalls) its body holds a connection, and a greenlet, until it is cut off.

gunicorn reads the body from the connection's socket with no time limit. When the deadline
passes, the socket's read side is shut: the read that waits returns what came, and the guard
answers ``REQUEST_TIMEOUT`` (408) while the write side still works. Other requests are never
held up meanwhile: under gevent a waiting read only parks its own greenlet.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
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
        self._cancel = _call_later(seconds, self._cut_off) if self._sock is not None and seconds else None

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


def _call_later(seconds: float, callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` in ``seconds`` unless the returned cancel is called first.

    Under gevent a timer on the hub's event loop: a ``threading.Timer`` there is a greenlet
    and an event of its own, on every request with a body."""
    if greenlets.patched():
        from gevent import get_hub

        watcher = get_hub().loop.timer(seconds)
        watcher.start(callback)
        return watcher.close
    timer = threading.Timer(seconds, callback)
    timer.daemon = True
    timer.start()
    return timer.cancel
