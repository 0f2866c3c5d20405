"""The webhook sender: each due subscription's bodies POSTed to its webhook, outside any request.

The sender works from the store alone, so it needs no process that ran the run: it claims a
subscription that is due (one claimer wins, across workers and replicas), asks its mount for the
run's bodies, POSTs those past the subscription's ``delivered`` count one at a time, in order,
and settles it: the new count, or on a failure the next attempt's time (exponential backoff).
Every process that serves a mount runs one sender; a restart loses nothing (a POST answered but
not yet settled is sent again: at least once). A subscription whose run has nothing new waits
RECHECK_SECONDS for its next look, unless its run ends or pauses in this process first: the
sender hears that crumb, makes the run's subscriptions due (``hasten_push``) and claims at once.
The store is polled still, as the fallback for runs driven in other processes.

Deliveries run side by side, a few to one webhook origin at a time, so a webhook that never
answers holds up no other's; an origin that timed out is left alone for a while, whatever
subscriptions name it."""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import Any

import httpx

from ..crumbs import STREAM_END, Frame
from ..engine.opening import new_id
from ..stores import TRACE_FIELD
from . import Mount, PushStore, address

log = logging.getLogger("bread_sync.webhooks")

#: How long a sender holds a claimed subscription: past it, another sender may take it.
CLAIM_SECONDS = 30.0
#: A sender with no free delivery looks again this often; one with nothing due, this long after
#: its last claim, doubling while nothing is due up to IDLE_MOST_SECONDS (an idle process asks
#: the store about twice a second at most, not five times).
IDLE_SECONDS, IDLE_MOST_SECONDS = 0.2, 2.0
#: A subscription whose run has nothing new (or whose webhook is busy) is due again this long after:
#: the look for a run driven in another process (one driven here wakes the sender at its end or pause).
RECHECK_SECONDS = 0.5
#: Runs a sender remembers as having subscriptions that wait for news.
MAX_WAITING = 10_000
#: The first retry's delay; each next one doubles, up to BACKOFF_MAX_SECONDS.
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS = 0.5, 30.0
#: Failed POSTs in a row before a subscription is given up (``done``, with its ``lastError``).
MAX_ATTEMPTS = 10
#: Bodies sent per claim, at most: a long log goes out in several claims.
EVENTS_PER_CLAIM = 200
#: Deliveries a sender runs at once, and to one webhook origin (scheme, host, port) at once.
MAX_DELIVERIES, MAX_ORIGIN_DELIVERIES = 16, 2
#: How long an origin that timed out is left alone: its subscriptions wait, without an attempt.
ORIGIN_PAUSE_SECONDS = 5.0


