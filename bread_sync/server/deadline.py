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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import greenlets


@contextmanager
def body_deadline(environ: dict[str, Any], seconds: float | None) -> Iterator[Callable[[], bool]]:
    """Within the block, the body has ``seconds`` to arrive; yields "did the deadline pass?".

    Only a server that hands the socket over (gunicorn's ``gunicorn.socket``) can be cut off;
    elsewhere (the development server, a test client) there is no deadline."""
    sock = environ.get("gunicorn.socket")
    if sock is None or not seconds:
        yield lambda: False
        return
    passed = threading.Event()

    def cut_off() -> None:
        passed.set()
        try:
            sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # the client is gone already

    cancel = _call_later(seconds, cut_off)
    try:
        yield passed.is_set
    finally:
        cancel()


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
