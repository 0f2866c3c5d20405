"""Server-Sent Events over HTTP: ``id: <seq>`` + ``data: {"type", "payload"}``, EventSource-friendly."""

from __future__ import annotations

from typing import Any

from ..server.streaming import DEFAULT_HEARTBEAT_SECONDS, HTTPTransport, StreamAuthorizer
from ..wire import SSE


def transport(
    *,
    heartbeat: float | None = DEFAULT_HEARTBEAT_SECONDS,
    authorize_stream: StreamAuthorizer | None = None,
    pubsub: Any = None,
) -> HTTPTransport:
    """``heartbeat``: seconds between ``: ping`` comments on an idle stream (None: never).
    ``authorize_stream(identity, run_id)``: False answers 403 before any crumb is read.
    ``pubsub``: the duplex transport that carries frames (default: the embedded stream)."""
    return HTTPTransport(SSE, heartbeat=heartbeat, authorize_stream=authorize_stream, pubsub=pubsub)
