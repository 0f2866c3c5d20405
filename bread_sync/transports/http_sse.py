"""Server-Sent Events over HTTP: ``id: <seq>`` + ``data: {"type", "payload"}``, EventSource-friendly."""

from __future__ import annotations

from typing import Any

from ..wire import SSE
from .http import HTTPTransport


def transport(**opts: Any) -> HTTPTransport:
    """Options: ``heartbeat``, ``authorize_stream``, ``pubsub`` (see :class:`HTTPTransport`)."""
    return HTTPTransport(SSE, **opts)
