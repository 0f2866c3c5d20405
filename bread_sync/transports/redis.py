"""Redis Streams: crumb frames fanned out between replicas, and a channel for cancels.

Each run's frames go to one stream, ``XADD bread:run:{<runId>} MAXLEN ~ <maxlen> * frame <json>``
(a Bread protocol CrumbFrame); a terminal crumb gives the stream a short expiry. A subscription
replays what the stream retains (XRANGE), then tails it from there. A process's subscriptions
share one reader thread and connection (a blocking XREAD, which also listens on ``bread:cancel``).

Redis is a convenience, never the truth: while it does not answer, publishing drops frames
(the store holds every durable one), ``healthy`` is False so tails read the store, and all of
it resumes by itself when Redis answers again.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..crumbs import TERMINAL, Frame
from ..errors import BreadError
from ..loading import import_module, require
from ..wire.frames import decode_frame, encode_frame, frame_from_protocol
from . import Handler, wants_frame

log = logging.getLogger("bread_sync.redis")

#: One stream per run; the braces are a Redis Cluster hash tag.
RUN_KEY = "bread:run:{%s}"
#: Cancel requests, read by every replica: ``run <runId>``.
CANCEL_KEY = "bread:cancel"
#: Each reader's own stream: a write to it ends the reader's blocking XREAD.
WAKE_KEY = "bread:wake:{%s}"

DEFAULT_URL = "redis://localhost:6379/0"
#: Frames a run's stream keeps (approximately: Redis trims whole nodes).
DEFAULT_MAXLEN = 1000
CANCEL_MAXLEN = 1000
#: How long a finished run's stream stays for late subscribers; the store has the rest.
DEFAULT_RETENTION_SECONDS = 300
#: The expiry of an unfinished run's stream, renewed by every frame: a paused or orphaned run.
IDLE_RETENTION_SECONDS = 86_400
WAKE_RETENTION_SECONDS = 60
#: How long the reader's XREAD blocks; the longest a closed transport's reader lingers.
BLOCK_MS = 1000
#: Entries one XREAD takes from each stream.
READ_COUNT = 500
#: Connect and command timeout of publishing: a Redis that does not answer costs a run this much.
SOCKET_TIMEOUT_SECONDS = 0.5
#: After a failure, how long publishing stops trying and the reader waits before reconnecting.
RETRY_SECONDS = 1.0
#: Connections a process uses to publish, replay and send cancels.
POOL_SIZE = 16

StreamId = tuple[int, int]
START: StreamId = (0, 0)


def parse_id(entry_id: str) -> StreamId:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def id_text(position: StreamId) -> str:
    return f"{position[0]}-{position[1]}"


def decode_entry(fields: dict[str, str]) -> Frame | None:
    try:
        return frame_from_protocol(decode_frame(fields["frame"]))
    except (BreadError, KeyError) as exc:
        log.warning("skipping a stream entry that is not a crumb frame: %s", exc)
        return None


class _Circuit:
    """Closed while Redis answers. A failure opens it: callers skip Redis for RETRY_SECONDS,
    then one caller tries again, and a success closes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed_at: float | None = None

    @property
    def healthy(self) -> bool:
        return self._failed_at is None

    def allow(self) -> bool:
        with self._lock:
            if self._failed_at is None:
                return True
            if time.monotonic() - self._failed_at < RETRY_SECONDS:
                return False
            self._failed_at = time.monotonic()  # this caller probes; the others wait another round
            return True

    def succeeded(self) -> None:
        if self._failed_at is not None:
            with self._lock:
                self._failed_at = None
            log.warning("redis answers again: fan-out resumed")

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            first, self._failed_at = self._failed_at is None, time.monotonic()
        if first:
            log.warning("redis does not answer (%s): tails read the store until it does", exc)


