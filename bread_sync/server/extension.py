"""The Flask extension: mounts the whole bread HTTP API into any Flask app."""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Flask, g, jsonify, request
from werkzeug.exceptions import HTTPException
from werkzeug.routing import RequestRedirect

from ..errors import INTERNAL, BreadError, internal_error
from ..plugins import hooks, named
from ..runtime import Bread, create_bread
from ..transports.http import HTTPTransport
from . import commands, cors, cross_site, files, metrics, playground, records, runs
from .actions import HEALTH_ENDPOINT, actions_of, authorize_args_of, body_limits_of, statuses_of
from .guard import (
    Forbidden,
    authorize_request,
    check_local,
    has_auth,
    is_local_request,
    read_body,
    read_rest_of_body,
    run_authorizer,
)
from .listen import unread_credentials_problem
from .runner import Runner
from .state import State, state

log = logging.getLogger("bread_sync.server")

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BreadSync:
    """``BreadSync(app, bread)`` or ``BreadSync(bread=bread).init_app(app)``.

    Settings, read from ``app.config`` with the bread config's values as defaults:
    ``BREAD_SYNC_MAX_BODY_BYTES``, ``BREAD_SYNC_MAX_FILE_BYTES``, ``BREAD_SYNC_MAX_CONCURRENT_RUNS``,
    ``BREAD_SYNC_RUN_TIMEOUT_SECONDS``, ``BREAD_SYNC_BODY_TIMEOUT_SECONDS``, ``BREAD_SYNC_CORS_ORIGINS``,
    ``BREAD_SYNC_PLAYGROUND``, ``BREAD_SYNC_MAX_STREAM_BACKLOG``, read once, by :meth:`init_app`. The
    body limit, the loopback rule, auth and CORS apply to the bread routes only; the app's other routes are untouched.
    """

    def __init__(self, app: Flask | None = None, bread: Bread | None = None, url_prefix: str | None = None):
        self.bread = bread
        self.url_prefix = url_prefix
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if "bread_sync" in app.extensions:
            raise RuntimeError("BreadSync is already registered on this app; create one BreadSync per app")
        bread = self.bread or create_bread()
        server = bread.config.server
        app.config.setdefault("BREAD_SYNC_MAX_BODY_BYTES", server.max_body_bytes)
        app.config.setdefault("BREAD_SYNC_MAX_FILE_BYTES", server.max_file_bytes)
        app.config.setdefault("BREAD_SYNC_MAX_CONCURRENT_RUNS", server.max_concurrent_runs)
        app.config.setdefault("BREAD_SYNC_RUN_TIMEOUT_SECONDS", server.run_timeout_seconds)
        app.config.setdefault("BREAD_SYNC_BODY_TIMEOUT_SECONDS", server.body_timeout_seconds)
        app.config.setdefault("BREAD_SYNC_CORS_ORIGINS", server.cors_origins)
        app.config.setdefault("BREAD_SYNC_MAX_STREAM_BACKLOG", server.max_stream_backlog)
        app.config.setdefault("BREAD_SYNC_PLAYGROUND", server.playground)
        mount = _mounter(bread.transport)
        auth = has_auth(bread.config.plugins)
        unread = unread_credentials_problem(bread.config)
        if unread:  # bread's servers refuse to start (listen.py); an app of the user's own serves
            log.warning("serving anyway: %s", unread)
        blueprint = Blueprint("bread_sync", __name__)
        app.extensions["bread_sync"] = State(
            bread=bread,
            runner=Runner(
                app.config["BREAD_SYNC_MAX_CONCURRENT_RUNS"],
                app.config["BREAD_SYNC_RUN_TIMEOUT_SECONDS"],
                live=bread.cancels,
            ),
            blueprint=blueprint,
            max_body_bytes=app.config["BREAD_SYNC_MAX_BODY_BYTES"],
            body_limits=body_limits_of(app),
            body_timeout_seconds=app.config["BREAD_SYNC_BODY_TIMEOUT_SECONDS"],
            auth=auth,
            cors_origins=cors.check_origins(app.config["BREAD_SYNC_CORS_ORIGINS"], auth),
            max_stream_backlog=_frames(app.config["BREAD_SYNC_MAX_STREAM_BACKLOG"]),
            url_prefix=(self.url_prefix or "").rstrip("/"),
            playground=app.config["BREAD_SYNC_PLAYGROUND"] is True,
            authorize_run=run_authorizer(server.authorize_run, getattr(bread.transport, "authorize_stream", None)),
        )
        if self.url_prefix:
            claim_unrouted_paths(app)
        if bread.tracer is not None:
            blueprint.before_request(_trace_context_in)
            blueprint.teardown_request(_trace_context_out)
        # In this order: the guard, every plugin's middleware (the auth plugin stores the
        # caller's identity there), then the grant of the route's action. A hook that would do
        # nothing on this app (the grant without auth, CORS without origins) is not added: Flask
        # calls each hook of every request.
        current = app.extensions["bread_sync"]
        blueprint.before_request(_guard)
        for middleware in hooks(bread.config.plugins, "middleware"):
            middleware(blueprint, bread)
        if current.auth:
            blueprint.before_request(_grant)
        if current.cors_origins:
            blueprint.after_request(_cors_headers)
        blueprint.register_error_handler(Exception, _error_response)
        records.register(blueprint)
        files.register(blueprint, app.config["BREAD_SYNC_MAX_FILE_BYTES"])
        if bread.metrics is not None:
            metrics.register(blueprint)
        if current.playground:
            playground.register(blueprint)
        mount(blueprint, bread)
        for add_routes in hooks(bread.config.plugins, "routes"):
            add_routes(blueprint, bread)
        actions_of(app).update({f"bread_sync.{k}": v for k, v in actions_of(blueprint).items()})
        statuses_of(app).update({f"bread_sync.{k}": v for k, v in statuses_of(blueprint).items()})
        body_limits_of(app).update({f"bread_sync.{k}": v for k, v in body_limits_of(blueprint).items()})
        authorize_args_of(app).update({f"bread_sync.{k}": v for k, v in authorize_args_of(blueprint).items()})
        app.register_blueprint(blueprint, url_prefix=self.url_prefix)
        app.cli.add_command(commands.flask_group())  # flask bread invoke|resume|chat|tail|gc


