"""Postgres LISTEN/NOTIFY: crumb frames fanned out between processes that share a Postgres store.

The live channel of a Postgres deployment without Redis: a run's text deltas, which the store
logs only aggregated at the next durable crumb, reach a tail in another process as they come.
Every process publishes on the channel ``bread_live`` and listens to it on one connection of
its own; what it hears goes into an embedded stream transport (``stream.py``), which fans the
frames out to this process's subscribers and retains the last ones of each run for their
replays. A process's own frames go straight into that stream, and are skipped when heard back.

Publishing only enqueues: one sender thread drains the queue into one ``pg_notify`` statement
per batch, on one connection, so no crumb sets a connection up or waits for Postgres. A
notification's payload is at most 8000 bytes: a bigger frame goes as numbered parts that the
listener puts back together.

It is also a channel for cancels between processes (``request_cancel``, ``on_cancel``), and
``on_cancel`` (which every ``Bread`` calls) starts the listener as the process starts, so a web
process hears a worker's first frames. Every process hears every process's frames: for many
hosts streaming at once, Redis reads only the runs each process follows.

Postgres is a convenience here, never the truth: while it does not answer, frames are dropped
(the store holds every durable one) and ``healthy`` is False, so tails read the store; the
sender and the listener reconnect by themselves.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from ..crumbs import Frame
from ..errors import BreadError
from ..loading import import_module, require
from ..wire.frames import decode_frame, encode_frame, frame_from_protocol
from . import Handler, stream

log = logging.getLogger("bread_sync.postgres")

CHANNEL = "bread_live"
#: Postgres refuses a payload of 8000 bytes or more; a part's header takes the rest.
MAX_PAYLOAD_BYTES = 7900
#: Characters of a frame's text per part: 4 bytes each at most in UTF-8.
PART_CHARS = MAX_PAYLOAD_BYTES // 4
#: Notifications one statement sends.
BATCH = 500
#: Payloads waiting for the sender past which publishing drops frames (Postgres too slow).
MAX_PENDING = 100_000
#: Frames told apart in parts, waiting for their other parts: a sender that died mid-frame.
MAX_PARTIAL = 100
#: After a failure, how long the sender and the listener wait before connecting again.
RETRY_SECONDS = 1.0
#: How long the listener waits for a notification before it looks whether it should stop.
LISTEN_SECONDS = 1.0
CONNECT_SECONDS = 5
#: In order, whatever the batch: ``unnest`` numbers its elements.
NOTIFY = "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n"
#: A barrier's payload: ``<origin>:flush:<id>``, heard back by its own listener.
FLUSH = "flush"
#: A cancel's payload: ``<origin>:cancel:<runId>``, heard by every process, its sender's too.
CANCEL = "cancel"


def payloads(origin: str, number: int, text: str) -> list[str]:
    """The notifications that carry one frame's ``text``: ``<origin>:<number>:<part>/<parts>:<text>``.

    The number keeps each payload unique: Postgres sends a transaction's identical payloads once.
    """
    if len(text) <= PART_CHARS or len(text.encode()) <= MAX_PAYLOAD_BYTES:  # most: no encode
        return [f"{origin}:{number}:1/1:{text}"]
    chunks = [text[i : i + PART_CHARS] for i in range(0, len(text), PART_CHARS)]
    return [f"{origin}:{number}:{n}/{len(chunks)}:{chunk}" for n, chunk in enumerate(chunks, 1)]


class Reassembly:
    """Frames' texts out of their notifications, parts put back together (see :func:`payloads`)."""

    def __init__(self) -> None:
        self._partial: OrderedDict[tuple[str, str], list[str]] = OrderedDict()

    def add(self, origin: str, number: str, part: str, text: str) -> str | None:
        """The frame's whole text once ``text`` was its last part, else None."""
        index, _, total = part.partition("/")
        if total == "1":
            return text
        key = (origin, number)
        parts = self._partial.setdefault(key, [])
        parts.append(text)
        if index != total:
            while len(self._partial) > MAX_PARTIAL:
                self._partial.popitem(last=False)
            return None
        del self._partial[key]
        return "".join(parts) if len(parts) == int(total) else None