class RedisTransport:
    """A duplex transport on Redis Streams, with a cancel channel. See the module docstring."""

    capability = "duplex"

    def __init__(self, url: str, maxlen: int, retention: float, idle_retention: float):
        require("redis")  # a missing extra fails here; the import waits for first use (see require)
        self.url, self.maxlen = url, maxlen
        self.retention, self.idle_retention = int(retention), int(idle_retention)
        #: Names this process's connections in CLIENT LIST, and its reader's wake stream.
        self.name = f"bread-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._redis: Any = None
        self._errors: tuple[type[BaseException], ...] = (OSError,)  # and redis's, once imported
        self._circuit = _Circuit()
        self._reader = _Reader(self)

    @property
    def client(self) -> Any:
        """The pooled client that publishes, replays and sends cancels (made on first use)."""
        if self._redis is None:
            with self._lock:
                if self._redis is None:
                    self._connect()
        return self._redis

    def _connect(self) -> None:
        redis = import_module("redis")
        no_retry = import_module("redis.retry").Retry(import_module("redis.backoff").NoBackoff(), 0)
        options = {"decode_responses": True, "retry": no_retry, "socket_connect_timeout": SOCKET_TIMEOUT_SECONDS}
        pool = redis.BlockingConnectionPool.from_url(
            self.url,
            max_connections=POOL_SIZE,
            timeout=SOCKET_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            client_name=self.name,
            **options,
        )
        self.reader_client = redis.Redis.from_url(
            self.url,
            max_connections=1,
            socket_timeout=BLOCK_MS / 1000 + SOCKET_TIMEOUT_SECONDS,
            client_name=f"{self.name}-reader",
            **options,
        )
        self._errors = (redis.RedisError, OSError)
        self._redis = redis.Redis(connection_pool=pool)  # last: other threads see it complete

    @property
    def healthy(self) -> bool:
        """False from a failed Redis call until one succeeds again."""
        return self._circuit.healthy

    def publish(self, frame: Frame) -> None:
        """XADD the frame and renew its stream's expiry, in one round trip; while Redis is
        unreachable the frame is dropped (the store has it if it is durable)."""
        pipeline = self.client.pipeline(transaction=False)
        self.write_frame(frame, pipeline)
        self.call(pipeline.execute)

    def write_frame(self, frame: Frame, pipeline: Any = None) -> None:
        connection = pipeline if pipeline is not None else self.client
        key = RUN_KEY % frame.run_id
        connection.xadd(key, {"frame": encode_frame(frame)}, maxlen=self.maxlen, approximate=True)
        connection.expire(key, self.retention if frame.type in TERMINAL else self.idle_retention)

    def subscribe(self, run_id: str, after_seq: int, handler: Handler) -> _Subscription:
        """Replay what the run's stream retains past ``after_seq`` (on this thread), then hand
        live frames to ``handler`` on the reader thread, where it must only enqueue."""
        subscription = _Subscription(self._reader, RUN_KEY % run_id, after_seq, handler)
        # While Redis is unreachable the reader replays the stream from its start later.
        for entry_id, fields in self.call(lambda: self.client.xrange(subscription.key)) or ():
            subscription.deliver(parse_id(entry_id), decode_entry(fields))
        self._reader.add(subscription)
        return subscription

    def request_cancel(self, run_id: str) -> bool:
        """Ask every replica to cancel ``run_id``: the one running it does. False if Redis is
        unreachable (the cancel recorded in the store still reaches the owner)."""
        return self.call(lambda: self.write_cancel(run_id)) is not None

    def write_cancel(self, run_id: str, pipeline: Any = None) -> Any:
        connection = pipeline if pipeline is not None else self.client
        return connection.xadd(CANCEL_KEY, {"run": run_id}, maxlen=CANCEL_MAXLEN, approximate=True)

    def on_cancel(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Call ``callback(run_id)`` on the reader thread for every cancel any replica sends
        from now on; returns an undo."""
        return self._reader.listen(callback)

    def close(self) -> None:
        """Stop the reader and close every connection."""
        self._reader.stop()
        if self._redis is not None:
            self.reader_client.close()
            self._redis.close()
            self._redis.connection_pool.disconnect()

    def call(self, command: Callable[[], Any]) -> Any:
        """Run a Redis command through the circuit: its result, or None when Redis is not tried
        or fails."""
        if not self._circuit.allow():
            return None
        try:
            result = command()
        except self._errors as exc:
            self._circuit.failed(exc)
            return None
        self._circuit.succeeded()
        return result

    def wake(self, key: str) -> None:
        pipeline = self.client.pipeline(transaction=False)
        pipeline.xadd(key, {"wake": "1"}, maxlen=1)
        pipeline.expire(key, WAKE_RETENTION_SECONDS)
        self.call(pipeline.execute)


class _Subscription:
    def __init__(self, reader: _Reader, key: str, after_seq: int, handler: Handler):
        self.key, self.after_seq, self.handler = key, after_seq, handler
        #: The id of the last entry this subscription has seen; the reader reads past it.
        self.last = START
        self.closed = False
        self._reader = reader

    def deliver(self, position: StreamId, frame: Frame | None) -> None:
        if position <= self.last:
            return
        self.last = position
        if frame is None or self.closed or not wants_frame(frame, self.after_seq):
            return
        try:
            self.handler(frame)
        except Exception:
            log.exception("a subscriber of %s failed", self.key)

    def close(self) -> None:
        self.closed = True
        self._reader.remove(self)


class _Reader:
    """One thread and one connection reading every stream a process subscribes to, and the
    cancel channel. It runs while there is something to read and stops by itself after."""

    def __init__(self, transport: RedisTransport):
        self._transport = transport
        self._wake_key = WAKE_KEY % transport.name
        self._lock = threading.Lock()
        self._subscriptions: dict[str, list[_Subscription]] = {}
        self._listeners: list[Callable[[str], Any]] = []
        self._wake_position = START
        self._cancel_position: StreamId | None = None  # the channel's end when first read
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def add(self, subscription: _Subscription) -> None:
        with self._lock:
            self._subscriptions.setdefault(subscription.key, []).append(subscription)
            self._ensure_running()
        # The XREAD in flight may sit past this subscription's position, or miss its stream.
        self._transport.wake(self._wake_key)

    def remove(self, subscription: _Subscription) -> None:
        with self._lock:
            subscriptions = self._subscriptions.get(subscription.key, [])
            if subscription in subscriptions:
                subscriptions.remove(subscription)
            if not subscriptions:
                self._subscriptions.pop(subscription.key, None)

    def listen(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        if self._cancel_position is None:
            # Hear every cancel sent from now on; what came before is not this process's business.
            self._cancel_position = self._transport.call(self._channel_end)
        with self._lock:
            self._listeners.append(callback)
            self._ensure_running()
        self._transport.wake(self._wake_key)

        def undo() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return undo

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._transport.wake(self._wake_key)
            thread.join(BLOCK_MS / 1000 + SOCKET_TIMEOUT_SECONDS + 1)

    def _ensure_running(self) -> None:
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name="bread-redis-reader", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped.is_set() or not (self._subscriptions or self._listeners):
                    self._thread = None
                    return
                streams = self._streams()
            reply = self._read(streams)
            if reply is None:
                self._stopped.wait(RETRY_SECONDS)
            else:
                self._dispatch(reply)

    def _streams(self) -> dict[str, str]:
        streams = {key: id_text(min(s.last for s in subs)) for key, subs in self._subscriptions.items()}
        streams[self._wake_key] = id_text(self._wake_position)
        if self._listeners and self._cancel_position is not None:
            streams[CANCEL_KEY] = id_text(self._cancel_position)
        return streams

    def _read(self, streams: dict[str, str]) -> list[Any] | None:
        transport = self._transport
        try:
            if self._listeners and self._cancel_position is None:  # Redis was down in listen()
                self._cancel_position = self._channel_end()
                streams[CANCEL_KEY] = id_text(self._cancel_position)
            reply = transport.reader_client.xread(streams, count=READ_COUNT, block=BLOCK_MS)
        except transport._errors as exc:
            transport._circuit.failed(exc)
            return None
        except Exception:  # a bug must not end the reader of a whole process
            log.exception("the redis reader failed")
            return None
        transport._circuit.succeeded()
        return list(reply.items()) if isinstance(reply, dict) else reply  # RESP3 answers a map

    def _channel_end(self) -> StreamId:
        newest = self._transport.client.xrevrange(CANCEL_KEY, count=1)
        return parse_id(newest[0][0]) if newest else START

    def _dispatch(self, reply: list[Any]) -> None:
        for key, entries in reply:
            if not entries:
                continue
            if key == self._wake_key:
                self._wake_position = parse_id(entries[-1][0])
            elif key == CANCEL_KEY:
                self._cancel_position = parse_id(entries[-1][0])
                self._announce([fields.get("run") for _, fields in entries])
            else:
                self._deliver(key, [(parse_id(entry_id), decode_entry(fields)) for entry_id, fields in entries])

    def _deliver(self, key: str, frames: list[tuple[StreamId, Frame | None]]) -> None:
        with self._lock:
            subscriptions = list(self._subscriptions.get(key, ()))
        for subscription in subscriptions:
            for position, frame in frames:
                subscription.deliver(position, frame)

    def _announce(self, run_ids: list[str | None]) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for run_id in run_ids:
            for callback in listeners:
                try:
                    if run_id:
                        callback(run_id)
                except Exception:
                    log.exception("a cancel listener failed on run %s", run_id)


def transport(
    url: str = DEFAULT_URL,
    maxlen: int = DEFAULT_MAXLEN,
    retention: float = DEFAULT_RETENTION_SECONDS,
    idle_retention: float = IDLE_RETENTION_SECONDS,
) -> RedisTransport:
    """Fan crumbs out through the Redis at ``url``.

    ``maxlen``: frames each run's stream keeps (approximately); ``retention``: seconds a
    finished run's stream stays; ``idle_retention``: seconds an unfinished run's stream stays
    after its last frame. Needs ``pip install "bread-sync[redis]"``.
    """
    if maxlen < 1:
        raise ValueError(f"maxlen must be at least 1, not {maxlen!r}")
    return RedisTransport(url, maxlen=maxlen, retention=retention, idle_retention=idle_retention)