def _frames(backlog: Any) -> int:
    """``BREAD_SYNC_MAX_STREAM_BACKLOG`` of a Flask app's config, checked as the setting is."""
    if isinstance(backlog, bool) or not isinstance(backlog, int) or backlog < 1:
        raise ValueError(f"BREAD_SYNC_MAX_STREAM_BACKLOG must be a number of frames, at least 1, not {backlog!r}")
    return backlog


def _mounter(transport: Any) -> Any:
    """How ``transport`` serves the streaming routes: an HTTP transport's wire, through
    server/runs.py; a transport of its own making, through its ``mount(app, bread)``."""
    if isinstance(transport, HTTPTransport):
        return lambda app, bread: runs.mount(app, bread, transport)
    if callable(getattr(transport, "mount", None)):
        return transport.mount
    raise TypeError(
        f"the transport {type(transport).__name__} cannot serve HTTP: use "
        "bread_sync.transports.http_chunked or http_sse as config.transport"
    )


def _trace_context_in() -> None:
    """A request's ``traceparent`` is current while its view runs: a run it opens (bread's
    routes, the bridges') takes it as its span's parent there, before its own greenlet drives it."""
    tracer = state().bread.tracer
    g.bread_trace_undo = tracer.attach(tracer.incoming(request.headers))


def _trace_context_out(exc: BaseException | None) -> None:
    undo = g.pop("bread_trace_undo", None)
    if undo is not None:
        undo()


