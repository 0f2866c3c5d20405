"""Server-Sent Events over HTTP: ``id: <seq>`` + ``data: {"type", "payload"}``, EventSource-friendly."""

from __future__ import annotations

from typing import Any

from ..wire import SSE
from .http import HTTPTransport
from .remote import RemoteAgent


def transport(**opts: Any) -> HTTPTransport:
    """Options: ``heartbeat``, ``authorize_stream``, ``pubsub`` (see :class:`HTTPTransport`)."""
    return HTTPTransport(SSE, **opts)


def remote_agent(**opts: Any) -> RemoteAgent:
    """An agent of another bread_sync server, for ``Config.remote_agents``. Options: ``url`` (its
    base URL), ``agent_id``, ``headers``, ``heartbeat_timeout`` (see :class:`RemoteAgent`)."""
    return RemoteAgent(SSE, **opts)
