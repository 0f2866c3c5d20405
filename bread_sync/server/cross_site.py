"""The cross-site rule: a web page of another site may not drive the server.

A page can send a POST anywhere without a preflight (``mode: "no-cors"``, ``text/plain``), and
its browser adds whatever Host the page addressed, loopback included: the Host rule does not
stop it, and with auth off nothing else would. Browsers say where a request comes from, in
``Origin`` (on every cross-origin request but a plain GET, and on same-origin writes) and in
``Sec-Fetch-Site`` (on every request); clients that are not browsers send neither and are never
refused here. Like Go's ``http.CrossOriginProtection``, an ``Origin`` whose host is the
request's own Host is the server's own origin (the scheme is not compared: behind a proxy that
ends TLS the server sees http where the page was https).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from flask import request

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values that mean another site's page sent the request.
_OTHER_SITES = frozenset({"cross-site", "same-site"})


def is_cross_site(cors_origins: Sequence[str]) -> bool:
    """Whether a browser sent this request for a page the server does not serve or allow."""
    origin = request.headers.get("Origin")
    if origin is not None:
        return not (_is_own_origin(origin) or "*" in cors_origins or origin in cors_origins)
    return request.method not in SAFE_METHODS and request.headers.get("Sec-Fetch-Site") in _OTHER_SITES


def _is_own_origin(origin: str) -> bool:
    if request.headers.get("Sec-Fetch-Site") == "same-origin":
        return True  # the browser's own word
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    host = request.headers.get("Host", "")
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.lower()
