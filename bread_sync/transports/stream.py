"""The embedded stream transport, the default: per-process ring buffers, nothing to install.

Each run keeps its last ``buffer_size`` frames; at most ``max_runs`` runs are retained (the
least recently published without subscribers go first), so memory stays flat however many
runs a process serves. The store, not this buffer, is the durable history.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from ..crumbs import Frame
from . import Handler, wants_frame


class _RunBuffer:
    __slots__ = ("frames", "handlers")

    def __init__(self, size: int):
        self.frames: deque[Frame] = deque(maxlen=size)
        self.handlers: list[Handler] = []


class _Subscription:
    def __init__(self, transport: StreamTransport, run_id: str, handler: Handler):
        self._transport, self._run_id, self._handler = transport, run_id, handler

    def close(self) -> None:
        self._transport._unsubscribe(self._run_id, self._handler)


class StreamTransport:
    capability = "duplex"

    def __init__(self, buffer_size: int = 1024, max_runs: int = 1000):
        self.buffer_size = buffer_size
        self.max_runs = max_runs
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, _RunBuffer] = OrderedDict()

    def publish(self, frame: Frame) -> None:
        # Handlers run under the lock so a subscriber's replay and its live frames never
        # interleave; they only enqueue.
        with self._lock:
            buffer = self._buffer(frame.run_id)
            buffer.frames.append(frame)
            for handler in buffer.handlers:
                handler(frame)

    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> _Subscription:
        with self._lock:
            buffer = self._buffer(run_id)
            for frame in buffer.frames:
                if wants_frame(frame, after_seq):
                    handler(frame)
            buffer.handlers.append(handler)
        return _Subscription(self, run_id, handler)

    def retained(self, run_id: str) -> list[Frame]:
        with self._lock:
            buffer = self._runs.get(run_id)
            return list(buffer.frames) if buffer else []

    def _unsubscribe(self, run_id: str, handler: Handler) -> None:
        with self._lock:
            buffer = self._runs.get(run_id)
            if buffer is not None and handler in buffer.handlers:
                buffer.handlers.remove(handler)

    def _buffer(self, run_id: str) -> _RunBuffer:
        buffer = self._runs.get(run_id)
        if buffer is None:
            buffer = self._runs[run_id] = _RunBuffer(self.buffer_size)
            self._evict()
        else:
            self._runs.move_to_end(run_id)
        return buffer

    def _evict(self) -> None:
        excess = len(self._runs) - self.max_runs
        if excess <= 0:
            return
        idle = [rid for rid, buf in self._runs.items() if not buf.handlers][:excess]
        for run_id in idle:
            del self._runs[run_id]


def transport(buffer_size: int = 1024, max_runs: int = 1000) -> StreamTransport:
    return StreamTransport(buffer_size=buffer_size, max_runs=max_runs)
