"""The background runs' webhooks: a run's report POSTed when it pauses for a human and when it
ends, signed with the secret its request named.

A run's webhook is a subscription of the store's push role (``taskId`` the run's id, ``id``
:data:`SUBSCRIPTION`, ``mount`` :data:`MOUNT`, ``token`` the secret), delivered by the one
webhook sender of ``sender.py``, so a report goes out once across workers and replicas, retried
with back-off. The bodies are read from the run's log, so any process can send them."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from typing import Any

from .. import crumbs as c
from ..runs import summarize
from ..stores import FINISHED, RunRecord, read_log
from . import records_pushes

#: The sender's name for the background runs' subscriptions.
MOUNT = "bread:runs"
#: The subscription id of a run's webhook: one per run.
SUBSCRIPTION = "webhook"
#: The signature's header: ``sha256=`` and the lowercase hex HMAC-SHA256 of the body's bytes.
SIGNATURE_HEADER = "Bread-Signature"
RUN_ID_HEADER = "Bread-Run-Id"
#: What in a run's log is a report: its pauses, and its end.
_PAUSE = c.HUMAN_REQUIRED
#: The statuses a wait ends at: a run ended, or paused for a human.
SETTLED = FINISHED | {"paused"}
#: A wait reads the run's record this often: first quickly (a short run), then less and less.
POLL_FIRST_SECONDS, POLL_MOST_SECONDS = 0.02, 0.25


def run_report(record: dict[str, Any], last: dict[str, Any] | None) -> dict[str, Any]:
    """A run's record as routes answer it, with what its ``last`` crumb (its end or pause, when
    it has one) says: ``output`` (completed), ``error`` (failed, cancelled) or ``checkpoint``
    (paused), each null otherwise. What ``GET /runs/<runId>/wait`` answers and a webhook gets."""
    report = RunRecord.model_validate(record).model_dump(mode="json")
    report.update(output=None, error=None, checkpoint=None, seq=None)
    if last is None or last["type"] not in c.STREAM_END:
        return report
    result = summarize(record["id"], [last])
    report.update(output=result.output, checkpoint=result.checkpoint, seq=last.get("seq"))
    report["error"] = result.error.to_body()["error"] if result.error else None  # {code, message}
    if result.status == "paused":  # a pause past which the run went on: as it was then
        report.update(status="paused", checkpointId=result.checkpoint["checkpointId"])
    return report


def wait_for_report(store: Any, run_id: str, timeout: float) -> dict[str, Any] | None:
    """The run's report once it ended or paused (its ``status`` in :data:`SETTLED`), or as it
    stands after ``timeout`` seconds; None when there is no such run. It polls the record: any
    process may drive the run, and a sleep gives a gevent worker's other requests their turn."""
    deadline, pause = time.monotonic() + timeout, POLL_FIRST_SECONDS
    while True:
        record = store.get_run(run_id)
        if record is None:
            return None
        left = deadline - time.monotonic()
        if record["status"] in SETTLED:
            return run_report(record, _last_crumb(store, run_id))
        if left <= 0:
            return run_report(record, None)
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MOST_SECONDS)


def _last_crumb(store: Any, run_id: str) -> dict[str, Any] | None:
    last = store.last_seq(run_id)
    frames = store.get_crumbs(run_id, last - 1, limit=1) if last else []
    return _with_seq(frames[0]) if frames else None


def sign(secret: str, content: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``content`` with ``secret`` (UTF-8)."""
    return "sha256=" + hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()


def subscribe(store: Any, run_id: str, url: str, secret: str | None) -> None:
    """Have the run's reports POSTed to ``url`` (checked by the caller)."""
    config = {"taskId": run_id, "id": SUBSCRIPTION, "mount": MOUNT, "url": url, "token": secret}
    store.save_push_config({**config, "authentication": None})


class _Read:
    """What a mount has read of a run's log: up to which seq, its pauses, its last crumb."""

    __slots__ = ("position", "pauses", "last")

    def __init__(self) -> None:
        self.position = 0
        self.pauses: list[dict[str, Any]] = []
        self.last: dict[str, Any] | None = None

    def read_on(self, store: Any, run_id: str) -> None:
        for frame in read_log(store, run_id, after=self.position):
            self.last = _with_seq(frame)
            if frame.crumb["type"] == _PAUSE:
                self.pauses.append(self.last)
            self.position = frame.seq


class RunWebhooks:
    """The sender's mount of the background runs' webhooks.

    It remembers what it read of each unfinished run's log (MAX_READ runs), so a recheck of a
    running run reads only the crumbs appended since, not the whole log again."""

    #: Unfinished runs whose reading a mount keeps; the least recently checked go first.
    MAX_READ = 1000

    def __init__(self, allow_private_webhooks: bool):
        self.allow_private_webhooks = allow_private_webhooks
        self._lock = threading.Lock()
        self._read: OrderedDict[str, _Read] = OrderedDict()

    def events(self, bread: Any, record: dict[str, Any]) -> list[Any]:
        """One report per pause in the run's log, then one for its end once it ended."""
        run_id = record["id"]
        with self._lock:
            read = self._read.pop(run_id, None) or _Read()
        read.read_on(bread.store, run_id)
        reports = [run_report(record, pause) for pause in read.pauses]
        if record["status"] in FINISHED:
            reports.append(run_report(record, read.last))
        else:
            self._keep(run_id, read)
        return reports

    def _keep(self, run_id: str, read: _Read) -> None:
        with self._lock:
            self._read[run_id] = read
            while len(self._read) > self.MAX_READ:
                self._read.popitem(last=False)

    def ended(self, record: dict[str, Any]) -> bool:
        return record["status"] in FINISHED

    def headers(self, config: dict[str, Any], content: bytes) -> dict[str, str]:
        headers = {RUN_ID_HEADER: config["taskId"]}
        if config.get("token"):
            headers[SIGNATURE_HEADER] = sign(config["token"], content)
        return headers


def _with_seq(frame: Any) -> dict[str, Any]:
    return {**frame.crumb, "seq": frame.seq}


def start_sender(bread: Any, allow_private_webhooks: bool) -> bool:
    """Run this process's webhook sender (once per runtime) with the runs' mount; False when it
    cannot: no ``httpx`` (the ``webhooks`` extra), or a store that does not keep subscriptions."""
    if not records_pushes(bread.store):
        return False
    try:
        from .sender import sender_of
    except ImportError:  # httpx is an extra's
        return False
    sender = sender_of(bread)
    sender.mounts.setdefault(MOUNT, RunWebhooks(allow_private_webhooks))
    sender.start()
    return True
