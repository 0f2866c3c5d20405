"""The HTTP server: a Flask extension, and a standalone app that is its first user."""

from .actions import HTTP_ACTIONS, register_http_route
from .extension import BreadSync, create_server

__all__ = ["HTTP_ACTIONS", "BreadSync", "create_server", "register_http_route"]
