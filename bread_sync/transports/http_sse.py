"""Server-Sent Events over HTTP: ``id: <seq>`` + ``data: {"type", "payload"}``, EventSource-friendly."""

from __future__ import annotations

from typing import Any

from ..server.streaming import HTTPTransport
from ..wire import SSE


def transport(**opts: Any) -> HTTPTransport:
    """Options: ``heartbeat``, ``authorize_stream``, ``pubsub`` (see :class:`HTTPTransport`)."""
    return HTTPTransport(SSE, **opts)
