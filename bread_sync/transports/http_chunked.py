"""NDJSON over HTTP: one Bread protocol CrumbFrame per line. The default transport."""

from __future__ import annotations

from typing import Any

from ..wire import NDJSON
from .http import HTTPTransport


def transport(**opts: Any) -> HTTPTransport:
    """Options: ``heartbeat``, ``authorize_stream``, ``pubsub`` (see :class:`HTTPTransport`)."""
    return HTTPTransport(NDJSON, **opts)