class PushSender:
    """One per process and runtime: delivers the subscriptions of the mounts registered with it
    (by name: an A2A endpoint's RPC path, ``bread:runs``). :meth:`start` runs it on a daemon
    thread (a greenlet under gevent), and each delivery on one of its own, MAX_DELIVERIES at most."""

    def __init__(self, bread: Any):
        self.bread = bread
        self.owner = f"{bread.owner}:push:{new_id('s')}"
        self.mounts: dict[str, Mount] = {}
        self._tls = httpx.create_ssl_context()
        self._slots = threading.BoundedSemaphore(MAX_DELIVERIES)
        self._origins = _Origins()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: Set by a stop, or by the end or pause of a run whose subscriptions wait for news.
        self._news = threading.Event()
        #: Runs whose subscriptions a delivery here found waiting for news (MAX_WAITING at most).
        self._waiting: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._waiting_lock = threading.Lock()  # held for no I/O: the publish path only reads
        #: Of those, the ones that ended or paused here since the loop last looked.
        self._settled: collections.deque[str] = collections.deque()
        self._undo_listen: Any = None

    def start(self) -> None:
        if self._undo_listen is None:
            self._undo_listen = self.bread.on("crumb", self._heard)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="bread-webhooks", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._news.set()
        if self._undo_listen is not None:
            self._undo_listen()

    def _heard(self, frame: Frame) -> None:
        # On the run's publish path: only note it; the loop writes to the store.
        # Its run first: usually none is waited for, and that test is cheaper than the type's.
        if frame.run_id in self._waiting and frame.type in STREAM_END:
            self._settled.append(frame.run_id)
            self._news.set()

    def _loop(self) -> None:
        idle = IDLE_SECONDS
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=IDLE_SECONDS):
                continue  # every delivery is under way
            try:
                self._hasten_settled()
                config = self._claim()
            except Exception:  # the sender outlives any one failure; the next turn retries
                log.exception("the webhook sender could not claim a subscription")
                config = None
            if config is None:
                self._slots.release()
                if self._news.wait(idle):
                    self._news.clear()
                    idle = IDLE_SECONDS
                else:
                    idle = min(idle * 2, IDLE_MOST_SECONDS)
                continue
            idle = IDLE_SECONDS
            delivery = threading.Thread(target=self._deliver_in_slot, args=(config,), name="bread-webhook-delivery")
            delivery.daemon = True
            delivery.start()

    def _deliver_in_slot(self, config: dict[str, Any]) -> None:
        try:
            self._deliver(config)
        except Exception:  # the store failed: the claim lapses, and the subscription is taken again
            log.exception("webhook delivery to %s for run %s failed", config["url"], config["taskId"])
        finally:
            self._slots.release()

    def _hasten_settled(self) -> None:
        while self._settled:
            run_id = self._settled.popleft()
            with self._waiting_lock:
                self._waiting.pop(run_id, None)
            self.pushes.hasten_push(run_id, time.time())

    def step(self) -> bool:
        """Claim one due subscription and deliver what it has, in this thread; False when none
        was due."""
        self._hasten_settled()
        config = self._claim()
        if config is not None:
            self._deliver(config)
        return config is not None

    @property
    def pushes(self) -> PushStore:
        """The store, in the role the sender needs of it (``start`` runs only on one that plays it)."""
        return self.bread.store

    def _claim(self) -> dict[str, Any] | None:
        now = time.time()
        return self.pushes.claim_push(self.owner, now, now + CLAIM_SECONDS)

    def _deliver(self, config: dict[str, Any]) -> None:
        mount = self.mounts.get(config["mount"])
        if mount is None:  # another process's mount: leave it to the senders there
            self._settle(config, nextAttemptAt=time.time() + RECHECK_SECONDS)
        else:
            self.deliver(mount, config)

    def deliver(self, mount: Mount, config: dict[str, Any]) -> None:
        record = self.bread.store.get_run(config["taskId"])  # before the log: if ended, the log is whole
        if record is None:
            self._settle(config, done=True, lastError="the task is gone")
            return
        events = mount.events(self.bread, record)
        pending = events[config["delivered"] : config["delivered"] + EVENTS_PER_CLAIM]
        sent = self._send(mount, config, pending, record.get(TRACE_FIELD) or {}) if pending else 0
        if sent is None:
            return
        delivered = config["delivered"] + sent
        ended = mount.ended(record) and delivered == len(events)
        if delivered == len(events) and not ended:
            self._wait_for_news(config["taskId"])
        due = time.time() + (0 if delivered < len(events) else RECHECK_SECONDS)
        self._settle(config, delivered=delivered, attempts=0, nextAttemptAt=due, lastError=None, done=ended)

    def _wait_for_news(self, run_id: str) -> None:
        """Hasten the run's subscriptions when it ends or pauses here (before the settle: an end
        between the two finds the subscription claimed, and the recheck takes it)."""
        with self._waiting_lock:
            self._waiting[run_id] = None
            self._waiting.move_to_end(run_id)
            while len(self._waiting) > MAX_WAITING:
                self._waiting.popitem(last=False)

    def _send(
        self, mount: Mount, config: dict[str, Any], bodies: list[dict[str, Any]], trace: dict[str, str]
    ) -> int | None:
        """POST ``bodies`` in order while the claim surely holds, each with the run's ``trace``
        headers (its span's ``traceparent``, when traced); how many the webhook took, or None when
        the subscription was settled here (a failure, or its origin busy or paused)."""
        try:
            hook = address.Webhook(config["url"], mount.allow_private_webhooks)
        except address.BadWebhook as exc:
            self._failed(config, config["delivered"], str(exc))
            return None
        wait_until = self._origins.enter(hook.origin, time.time())
        if wait_until is not None:  # not an attempt of this subscription's: it waits its turn
            self._settle(config, nextAttemptAt=wait_until)
            return None
        # Stop while the claim surely holds: past it another sender may start on this subscription.
        deadline = config["claimedUntil"] - address.CONNECT_SECONDS - address.ANSWER_SECONDS - 1.0
        slow = False
        try:
            with address.client(self._tls) as client:
                for sent, body in enumerate(bodies):
                    if time.time() > deadline:
                        return sent
                    started = time.monotonic()
                    error = self._post(client, hook, mount, config, body, trace)
                    if error is not None:
                        slow = time.monotonic() - started >= address.CONNECT_SECONDS  # it timed out
                        self._failed(config, config["delivered"] + sent, error)
                        return None
            return len(bodies)
        finally:
            self._origins.leave(hook.origin, time.time() + ORIGIN_PAUSE_SECONDS if slow else None)

    def _post(
        self,
        client: httpx.Client,
        hook: address.Webhook,
        mount: Mount,
        config: dict[str, Any],
        body: Any,
        trace: dict[str, str],
    ) -> str | None:
        """POST one event; None when the webhook took it (2xx), else what went wrong."""
        try:
            content = encode(body)
            status = hook.post(client, content, {**trace, **mount.headers(config, content)})
        except Exception as exc:  # whatever it is, a failed attempt: the sender goes on
            return str(exc) or type(exc).__name__
        return None if 200 <= status < 300 else f"the webhook answered {status}"

    def _failed(self, config: dict[str, Any], delivered: int, error: str) -> None:
        attempts = config["attempts"] + 1
        if attempts >= MAX_ATTEMPTS:
            log.warning("webhook delivery to %s for run %s given up: %s", config["url"], config["taskId"], error)
        delay = min(BACKOFF_SECONDS * 2 ** (attempts - 1), BACKOFF_MAX_SECONDS)
        self._settle(
            config,
            delivered=delivered,
            attempts=attempts,
            nextAttemptAt=time.time() + delay,
            lastError=error,
            done=attempts >= MAX_ATTEMPTS,
        )

    def _settle(self, config: dict[str, Any], **fields: Any) -> None:
        self.pushes.settle_push(config["taskId"], config["id"], self.owner, **fields)


