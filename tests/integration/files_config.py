"""The config of the files-as-input test's server (``BREAD_CONFIG=tests.integration.files_config:config``):
the demo agents and ``looker``, whose model is ``openai:m`` at ``OPENAI_BASE_URL`` (the test's
local fake provider), behind the auth plugin with two callers, alice and bob, allowed everything."""

from __future__ import annotations

from bread_sync import Agent, ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin

KEYS = {"alice": "files-alice-key-0123456789", "bob": "files-bob-key-0123456789"}

looker = Agent(id="looker", model="openai:m", description="Looks at the pictures it is given.")


def config():
    base = demo_config()
    server = ServerSettings(authorize=lambda identity, action, args: True)
    plugins = [auth_plugin(api_keys=KEYS, env_var=None)]
    return base.model_copy(update={"agents": [*base.agents, looker], "plugins": plugins, "server": server})
