"""The transport seam: how live crumbs leave the choke point and reach subscribers.

A transport module ``transports/<name>.py`` exports ``transport(**opts)``. A ``sink`` only
publishes; a ``duplex`` transport also lets anyone ``subscribe(run_id, after_seq, handler)``,
replaying what it still retains with seq > after_seq (deltas: seq >= after_seq) and then
tailing live frames, in publish order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from ..crumbs import Frame

TRANSPORTS = {
    "stream": "bread_sync.transports.stream",
    "stdout": "bread_sync.transports.stdout",
    "http-chunked": "bread_sync.transports.http_chunked",
    "http-sse": "bread_sync.transports.http_sse",
}

Handler = Callable[[Frame], None]


class Subscription(Protocol):
    def close(self) -> None: ...


class Transport(Protocol):
    capability: Literal["sink", "duplex"]

    def publish(self, frame: Frame) -> None: ...


class DuplexTransport(Transport, Protocol):
    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> Subscription:
        """Replay retained frames past ``after_seq``, then deliver live ones to ``handler``.

        ``handler`` is called on the publisher's thread and must not block.
        """


def wants_frame(frame: Frame, after_seq: int) -> bool:
    """The dedup rule: durable frames with seq > after_seq, deltas with seq >= after_seq."""
    return frame.seq > after_seq if frame.durable else frame.seq >= after_seq


def can_subscribe(transport: Any) -> bool:
    return getattr(transport, "capability", "sink") == "duplex" and callable(getattr(transport, "subscribe", None))
