"""The HTTP server: a Flask extension, and a standalone app that is its first user."""

from .actions import HTTP_ACTIONS, register_http_route
from .auth import AUTH_ACTIONS, auth_plugin
from .extension import BreadSync, create_server
from .guard import authorize_run
from .streams import (
    client_tail,
    followed_run,
    shown_position,
    start_run_detached,
    start_run_stream,
    stream_body,
    stream_position,
    stream_response,
)

__all__ = [
    "AUTH_ACTIONS",
    "HTTP_ACTIONS",
    "BreadSync",
    "auth_plugin",
    "authorize_run",
    "client_tail",
    "create_server",
    "followed_run",
    "register_http_route",
    "shown_position",
    "start_run_detached",
    "start_run_stream",
    "stream_body",
    "stream_position",
    "stream_response",
]
