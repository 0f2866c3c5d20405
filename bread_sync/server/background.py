"""Background runs: a run request answered at once (RFC 7240 ``Prefer: respond-async``), a wait
for a run's end or pause, and a run's webhook, checked before the run and subscribed after.

A background run is started as any other (server/streams.py), tailed by nothing: inline, it goes
on in this process's runner, detached from the request; with the ``huey`` executor it is queued
for the workers. Its report is read back from the store (``webhooks/runs.py``), by ``wait`` or
by the webhook sender of whichever process claims its subscription."""

from __future__ import annotations

from typing import Any

from flask import jsonify, request

from ..errors import INVALID_REQUEST, NOT_SUPPORTED, RUN_NOT_FOUND, BreadError, install_hint
from ..webhooks import records_pushes
from ..webhooks.runs import SETTLED, start_sender, subscribe
from .guard import authorize_run, valid_query
from .schemas import WaitQuery, WebhookRef
from .state import state

PREFERENCE = "respond-async"


def prefers_async() -> bool:
    """Whether the request's ``Prefer`` headers ask for ``respond-async`` (RFC 7240: a list of
    ``token[=value][; param]``, tokens compared without case).

    A WSGI server joins repeated headers with commas into one environ key: one ``get``, where
    ``getlist`` walked the whole environ on every run request."""
    header = request.headers.get("Prefer")
    if header is None:
        return False
    return any(preference.split(";")[0].split("=")[0].strip().lower() == PREFERENCE for preference in header.split(","))


def check_webhook(webhook: WebhookRef | None) -> None:
    """Refuse a webhook before any run: ``INVALID_REQUEST`` for a url the sender could not call
    or may not (a loopback or private address, unless ``allow_private_webhooks``),
    ``NOT_SUPPORTED`` on a server that cannot call webhooks."""
    if webhook is None:
        return
    current = state().bread
    try:
        from ..webhooks.address import BadWebhook, Webhook
    except ImportError:  # httpx is an extra's
        raise BreadError(NOT_SUPPORTED, f"this server cannot call webhooks: {install_hint('webhooks')}") from None
    if not records_pushes(current.store):
        raise BreadError(NOT_SUPPORTED, "this server's store keeps no webhook subscriptions")
    try:
        Webhook(webhook.url, current.config.server.allow_private_webhooks)
    except BadWebhook as exc:
        raise BreadError(INVALID_REQUEST, str(exc)) from None


def subscribe_webhook(run_id: str, webhook: WebhookRef | None) -> None:
    """Have the run's reports POSTed to its (checked) webhook, by this process's sender or
    another's."""
    if webhook is None:
        return
    current = state().bread
    subscribe(current.store, run_id, webhook.url, webhook.secret)
    start_sender(current, current.config.server.allow_private_webhooks)


def accepted(run_id: str) -> Any:
    """202 ``{"runId", "status": "queued"}``, ``Location`` the run's record."""
    location = f"{request.script_root}{state().url_prefix}/runs/{run_id}"
    headers = {"Location": location, "Preference-Applied": PREFERENCE, "Bread-Run-Id": run_id}
    return jsonify(runId=run_id, status="queued"), 202, headers


def wait_for_run(runId: str) -> Any:  # noqa: N803 - the name http-api.md gives args
    """``GET /runs/<runId>/wait``: the run's report once it ended or paused (200), or as it is
    when ``?timeout=`` seconds passed first (202)."""
    timeout = valid_query(WaitQuery).timeout
    authorize_run(runId)
    report = state().bread.wait(runId, timeout)
    if report is None:
        raise BreadError(RUN_NOT_FOUND, f"no run {runId}")
    return jsonify(report), 200 if report["status"] in SETTLED else 202
