"""NDJSON over HTTP: one Bread protocol CrumbFrame per line. The default transport."""

from __future__ import annotations

from typing import Any

from ..server.streaming import DEFAULT_HEARTBEAT_SECONDS, HTTPTransport, StreamAuthorizer
from ..wire import NDJSON


def transport(
    *,
    heartbeat: float | None = DEFAULT_HEARTBEAT_SECONDS,
    authorize_stream: StreamAuthorizer | None = None,
    pubsub: Any = None,
) -> HTTPTransport:
    """``heartbeat``: seconds between empty heartbeat lines on an idle stream (None: never).
    ``authorize_stream(identity, run_id)``: False answers 403 before any crumb is read.
    ``pubsub``: the duplex transport that carries frames (default: the embedded stream)."""
    return HTTPTransport(NDJSON, heartbeat=heartbeat, authorize_stream=authorize_stream, pubsub=pubsub)
