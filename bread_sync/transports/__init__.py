"""The transport seam: how live crumbs leave the choke point and reach subscribers.

A transport module ``transports/<name>.py`` exports ``transport(**opts)``. A ``sink`` only
publishes; a ``duplex`` transport also lets anyone ``subscribe(run_id, after_seq, handler)``,
replaying what it still retains with seq > after_seq (deltas: seq >= after_seq) and then
tailing live frames, in publish order.

Two optional parts, detected by the helpers below and never stubbed: ``healthy`` (False while a
transport between processes cannot deliver, so tails read the store instead) and a cancel
channel (``request_cancel(run_id)``, ``on_cancel(callback)``). An HTTP transport carries its
frames on its ``pubsub``; the helpers look there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeGuard

from ..crumbs import Frame

TRANSPORTS = {
    "stream": "bread_sync.transports.stream",
    "stdout": "bread_sync.transports.stdout",
    "http-chunked": "bread_sync.transports.http_chunked",
    "http-sse": "bread_sync.transports.http_sse",
    "redis": "bread_sync.transports.redis",
    "postgres": "bread_sync.transports.postgres",
}

Handler = Callable[[Frame], None]


class Subscription(Protocol):
    def close(self) -> None: ...


class CancelChannel(Protocol):
    def request_cancel(self, run_id: str) -> bool:
        """Ask the process that runs ``run_id`` to cancel it; False if the request was not sent."""

    def on_cancel(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Call ``callback(run_id)`` for every cancel requested from now on; returns an undo."""


class Transport(Protocol):
    capability: Literal["sink", "duplex"]

    def publish(self, frame: Frame) -> None: ...


class DuplexTransport(Transport, Protocol):
    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> Subscription:
        """Replay retained frames past ``after_seq``, then deliver live ones to ``handler``.

        ``handler`` is called on the publisher's thread (or the transport's reader thread) and
        must not block.
        """


def wants_frame(frame: Frame, after_seq: int) -> bool:
    """The dedup rule: durable frames with seq > after_seq, deltas with seq >= after_seq."""
    return frame.seq > after_seq if frame.durable else frame.seq >= after_seq


def can_subscribe(transport: Transport) -> TypeGuard[DuplexTransport]:
    return getattr(transport, "capability", "sink") == "duplex" and callable(getattr(transport, "subscribe", None))


def carrier(transport: Transport) -> Any:
    """What carries the frames: an HTTP transport's ``pubsub``, else the transport itself."""
    pubsub = getattr(transport, "pubsub", None)
    return transport if pubsub is None else pubsub


def reports_health(transport: Transport) -> bool:
    """True for a transport that carries frames between processes and says when it cannot."""
    return hasattr(carrier(transport), "healthy")


def is_healthy(transport: Transport) -> bool:
    """False while the transport reports that it cannot deliver frames."""
    return bool(getattr(carrier(transport), "healthy", True))


def cancel_channel(transport: Transport) -> CancelChannel | None:
    """The transport's channel for cancels between processes, if it has one."""
    inner = carrier(transport)
    if callable(getattr(inner, "request_cancel", None)) and callable(getattr(inner, "on_cancel", None)):
        return inner
    return None
