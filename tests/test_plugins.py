"""The plugin contract of bread_sync/plugins.py: the built-in plugins keep it, and a hook a plugin
lacks is never called."""

from __future__ import annotations

import importlib
import inspect
import typing

import pytest

from bread_sync.plugins import HookName, Plugin, hook, hooks, named
from bread_sync.protocols.a2a.plugin import A2AServer
from bread_sync.protocols.ag_ui.plugin import AgUiPlugin
from bread_sync.protocols.mcp.plugin import McpPlugin
from bread_sync.server.auth import AuthPlugin

HOOK_NAMES = typing.get_args(HookName)


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_protocol_declares_every_hook_the_helper_finds():
    assert all(callable(getattr(Plugin, name)) for name in HOOK_NAMES)


@pytest.mark.parametrize("plugin", [AuthPlugin, A2AServer, AgUiPlugin, McpPlugin])
def test_a_built_in_plugin_has_a_name_and_each_hook_it_defines_as_the_protocol_declares_it(plugin):
    assert isinstance(plugin.name, str)
    for name in HOOK_NAMES:
        if name in vars(plugin):
            assert parameters(vars(plugin)[name]) == parameters(getattr(Plugin, name)), name


class OnlyRoutes:
    name = "only-routes"

    def routes(self, blueprint, bread) -> None: ...


def test_hooks_finds_only_the_hooks_a_plugin_defines():
    plugin = OnlyRoutes()
    assert hook(plugin, "routes") == plugin.routes
    assert hook(plugin, "start") is None
    assert hooks([plugin, object(), plugin], "routes") == [plugin.routes, plugin.routes]
    assert hooks([plugin], "on_crumb") == []


def test_named_finds_the_first_plugin_of_that_name():
    plugin = OnlyRoutes()
    assert named([object(), plugin, OnlyRoutes()], "only-routes") is plugin
    assert named([plugin], "auth") is None


@pytest.mark.parametrize(
    "name, home",
    [
        ("McpSessionStore", "bread_sync.protocols.mcp.plugin"),
        ("PushStore", "bread_sync.webhooks"),
        ("records_pushes", "bread_sync.webhooks"),
    ],
)
def test_a_store_role_that_moved_to_its_bridge_is_still_found_at_its_old_path_with_a_warning(name, home):
    import bread_sync.stores

    with pytest.warns(DeprecationWarning, match=f"moved to {home}"):
        moved = getattr(bread_sync.stores, name)
    assert moved is getattr(importlib.import_module(home), name)
