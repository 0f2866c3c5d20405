"""Webhooks: POSTs to a client's url by a sender outside any request, once across processes.

The contract of the store role a sender needs (:class:`PushStore`, subscriptions it claims and
settles) and of what a sender delivers for (:class:`Mount`: the bodies a subscription's run has
for its webhook). The A2A bridge's push notifications and the background runs' webhooks are two
mounts of the one sender (``sender.py``), whose POSTs follow the one webhook rule
(``address.py``: resolve once, check every address, connect to the checked one). Nothing here is
imported by the core: it needs ``httpx``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..stores import missing_methods


class PushStore(Protocol):
    """The role a webhook sender needs of a store: keeping push subscriptions.

    Optional, found by :func:`records_pushes` (the first-party stores play it). A subscription
    is ``{taskId, id, mount, url, token, authentication, delivered, attempts, nextAttemptAt,
    lastError, done, claimedBy, claimedUntil, createdAt}``: ``taskId`` is its run's id,
    ``mount`` names what took it (whose bodies it is delivered), ``delivered`` counts the
    bodies sent to ``url`` so far (the record of its deliveries, which survives a restart);
    times are epoch seconds."""

    def save_push_config(self, config: dict[str, Any]) -> None:
        """Insert a subscription (``taskId``, ``id``, ``mount``, ``url``, ``token``,
        ``authentication``; ``delivered`` 0, due now), or replace the ``url``, ``token`` and
        ``authentication`` of the one with its ``(taskId, id)``, keeping its deliveries."""

    def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        """The task's subscriptions, oldest first."""

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        """Delete one; False when there was none."""

    def claim_push(self, owner: str, now: float, until: float) -> dict[str, Any] | None:
        """Atomically claim one subscription that is not ``done``, is due (``nextAttemptAt <=
        now``) and unclaimed (or whose claim expired): ``claimedBy = owner``, ``claimedUntil =
        until``, and return it; None when none is. One caller wins a claim, across processes."""

    def settle_push(self, task_id: str, config_id: str, owner: str, **fields: Any) -> bool:
        """Set ``delivered``, ``attempts``, ``nextAttemptAt``, ``lastError`` or ``done`` and
        release the claim, if ``owner`` still holds it; False (and no change) otherwise."""

    def hasten_push(self, task_id: str, now: float) -> bool:
        """Make the task's subscriptions that wait only for news (not ``done``, unclaimed, no
        failed attempt) due at ``now``; whether there was one. What a sender does when the
        task's run ends or pauses in its process, instead of waiting for the next recheck."""


class Mount(Protocol):
    """What a sender delivers for the subscriptions a mount took (``config["mount"]``)."""

    #: Whether its webhooks may reach loopback and private addresses.
    allow_private_webhooks: bool

    def events(self, bread: Any, record: dict[str, Any]) -> list[Any]:
        """The bodies the run of ``record`` has for a webhook so far, as JSON values: the same
        list each time, growing, so ``delivered`` counts into it."""

    def ended(self, record: dict[str, Any]) -> bool:
        """Whether the run of ``record`` has no more bodies to come."""

    def headers(self, config: dict[str, Any], content: bytes) -> dict[str, str]:
        """The headers of the POST of ``content`` to the subscription ``config``'s url."""


def records_pushes(store: object) -> bool:
    """Whether the store keeps push subscriptions (plays :class:`PushStore`)."""
    return not missing_methods(store, PushStore)
