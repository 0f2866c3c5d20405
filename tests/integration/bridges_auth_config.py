"""The config of a server with auth on and the demo's bridges
(``BREAD_CONFIG=tests.integration.bridges_auth_config:config``): one key, allowed everything."""

from __future__ import annotations

from bread_sync import ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin

KEY = "bridges-key-0123456789abcdef"


def config():
    demo = demo_config()
    server = ServerSettings(authorize=lambda identity, action, args: True)
    return demo.model_copy(update={"plugins": [auth_plugin(api_keys=[KEY], env_var=None), *demo.plugins],
                                   "server": server})  # fmt: skip
