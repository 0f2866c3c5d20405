"""The embedded stream transport, the default: per-process ring buffers, nothing to install.

Each run keeps its last ``buffer_size`` frames. Runs without subscribers are let go, least
recently published first, once more than ``max_runs`` runs or ``max_frames`` frames in all are
retained (checked when a run starts and when one ends), so memory stays flat however many runs
a process serves. The frames bound also keeps the garbage collector's full passes short: every
retained frame is an object they visit. The store, not this buffer, is the durable history.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from .. import greenlets
from ..crumbs import TERMINAL, Frame
from . import Handler, wants_frame

#: Frames retained in all, by default: about 5 MB of short deltas.
MAX_FRAMES = 10_000


#: The frames of a run nothing published here yet: a tail of a run of another process (an idle
#: stream of a paused run) costs its buffer no deque until its run publishes here.
NO_FRAMES: tuple[Frame, ...] = ()


class _RunBuffer:
    __slots__ = ("frames", "handlers")

    def __init__(self) -> None:
        self.frames: deque[Frame] | tuple[Frame, ...] = NO_FRAMES
        # Replaced, never changed in place: a publish iterates the handlers it found.
        self.handlers: tuple[Handler, ...] = ()


class _Subscription:
    __slots__ = ("_handler", "_run_id", "_transport")  # one per open stream: no dict each

    def __init__(self, transport: StreamTransport, run_id: str, handler: Handler):
        self._transport, self._run_id, self._handler = transport, run_id, handler

    def close(self) -> None:
        self._transport._unsubscribe(self._run_id, self._handler)


class StreamTransport:
    capability = "duplex"

    def __init__(self, buffer_size: int = 1024, max_runs: int = 1000, max_frames: int = MAX_FRAMES):
        self.buffer_size = buffer_size
        self.max_runs = max_runs
        self.max_frames = max_frames
        # A lock of the OS even under gevent (a patched one cost twice the rest of a publish, on
        # every crumb): greenlets switch only where they block, and nothing in a publish or a
        # subscribe blocks (handlers must only enqueue), so no greenlet ever waits on it.
        self._lock = greenlets.os_rlock()
        self._runs: OrderedDict[str, _RunBuffer] = OrderedDict()
        self._frames = 0  # retained in all buffers

    def publish(self, frame: Frame) -> None:
        # Handlers run under the lock so a subscriber's replay and its live frames never
        # interleave; they only enqueue.
        with self._lock:
            buffer = self._buffer(frame.run_id)
            frames = buffer.frames
            if frames.__class__ is not deque:  # NO_FRAMES: its run's first publish here
                frames = buffer.frames = deque(maxlen=self.buffer_size)
            if len(frames) < self.buffer_size:
                self._frames += 1
            frames.append(frame)
            for handler in buffer.handlers:
                handler(frame)
            if frame.crumb["type"] in TERMINAL:
                self._evict()

    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> _Subscription:
        with self._lock:
            buffer = self._buffer(run_id)
            for frame in buffer.frames:
                if wants_frame(frame, after_seq):
                    handler(frame)
            buffer.handlers = (*buffer.handlers, handler)
        return _Subscription(self, run_id, handler)

    def retained(self, run_id: str) -> list[Frame]:
        with self._lock:
            buffer = self._runs.get(run_id)
            return list(buffer.frames) if buffer else []

    def _unsubscribe(self, run_id: str, handler: Handler) -> None:
        with self._lock:
            buffer = self._runs.get(run_id)
            if buffer is not None:
                buffer.handlers = tuple(h for h in buffer.handlers if h is not handler)

    def _buffer(self, run_id: str) -> _RunBuffer:
        buffer = self._runs.get(run_id)
        if buffer is None:
            buffer = self._runs[run_id] = _RunBuffer()
            self._evict(spare=buffer)
        else:
            self._runs.move_to_end(run_id)
        return buffer

    def _evict(self, spare: _RunBuffer | None = None) -> None:
        runs, frames = len(self._runs) - self.max_runs, self._frames - self.max_frames
        idle = []
        for run_id, buffer in self._runs.items():  # least recently published first; usually idle
            if runs <= 0 and frames <= 0:
                break
            if not buffer.handlers and buffer is not spare:
                idle.append(run_id)
                runs, frames = runs - 1, frames - len(buffer.frames)
        for run_id in idle:
            self._frames -= len(self._runs.pop(run_id).frames)


def transport(buffer_size: int = 1024, max_runs: int = 1000, max_frames: int = MAX_FRAMES) -> StreamTransport:
    return StreamTransport(buffer_size=buffer_size, max_runs=max_runs, max_frames=max_frames)
