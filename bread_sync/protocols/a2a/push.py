"""Push notifications: each subscribed task's status and artifact updates POSTed to the client's
webhook, by a sender outside any request.

The sender works from the store alone, so it needs no process that ran the task: it claims a
subscription that is due (one claimer wins, across workers and replicas), translates the task's
log as a resubscribe from the start would, POSTs the events past the subscription's
``delivered`` count one at a time, in order, and settles it: the new count, or on a failure the
next attempt's time (exponential backoff). Every process running a push-enabled mount runs one
sender; a restart loses nothing (a POST answered but not yet settled is sent again: at least
once)."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from ...runtime import new_id
from ...stores import read_log
from .parts import BadParams
from .translator import RUN_STATES, TERMINAL_STATES, A2ATranslator

log = logging.getLogger("bread_sync.protocols.a2a.push")

#: How long a sender holds a claimed subscription: past it, another sender may take it.
CLAIM_SECONDS = 30.0
#: A sender with nothing due looks again this often.
IDLE_SECONDS = 0.2
#: A subscription whose task has nothing new is due again this long after.
RECHECK_SECONDS = 0.5
#: The first retry's delay; each next one doubles, up to BACKOFF_MAX_SECONDS.
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS = 0.5, 30.0
#: Failed POSTs in a row before a subscription is given up (``done``, with its ``lastError``).
MAX_ATTEMPTS = 10
#: Events sent per claim, at most: a long log goes out in several claims.
EVENTS_PER_CLAIM = 200
#: A webhook's answer must arrive within this long.
POST_TIMEOUT_SECONDS = 10.0
#: The header the client's token comes back in (the a2a-sdk's own server sends the same).
TOKEN_HEADER = "X-A2A-Notification-Token"


def check_webhook(url: str, allow_private: bool) -> None:
    """Refuse a webhook that is not http(s), or (unless ``allow_private``) whose host resolves to
    a loopback, private, link-local or otherwise non-public address: a client must not make the
    server call into its own network."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadParams("a push notification url must be an absolute http(s) url")
    if allow_private:
        return
    try:
        found = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)}
    except OSError:
        raise BadParams(f"the push notification host {parts.hostname} does not resolve") from None
    for address in found:
        if not ipaddress.ip_address(address.split("%")[0]).is_global:
            raise BadParams("a push notification url must not reach a loopback or private address")


class PushSender:
    """One per process and runtime: delivers the subscriptions of the mounts registered with it
    (by RPC path). :meth:`start` runs it on a daemon thread (a greenlet under gevent)."""

    def __init__(self, bread: Any):
        self.bread = bread
        self.owner = f"{bread.owner}:push:{new_id('s')}"
        self.mounts: dict[str, Any] = {}
        self._client = httpx.Client(timeout=POST_TIMEOUT_SECONDS, follow_redirects=False)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="a2a-push", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.step()
            except Exception:  # the sender outlives any one failure; the next step retries
                log.exception("A2A push sender step failed")
                busy = False
            if not busy:
                self._stop.wait(IDLE_SECONDS)

    def step(self) -> bool:
        """Claim one due subscription and deliver what it has; False when none was due."""
        now = time.time()
        config = self.bread.store.claim_push(self.owner, now, now + CLAIM_SECONDS)
        if config is None:
            return False
        mount = self.mounts.get(config["mount"])
        if mount is None:  # another process's mount: leave it to the senders there
            self._settle(config, nextAttemptAt=now + RECHECK_SECONDS)
            return True
        self.deliver(mount, config)
        return True

    def deliver(self, mount: Any, config: dict[str, Any]) -> None:
        record = self.bread.store.get_run(config["taskId"])  # before the log: if ended, the log is whole
        if record is None:
            self._settle(config, done=True, lastError="the task is gone")
            return
        # Stop while the claim surely holds: past it another sender may start on this subscription.
        deadline = config["claimedUntil"] - POST_TIMEOUT_SECONDS - 1.0
        events = self._events(mount, record)
        pending = events[config["delivered"] : config["delivered"] + EVENTS_PER_CLAIM]
        delivered = config["delivered"]
        for body in pending:
            if time.time() > deadline:
                break
            error = self._post(mount, config, body)
            if error is not None:
                self._failed(config, delivered, error)
                return
            delivered += 1
        ended = RUN_STATES[record["status"]] in TERMINAL_STATES and delivered == len(events)
        due = time.time() + (0 if delivered < len(events) else RECHECK_SECONDS)
        self._settle(config, delivered=delivered, attempts=0, nextAttemptAt=due, lastError=None, done=ended)

    def _events(self, mount: Any, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The task's events as a resubscribe from its start gives them (the Task aside), each
        as the webhook's body: the same list each time, so ``delivered`` counts into it."""
        translator = A2ATranslator(record["id"], mount.base_url or "")
        events = (event for frame in read_log(self.bread.store, record["id"]) for event in translator(frame.crumb))
        return [mount.dialect.event(record["id"], record["sessionId"], event) for event in events]

    def _post(self, mount: Any, config: dict[str, Any], body: dict[str, Any]) -> str | None:
        """POST one event; None when the webhook took it (2xx), else what went wrong."""
        try:
            check_webhook(config["url"], mount.allow_private_webhooks)
            answer = self._client.post(config["url"], json=body, headers=_headers(config))
        except (BadParams, httpx.HTTPError) as exc:
            return str(exc) or type(exc).__name__
        return None if answer.is_success else f"the webhook answered {answer.status_code}"

    def _failed(self, config: dict[str, Any], delivered: int, error: str) -> None:
        attempts = config["attempts"] + 1
        if attempts >= MAX_ATTEMPTS:
            log.warning("A2A push to %s for task %s given up: %s", config["url"], config["taskId"], error)
        delay = min(BACKOFF_SECONDS * 2 ** (attempts - 1), BACKOFF_MAX_SECONDS)
        self._settle(config, delivered=delivered, attempts=attempts, nextAttemptAt=time.time() + delay,
                     lastError=error, done=attempts >= MAX_ATTEMPTS)  # fmt: skip

    def _settle(self, config: dict[str, Any], **fields: Any) -> None:
        self.bread.store.settle_push(config["taskId"], config["id"], self.owner, **fields)


def _headers(config: dict[str, Any]) -> dict[str, str]:
    headers = {}
    if config.get("token"):
        headers[TOKEN_HEADER] = config["token"]
    auth = config.get("authentication")
    if auth and auth.get("credentials"):
        headers["Authorization"] = f"{auth['scheme']} {auth['credentials']}"
    return headers


_senders: dict[int, PushSender] = {}
_senders_lock = threading.Lock()


def sender_of(bread: Any) -> PushSender:
    """This process's sender for ``bread``."""
    with _senders_lock:
        sender = _senders.get(id(bread))
        if sender is None or sender.bread is not bread:
            sender = _senders[id(bread)] = PushSender(bread)
        return sender
