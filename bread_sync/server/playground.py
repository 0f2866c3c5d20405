"""The playground: a page the server serves itself, to run its agents from a browser.

Plain HTML, CSS and one script (``static/``), served at ``GET /_bread/`` under the action
``playground.read`` when ``config.server.playground`` (``BREAD_PLAYGROUND``) is on. The files
hold no data: what the page does goes through the API with the caller's own key, so they load
without a credential (like ``/health``, before the auth plugin runs), and ``GET /`` sends a
browser to them. See docs/http.md#playground.
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

from flask import Response, current_app, redirect, request

from ..config import Config
from .actions import HTTP_ACTIONS, actions_of, register_http_route
from .guard import LOOPBACK_BINDS, accepts, has_auth, is_local_request

PATH = "/_bread/"
ENV_VAR = "BREAD_PLAYGROUND"
#: The page's files: the path under PATH, the file in static/ and its media type.
FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "playground.css": ("playground.css", "text/css; charset=utf-8"),
    "playground.js": ("playground.js", "text/javascript; charset=utf-8"),
}
#: Nothing is fetched from outside the server; images come from the API as blobs.
_POLICY = "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"


def register(app: Any) -> None:
    """The page's routes, one per file: any other path under PATH matches no route."""
    for name in FILES:
        register_http_route(app, "GET", PATH + name, HTTP_ACTIONS.playground_read, lambda name=name: serve(name))


def is_page_request() -> bool:
    """A GET of one of the page's own files (answered before any credential is asked for)."""
    action = actions_of(current_app).get(request.endpoint or "")
    return action == HTTP_ACTIONS.playground_read and request.method in ("GET", "HEAD")


def serve_request() -> Response:
    """The file this request names (see :func:`is_page_request`)."""
    return serve(request.path.rpartition("/")[2])


def serve(name: str) -> Response:
    filename, media_type = FILES[name]
    data = resources.files(__package__).joinpath("static", filename).read_bytes()
    response = Response(data, content_type=media_type)
    response.headers.update(
        {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": _POLICY}
    )
    return response


def root_redirect(prefix: str, auth: bool) -> Response | None:
    """``GET /`` (the prefix's root) from a browser, one whose ``Accept`` names ``text/html``
    (curl's ``*/*`` does not): a redirect to the page. None for anything else."""
    if request.method not in ("GET", "HEAD") or request.path not in (prefix or "/", prefix + "/"):
        return None
    if not accepts("text/html"):
        return None
    if not auth and not is_local_request():
        return None  # the local rule: as for any path of bread's
    return redirect(prefix + PATH, code=302)  # not 301: browsers would keep it after the page is off


def default_on(config: Config, host: str, dev: bool) -> Config:
    """``bread-sync dev``, and ``bread-sync start`` on a loopback bind, serve the page unless the
    config or ``BREAD_PLAYGROUND`` says otherwise or auth is on. The choice goes to the
    environment too: the reloader's child and gunicorn's workers load the config again."""
    if config.server.playground is not None or has_auth(config.plugins) or not (dev or host in LOOPBACK_BINDS):
        return config
    os.environ[ENV_VAR] = "1"
    return config.model_copy(update={"server": config.server.model_copy(update={"playground": True})})
