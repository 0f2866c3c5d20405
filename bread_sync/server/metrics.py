"""``GET /metrics`` and the count of every request bread's blueprint answers, while metrics are
on (the server setting ``metrics``, ``BREAD_METRICS=1``; bread_sync/metrics/)."""

from __future__ import annotations

from typing import Any

from flask import Response, request

from .actions import HTTP_ACTIONS, register_http_route
from .state import bread


def register(blueprint: Any) -> None:
    register_http_route(blueprint, "GET", "/metrics", HTTP_ACTIONS.metrics_read, serve)
    blueprint.after_request(_count_request)


def serve() -> Response:
    current = bread()
    body, content_type = current.metrics.render(current.store)
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})


def _count_request(response: Any) -> Any:
    # The route's rule, never its path: a path holds run ids, an unbounded label.
    bread().metrics.request(request.url_rule.rule, request.method, response.status_code)
    return response
