"""Push notifications: each subscribed task's status and artifact updates POSTed to the client's
webhook by the webhook sender (``bread_sync.webhooks``), which works from the store alone.

What is A2A's here: the bodies (the task's log translated as a resubscribe from the start would
give it, in the endpoint's version's shapes), when a task has no more, and the headers (the
client's token, its credentials)."""

from __future__ import annotations

from typing import Any

from ...stores import read_log
from ...webhooks import PushStore, records_pushes
from ...webhooks.address import BadWebhook, Webhook
from ...webhooks.sender import sender_of
from .parts import BadParams
from .translator import RUN_STATES, TERMINAL_STATES, A2ATranslator

__all__ = ["A2APushes", "PushStore", "check_webhook", "records_pushes", "sender_of"]

#: The header the client's token comes back in (the a2a-sdk's own server sends the same).
TOKEN_HEADER = "X-A2A-Notification-Token"


def check_webhook(url: str, allow_private: bool) -> None:
    """Refuse (BadParams) a webhook url the sender could not call, or (unless ``allow_private``)
    whose host resolves to an address that is not public: a client must not make the server
    call into its own network."""
    try:
        Webhook(url, allow_private)
    except BadWebhook as exc:
        raise BadParams(str(exc)) from None


class A2APushes:
    """An A2A endpoint (``mount``, the plugin) as the sender's mount of its subscriptions."""

    def __init__(self, mount: Any):
        self.mount = mount
        self.allow_private_webhooks = mount.allow_private_webhooks

    def events(self, bread: Any, record: dict[str, Any]) -> list[Any]:
        """The task's events as a resubscribe from its start gives them (the Task aside)."""
        translator = A2ATranslator(record["id"], self.mount.base_url or "")
        events = (event for frame in read_log(bread.store, record["id"]) for event in translator(frame.crumb))
        return [self.mount.dialect.event(record["id"], record["sessionId"], event) for event in events]

    def ended(self, record: dict[str, Any]) -> bool:
        return RUN_STATES[record["status"]] in TERMINAL_STATES

    def headers(self, config: dict[str, Any], content: bytes) -> dict[str, str]:
        headers = {}
        if config.get("token"):
            headers[TOKEN_HEADER] = config["token"]
        auth = config.get("authentication")
        if auth and auth.get("credentials"):
            headers["Authorization"] = f"{auth['scheme']} {auth['credentials']}"
        return headers