def _guard() -> Any:
    endpoint = request.endpoint
    if endpoint == HEALTH_ENDPOINT:
        return records.health()  # answered here, so no middleware (auth included) ever sees it
    current = state()
    if not current.auth:
        check_local()
    refusal = cross_site.refused_by(current.cors_origins)
    if refusal is not None:
        current.cross_site_refusals.tell(refusal)  # the 403's body says nothing: the log says why
        raise Forbidden()  # before the body is read: a hostile page's bytes are never parsed
    if current.playground and playground.is_page_request():
        return playground.serve_request()  # before the auth plugin: the page loads without a credential
    answer = cors.preflight(current.cors_origins)
    if answer is not None:
        return answer
    if request.method in _BODY_METHODS:
        limit = current.body_limits.get(endpoint or "", current.max_body_bytes)
        # A route's own larger limit is for callers auth has let in (see _grant).
        read_body(limit, before_auth=current.max_body_bytes if current.auth else None)
    return None


def claim_unrouted_paths(app: Flask) -> None:
    """Answer for the paths under bread's prefix (every path of the standalone server) that match
    no route. Flask runs a blueprint's hooks only for its own routes, so those reach the app."""
    app.before_request(_authenticate_unrouted)


def _authenticate_unrouted() -> Any:
    """With auth on, a path of bread's that matches no route (404, 405) is 401 to a caller
    without a credential, like every route but /health: an anonymous caller cannot map them.
    Without auth, the local rule comes first, as on every route: another Host or peer is 403
    whatever the path and method. While the playground is on, a browser's ``GET /`` is sent to it next."""
    if request.routing_exception is None or isinstance(request.routing_exception, RequestRedirect):
        return None
    current = state()
    path, prefix = request.path, current.url_prefix
    if not (path == prefix or path.startswith(prefix + "/")):
        return None
    if not current.auth and not is_local_request():
        return _error_response(Forbidden())
    if current.playground:
        answer = playground.root_redirect(prefix, current.auth)
        if answer is not None:
            return answer
    if not current.auth or cors.is_preflight():
        return None
    auth = named(current.bread.config.plugins, "auth")
    authenticate = getattr(auth, "authenticate", None)
    return authenticate() if callable(authenticate) else None


def _grant() -> None:
    read_rest_of_body()
    authorize_request(state().bread.config.server.authorize)


def _cors_headers(response: Any) -> Any:
    return cors.add_headers(response, state().cors_origins)


def _error_response(exc: Exception) -> Any:
    if isinstance(exc, Forbidden):
        return jsonify(error="Forbidden"), 403
    if isinstance(exc, HTTPException):
        return http_error(exc)
    error = exc if isinstance(exc, BreadError) else internal_error(exc)
    if error.code == INTERNAL:
        log.exception("unhandled error on %s %s", request.method, request.path, exc_info=exc)
    return jsonify(error.to_body()), error.status


def http_error(exc: HTTPException) -> Any:
    """A werkzeug HTTP error in the documented shape: code and message, nothing else."""
    code = {404: "ROUTE_NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BODY_TOO_LARGE"}.get(exc.code or 500)
    if code is None:
        code = "INVALID_REQUEST" if (exc.code or 500) < 500 else INTERNAL
    allow = {"Allow": ", ".join(exc.valid_methods)} if getattr(exc, "valid_methods", None) else {}
    return jsonify(error={"code": code, "message": exc.name}), exc.code or 500, allow


def create_server(bread: Bread | None = None) -> Flask:
    """A Flask app serving ``bread`` (by default the config ``BREAD_CONFIG`` names)."""
    bread = bread or create_bread()
    app = Flask("bread_sync", instance_path=str(bread.config.instance_path.resolve()))
    BreadSync(app, bread)
    claim_unrouted_paths(app)  # the whole app is bread's
    app.register_error_handler(HTTPException, http_error)
    return app
