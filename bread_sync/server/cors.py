"""CORS for the bread routes: listed origins only, preflights answered before any auth.

A browser never sends credentials on a preflight, so the preflight is answered without them;
the request that follows is authenticated as usual. Credentials travel in the Authorization
header (or a stream token in the query), never in cookies, so ``Allow-Credentials`` is not sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask import Response, current_app, request

ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID, Prefer"
EXPOSE_HEADERS = "Bread-Run-Id, Location, Preference-Applied"
MAX_AGE_SECONDS = 600


def check_origins(origins: Sequence[str], auth: bool) -> list[str]:
    """The configured origins, refusing ones a browser never sends (a path, a trailing slash),
    and ``*`` without auth: with auth off, the cross-site rule is all that keeps a web page from
    driving the server, and ``*`` would let every page's through."""
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if origin != "*" and (not sep or not scheme or not rest or "/" in rest):
            raise ValueError(f"CORS origin {origin!r} must look like https://app.example.com (no path), or be *")
    if "*" in origins and not auth:
        raise ValueError(
            "CORS origin * lets any web page drive a server without auth: list the origins, or add the auth plugin"
        )
    return list(origins)


def allowed_origin(origins: Sequence[str]) -> str | None:
    """What ``Access-Control-Allow-Origin`` says for this request, if anything."""
    origin = request.headers.get("Origin")
    if not origin or not origins:
        return None
    if "*" in origins:
        return "*"
    return origin if origin in origins else None


def preflight(origins: Sequence[str]) -> Response | None:
    """The answer to a CORS preflight, when origins are configured; None for any other request."""
    if not origins or not is_preflight():
        return None
    response = current_app.make_default_options_response()
    if allowed_origin(origins):
        response.headers["Access-Control-Allow-Methods"] = ", ".join(sorted(response.allow))
        response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
        response.headers["Access-Control-Max-Age"] = str(MAX_AGE_SECONDS)
    return response


def is_preflight() -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def add_headers(response: Response, origins: Sequence[str]) -> Response:
    allowed = allowed_origin(origins)
    if allowed:
        response.headers["Access-Control-Allow-Origin"] = allowed
        response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    if origins and "*" not in origins:
        response.vary.add("Origin")  # the answer differs per origin: caches must key on it
    return response
