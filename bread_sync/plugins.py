"""The plugin contract: what an object in ``Config.plugins`` may add to the server and the runtime.

This module is the reference (as sqlite-utils' ``hookspecs.py``): a plugin has a ``name`` and
defines any of the hooks declared on :class:`Plugin`, none of them required. A caller finds a
hook with :func:`hook` (or :func:`hooks`) and never calls one a plugin lacks, so a plugin defines
only what it needs and never stubs the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from flask import Blueprint

    from .crumbs import Frame

HookName = Literal["middleware", "routes", "on_crumb", "start"]


class Plugin(Protocol):
    """An object in ``Config.plugins``: a ``name`` and any of the optional hooks below.

    ``bread`` is the :class:`bread_sync.Bread` that serves; it is typed ``Any`` here because the
    runtime finds its plugins through this module, which must not import it back.
    """

    #: How the server finds a plugin it treats specially: ``"auth"`` turns authentication on.
    name: str

    def middleware(self, blueprint: Blueprint, bread: Any) -> None:
        """Add request hooks to bread's blueprint, before the route's action is granted.

        The auth plugin stores the caller's identity there, for ``config.server.authorize``.
        """

    def routes(self, blueprint: Blueprint, bread: Any) -> None:
        """Register the plugin's own routes on bread's blueprint, after bread's routes."""

    def on_crumb(self, frame: Frame) -> None:
        """Receive every frame the runtime publishes, on the publisher's thread: must not block."""

    def start(self, bread: Any) -> None:
        """Start what the plugin runs beside the requests (as the A2A push sender).

        Called in each gunicorn worker once it serves; under another server, call it yourself.
        """


def hook(plugin: object, name: HookName) -> Callable[..., None] | None:
    """The plugin's hook ``name`` if it defines one, else None."""
    found = getattr(plugin, name, None)
    return found if callable(found) else None


def hooks(plugins: Iterable[object], name: HookName) -> list[Callable[..., None]]:
    """The hook ``name`` of every plugin that defines it, in the plugins' order."""
    return [found for found in (hook(plugin, name) for plugin in plugins) if found is not None]


def named(plugins: Iterable[object], name: str) -> Any | None:
    """The first plugin called ``name``, or None."""
    return next((plugin for plugin in plugins if getattr(plugin, "name", None) == name), None)