class _Origins:
    """This process's deliveries per webhook origin: how many are under way (at most
    MAX_ORIGIN_DELIVERIES), and until when an origin that timed out is left alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: collections.Counter[tuple[Any, ...]] = collections.Counter()
        self._paused: dict[tuple[Any, ...], float] = {}

    def enter(self, origin: tuple[Any, ...], now: float) -> float | None:
        """Count a delivery to ``origin`` in; None when it may go, else when to try again."""
        with self._lock:
            until = self._paused.get(origin, 0.0)
            if until > now:
                return until
            self._paused.pop(origin, None)
            if self._busy[origin] >= MAX_ORIGIN_DELIVERIES:
                return now + RECHECK_SECONDS
            self._busy[origin] += 1
            return None

    def leave(self, origin: tuple[Any, ...], paused_until: float | None) -> None:
        with self._lock:
            self._busy[origin] -= 1
            if not self._busy[origin]:
                del self._busy[origin]
            if paused_until is not None:
                self._paused[origin] = paused_until


def encode(body: Any) -> bytes:
    """A body as the bytes POSTed (and signed): compact JSON in UTF-8."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_senders: dict[int, PushSender] = {}
_senders_lock = threading.Lock()


def sender_of(bread: Any) -> PushSender:
    """This process's sender for ``bread``."""
    with _senders_lock:
        sender = _senders.get(id(bread))
        if sender is None or sender.bread is not bread:
            sender = _senders[id(bread)] = PushSender(bread)
        return sender
