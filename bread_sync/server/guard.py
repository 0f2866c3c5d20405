"""What every bread route checks before its handler: the Host rule and the body limit."""

from __future__ import annotations

import json
import re
from typing import Any

from flask import g, request

from ..errors import BODY_TOO_LARGE, INVALID_REQUEST, BreadError

# localhost, 127.0.0.1, ::1 and [::1], each with an optional port; nothing else is loopback
# (not localhost., 127.1, 0.0.0.0 or ::).
_LOOPBACK_HOST = re.compile(r"^(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$|^::1$", re.IGNORECASE)
LOOPBACK_BINDS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class Forbidden(Exception):
    """Answered as 403 ``{"error": "Forbidden"}`` exactly."""


def is_loopback_host(host: str | None) -> bool:
    return bool(host) and _LOOPBACK_HOST.match(host) is not None


def check_host() -> None:
    # The Host header as the client sent it; X-Forwarded-Host is deliberately ignored.
    if not is_loopback_host(request.headers.get("Host")):
        raise Forbidden()


def read_body(limit: int) -> None:
    """Read the raw body once, refusing more than ``limit`` bytes, with or without a
    Content-Length (a chunked upload is cut off at limit + 1 bytes)."""
    length = request.content_length
    if length is not None and length > limit:
        raise BreadError(BODY_TOO_LARGE, f"the request body is over the {limit}-byte limit")
    data = request.stream.read(limit + 1)
    if len(data) > limit:
        raise BreadError(BODY_TOO_LARGE, f"the request body is over the {limit}-byte limit")
    g.bread_body = data


def json_body() -> dict[str, Any]:
    """The request body as a JSON object; an empty body is ``{}``."""
    data = g.get("bread_body", b"")
    if not data.strip():
        return {}
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise BreadError(INVALID_REQUEST, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BreadError(INVALID_REQUEST, "the request body must be a JSON object")
    return body
