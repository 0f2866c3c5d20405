"""The cross-site rule: a web page of another site may not drive the server.

A page can send a POST anywhere without a preflight (``mode: "no-cors"``, ``text/plain``), and
its browser adds whatever Host the page addressed, loopback included: the Host rule does not
stop it, and with auth off nothing else would. Browsers say where a request comes from, in
``Origin`` (on every cross-origin request but a plain GET, and on same-origin writes) and in
``Sec-Fetch-Site`` (on every request); clients that are not browsers send neither and are never
refused here. Like Go's ``http.CrossOriginProtection``, an ``Origin`` whose host is the
request's own Host is the server's own origin (the scheme is not compared: behind a proxy that
ends TLS the server sees http where the page was https).

The 403 says nothing (the spec fixes its body), so the operator is told in the log instead:
one warning per rule and origin an hour, naming what would allow it (:class:`RefusalLog`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from flask import request

from .cors import check_origins

log = logging.getLogger("bread_sync.server")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values that mean another site's page sent the request.
_OTHER_SITES = frozenset({"cross-site", "same-site"})
#: The rules that refuse: an ``Origin`` neither the server's own nor listed; a write that says
#: ``Sec-Fetch-Site: cross-site`` or ``same-site`` with no ``Origin``.
ORIGIN_RULE = "Origin"
FETCH_SITE_RULE = "Sec-Fetch-Site"
#: Distinct (rule, origin) warnings one app logs in a period, at most: anyone may send refused
#: requests without end, each with a new origin.
MAX_LOGGED_REFUSALS = 64
#: How long the set of what was told holds: then it starts afresh, so a flood of origins (a
#: scanner's) keeps the operator's own misconfigured origin out of the log for an hour at most.
REFUSAL_LOG_PERIOD_SECONDS = 3600.0
_LAST_NOTE = (
    f" (the last such warning this hour: {MAX_LOGGED_REFUSALS} distinct ones were logged; "
    "further refusals are not, until the hour is up)"
)
#: How much of a header a warning quotes: a header may be kilobytes long.
_SHOWN_CHARS = 200


class Refusal(NamedTuple):
    """A rule that refused this request, and the value of the header it read."""

    rule: str
    header: str


def refused_by(cors_origins: Sequence[str]) -> Refusal | None:
    """The rule that refuses this request (a browser's, for a page the server does not serve
    or allow), or None."""
    origin = request.headers.get("Origin")
    if origin is not None:
        allowed = _is_own_origin(origin) or "*" in cors_origins or origin in cors_origins
        return None if allowed else Refusal(ORIGIN_RULE, origin)
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if request.method not in SAFE_METHODS and fetch_site in _OTHER_SITES:
        return Refusal(FETCH_SITE_RULE, fetch_site)
    return None


def _is_own_origin(origin: str) -> bool:
    if request.headers.get("Sec-Fetch-Site") == "same-origin":
        return True  # the browser's own word
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    host = request.headers.get("Host", "")
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.lower()


class RefusalLog:
    """Warns once per rule and origin that a cross-site request was refused, and what would
    allow it, for at most :data:`MAX_LOGGED_REFUSALS` of them an hour: a set of that many keys
    bounds both the lines and the memory, however many origins a flood sends, and a refusal
    already told costs one lookup. The set starts afresh each :data:`REFUSAL_LOG_PERIOD_SECONDS`,
    so a flood cannot silence the log for the rest of the process's life.

    ``clock``: monotonic seconds (tests drive their own)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._told: set[tuple[str, str | None]] = set()
        self._period_began = clock()
        self._lock = threading.Lock()  # threaded servers: the bound holds exactly

    def tell(self, refusal: Refusal) -> None:
        shown = _shown(refusal.header)
        with self._lock:
            if not self._first_time(refusal.rule, shown):
                return
            last = len(self._told) == MAX_LOGGED_REFUSALS
        log.warning("%s%s", _refusal_message(refusal.rule, shown), _LAST_NOTE if last else "")

    def _first_time(self, rule: str, shown: str | None) -> bool:
        now = self._clock()
        if now - self._period_began >= REFUSAL_LOG_PERIOD_SECONDS:
            self._told.clear()
            self._period_began = now
        key = (rule, shown)
        if key in self._told or len(self._told) >= MAX_LOGGED_REFUSALS:
            return False
        self._told.add(key)
        return True


def _shown(header: str | None) -> str | None:
    return None if header is None else header[:_SHOWN_CHARS]


def _refusal_message(rule: str, shown: str | None) -> str:
    where = f"403 to {_shown(request.method)!r} {_shown(request.path)!r}"
    if rule == FETCH_SITE_RULE:
        return (
            f"cross-site rule (Sec-Fetch-Site): {where}, a write with Sec-Fetch-Site: {shown!r} and no Origin; "
            "a page of another site sent it (another port of this host is one), and without an Origin no "
            "setting allows it: serve the page from this server's origin. See docs/security.md#cross-site-requests"
        )
    return (
        f"cross-site rule (Origin): {where} from Origin {shown!r}, which is not this server's own "
        f"(Host {_shown(request.headers.get('Host'))!r}) nor in config.server.cors_origins; {_how_to_allow(shown)}. "
        "See docs/security.md#cross-site-requests"
    )


def _how_to_allow(origin: str | None) -> str:
    try:
        check_origins([origin or ""], auth=True)
    except ValueError:
        return (
            "no setting allows such an origin (a sandboxed frame, a file: or data: page): "
            "serve the page from this server's origin"
        )
    return (
        "to let its pages call the API, add it to ServerSettings(cors_origins=[...]) "
        "(BREAD_SYNC_CORS_ORIGINS in an embedding Flask app's config)"
    )
