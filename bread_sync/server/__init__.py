"""The HTTP server: a Flask extension, and a standalone app that is its first user."""

from .actions import HTTP_ACTIONS, register_http_route
from .auth import AUTH_ACTIONS, auth_plugin
from .extension import BreadSync, create_server
from .guard import authorize_run
from .run_streams import start_run_stream

__all__ = [
    "AUTH_ACTIONS",
    "HTTP_ACTIONS",
    "BreadSync",
    "auth_plugin",
    "authorize_run",
    "create_server",
    "register_http_route",
    "start_run_stream",
]
