"""What the HTTP transports share: a duplex transport that the server mounts, serving the
streaming routes in its wire format, with its pub/sub inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..crumbs import Frame
from ..wire import Wire
from . import DuplexTransport, stream

DEFAULT_HEARTBEAT_SECONDS = 15.0

StreamAuthorizer = Callable[[Any, str], bool]


class HTTPTransport:
    """A duplex, mount-capable transport: the server serves the streaming routes in its
    ``wire`` format (server/runs.py), and it carries its pub/sub inside.

    ``heartbeat``: seconds between heartbeats on an idle stream (None: never).
    ``authorize_stream(identity, run_id)``: per-run ownership, one way to set the config's
    ``server.authorize_run`` (both given: each must allow); only True allows, else 403.
    ``pubsub``: the duplex transport that carries frames (default: the embedded stream, one
    process; ``redis.transport(url=...)`` fans them out between replicas, with cancels).
    """

    capability = "duplex"

    def __init__(
        self,
        wire: Wire,
        *,
        heartbeat: float | None = DEFAULT_HEARTBEAT_SECONDS,
        authorize_stream: StreamAuthorizer | None = None,
        pubsub: DuplexTransport | None = None,
    ):
        self.wire = wire
        self.heartbeat = heartbeat
        self.authorize_stream = authorize_stream
        self.pubsub = pubsub if pubsub is not None else stream.transport()
        self.publish: Callable[[Frame], None] = self.pubsub.publish  # one call less per crumb

    def subscribe(self, run_id: str, after_seq: int, handler: Callable[[Frame], None]) -> Any:
        return self.pubsub.subscribe(run_id, after_seq, handler)