class PostgresTransport:
    """A duplex transport on Postgres LISTEN/NOTIFY. See the module docstring."""

    capability = "duplex"

    def __init__(self, url: str, buffer_size: int, max_runs: int, max_frames: int):
        require("psycopg")  # a missing extra fails here; the import waits for first use (see require)
        self.url = url
        self._host = uuid.uuid4().hex[:12]
        self.local = stream.transport(buffer_size=buffer_size, max_runs=max_runs, max_frames=max_frames)
        self._sender = _Sender(self)
        self._listener = _Listener(self)

    @property
    def origin(self) -> str:
        """Marks this process's notifications, so its listener skips them; gunicorn's workers,
        forked from the process that made the transport, each have their own."""
        return f"{self._host}-{os.getpid()}"

    @property
    def healthy(self) -> bool:
        """False while frames may be missed: the listener not connected, or the sender failing."""
        return self._listener.connected.is_set() and not self._sender.failing

    def publish(self, frame: Frame) -> None:
        """Hand the frame to this process's subscribers and queue it for the others."""
        self.local.publish(frame)
        self._sender.send(encode_frame(frame))

    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> Any:
        """Replay what this process retains of the run past ``after_seq``, then hand live frames
        to ``handler``, on the listener's thread for other processes' frames."""
        self._listener.start()
        return self.local.subscribe(run_id, after_seq, handler)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until what this process published is sent and what any process sent before is
        heard; False if that did not happen within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        self._listener.start()
        if not self._listener.connected.wait(timeout):
            return False  # a barrier sent now could go unheard
        barrier = self._listener.barrier()
        self._sender.enqueue([f"{self.origin}:{FLUSH}:{barrier.id}"])
        return barrier.wait(max(0.0, deadline - time.monotonic()))

    def request_cancel(self, run_id: str) -> bool:
        """Ask every process to cancel ``run_id``: the one running it does. False while
        notifications fail (the cancel recorded in the store still reaches the owner)."""
        self._sender.enqueue([f"{self.origin}:{CANCEL}:{run_id}"])
        return not self._sender.failing

    def on_cancel(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Call ``callback(run_id)`` on the listener's thread for every cancel any process sends
        from now on; returns an undo. Starts the listener: a process hears frames from then on."""
        self._listener.start()
        return self._listener.on_cancel(callback)

    def close(self) -> None:
        """Stop the sender and the listener and close their connections."""
        self._sender.stop()
        self._listener.stop()

    def connect(self) -> Any:
        """A new autocommit connection (the psycopg import waits until here: gevent first)."""
        psycopg = import_module("psycopg")
        return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_SECONDS)

    def errors(self) -> tuple[type[BaseException], ...]:
        return (import_module("psycopg").Error, OSError)

    def heard(self, payload: str) -> None:
        """One notification: a frame (or its last part) of another process goes to subscribers."""
        origin, _, rest = payload.partition(":")
        number, _, rest = rest.partition(":")
        if number == CANCEL:
            self._listener.announce(rest)
            return
        if origin == self.origin:
            if number == FLUSH:
                self._listener.release(rest)
            return
        part, _, text = rest.partition(":")
        whole = self._listener.reassembly.add(origin, number, part, text)
        if whole is None:
            return
        try:
            frame = frame_from_protocol(decode_frame(whole))
        except BreadError as exc:
            log.warning("skipping a notification that is not a crumb frame: %s", exc)
            return
        self.local.publish(frame)


class _Sender:
    """One thread and one connection sending what this process publishes, a batch a statement.
    It starts with the first publish and ends with the transport."""

    def __init__(self, transport: PostgresTransport):
        self._transport = transport
        self._pending: deque[str] = deque()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._numbers = itertools.count(1)  # next() is atomic: each frame its own number
        #: A send failed or frames were dropped, until a batch goes through again.
        self.failing = False

    def send(self, text: str) -> None:
        self.enqueue(payloads(self._transport.origin, next(self._numbers), text))

    def enqueue(self, items: list[str]) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.failing = True  # dropped: tails read the store until a batch goes through
            return
        self._pending.extend(items)
        self._wake.set()
        if self._thread is None:
            self._start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(CONNECT_SECONDS + 1)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._run, name="bread-pg-sender", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        conn = None
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            while self._pending and not self._stopped.is_set():
                conn = self._send_batch(conn)
        if conn is not None:
            conn.close()

    def _send_batch(self, conn: Any) -> Any:
        """Send up to BATCH pending payloads; the connection to use next (None after a failure)."""
        batch = [self._pending.popleft() for _ in range(min(BATCH, len(self._pending)))]
        try:
            conn = conn if conn is not None else self._transport.connect()
            conn.execute(NOTIFY, [CHANNEL, batch])
        except self._transport.errors() as exc:
            if not self.failing:
                log.warning("postgres notifications fail (%s): tails read the store until they pass", exc)
            self.failing = True
            if conn is not None:
                conn.close()
            self._stopped.wait(RETRY_SECONDS)
            return None
        self.failing = False
        return conn


class _Barrier:
    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self._heard = threading.Event()

    def wait(self, timeout: float) -> bool:
        return self._heard.wait(timeout)

    def release(self) -> None:
        self._heard.set()


class _Listener:
    """One thread and one connection listening on the channel for the whole process, from the
    first subscription until the transport closes."""

    def __init__(self, transport: PostgresTransport):
        self._transport = transport
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._barriers: dict[str, _Barrier] = {}
        # Replaced, never changed in place: an announce iterates the callbacks it found.
        self._cancel_listeners: tuple[Callable[[str], Any], ...] = ()
        self.reassembly = Reassembly()
        #: Set while the listener listens: what is notified then is heard.
        self.connected = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._run, name="bread-pg-listener", daemon=True)
                self._thread.start()

    def barrier(self) -> _Barrier:
        barrier = _Barrier()
        with self._lock:
            self._barriers[barrier.id] = barrier
        return barrier

    def release(self, barrier_id: str) -> None:
        with self._lock:
            barrier = self._barriers.pop(barrier_id, None)
        if barrier is not None:
            barrier.release()

    def on_cancel(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        with self._lock:
            self._cancel_listeners = (*self._cancel_listeners, callback)

        def undo() -> None:
            with self._lock:
                self._cancel_listeners = tuple(c for c in self._cancel_listeners if c is not callback)

        return undo

    def announce(self, run_id: str) -> None:
        for callback in self._cancel_listeners:
            try:
                callback(run_id)
            except Exception:
                log.exception("a cancel listener failed on run %s", run_id)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(LISTEN_SECONDS + CONNECT_SECONDS + 1)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._listen()
            except self._transport.errors() as exc:
                log.warning("the postgres live channel's listener lost its connection (%s): reconnecting", exc)
            except Exception:  # a bug must not end the listener of a whole process
                log.exception("the postgres live channel's listener failed")
            self.connected.clear()
            self._stopped.wait(RETRY_SECONDS)

    def _listen(self) -> None:
        with self._transport.connect() as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.connected.set()
            while not self._stopped.is_set():
                for notification in conn.notifies(timeout=LISTEN_SECONDS):
                    self._transport.heard(notification.payload)


def transport(
    url: str,
    buffer_size: int = 1024,
    max_runs: int = 1000,
    max_frames: int = stream.MAX_FRAMES,
) -> PostgresTransport:
    """Fan crumbs out through LISTEN/NOTIFY on the Postgres database at ``url``.

    ``buffer_size``, ``max_runs`` and ``max_frames`` bound what each process retains for its
    subscribers' replays, as the embedded stream's do. Needs ``pip install "bread-sync[postgres]"``.
    """
    return PostgresTransport(url, buffer_size=buffer_size, max_runs=max_runs, max_frames=max_frames)
