"""Every HTTP route has a named action; an authorizer decides per action.

Routes register through :func:`register_http_route`, which records the action of each
endpoint. A route added any other way has no action: it is unnamed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


class HTTP_ACTIONS:  # noqa: N801 - the reference's spelling of a constant table
    agent_list = "agent.list"
    agent_read = "agent.read"
    run_start = "run.start"
    pipeline_list = "pipeline.list"
    pipeline_start = "pipeline.start"
    run_resume = "run.resume"
    run_stream = "run.stream"
    run_cancel = "run.cancel"
    run_read = "run.read"
    run_list = "run.list"
    session_list = "session.list"
    session_read = "session.read"
    session_delete = "session.delete"
    session_cleanup = "session.cleanup"
    loop_list = "loop.list"
    loop_read = "loop.read"
    task_list = "task.list"
    task_read = "task.read"
    file_read = "file.read"
    file_write = "file.write"
    openapi_read = "openapi.read"
    playground_read = "playground.read"
    metrics_read = "metrics.read"


#: The route that load balancers probe: no action, no auth, no Host rule.
HEALTH_PATH = "/health"
HEALTH_ENDPOINT = "bread_sync.health"

ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def register_http_route(
    app: Any,
    method: str,
    path: str,
    action: str,
    handler: Callable[..., Any],
    *,
    statuses: tuple[int, ...] = (),
    max_body_bytes: int | None = None,
    args: Callable[[], dict[str, str]] | None = None,
) -> None:
    """Add a route to a Flask app or blueprint under a named action.

    ``path`` may use ``<param>`` or ``:param``; ``method`` ``"*"`` matches every method.
    ``statuses``: what a plugin's route may answer besides 200 and the statuses every route may
    (e.g. 204, 404), for the OpenAPI document. ``max_body_bytes``: this route's own body limit,
    instead of the server's ``max_body_bytes`` (a protocol whose requests carry files).
    ``args``: for a route whose body says what it does (JSON-RPC), what ``authorize`` gets as
    ``args`` instead of the query params: ``args()``, called for the request (its body read, in
    ``g.bread_body``), with the path params beside it; it must not raise.
    """
    rule = _PARAM.sub(r"<\1>", path)
    endpoint = f"{method} {rule}".replace(".", "_")  # Flask endpoints may not hold dots
    methods = ALL_METHODS if method == "*" else [method.upper()]
    app.add_url_rule(rule, endpoint=endpoint, view_func=handler, methods=methods)
    actions_of(app)[endpoint] = action
    if statuses:
        statuses_of(app)[endpoint] = tuple(statuses)
    if max_body_bytes is not None:
        body_limits_of(app)[endpoint] = max_body_bytes
    if args is not None:
        authorize_args_of(app)[endpoint] = args


def statuses_of(app: Any) -> dict[str, tuple[int, ...]]:
    """The endpoint -> statuses table of an app or blueprint (see :func:`register_http_route`)."""
    if not hasattr(app, "http_statuses"):
        app.http_statuses = {}
    return app.http_statuses


def body_limits_of(app: Any) -> dict[str, int]:
    """The endpoint -> body limit table of the routes with a limit of their own."""
    if not hasattr(app, "http_body_limits"):
        app.http_body_limits = {}
    return app.http_body_limits


def authorize_args_of(app: Any) -> dict[str, Callable[[], dict[str, str]]]:
    """The endpoint -> ``args`` function table of the routes whose body names their arguments."""
    if not hasattr(app, "http_authorize_args"):
        app.http_authorize_args = {}
    return app.http_authorize_args


def actions_of(app: Any) -> dict[str, str]:
    """The endpoint -> action table of an app or blueprint."""
    if not hasattr(app, "http_actions"):
        app.http_actions = {}
    return app.http_actions
