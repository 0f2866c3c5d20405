"""The config of the server the run-ownership tests start
(``BREAD_CONFIG=tests.integration.ownership_config:config``): the demo agents behind the auth
plugin, with two keys. ``ops`` may do anything; ``app`` may use the run routes, and reach only
the runs whose id starts with ``app-`` (``authorize_run``)."""

from __future__ import annotations

from bread_sync import ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin

KEYS = {"ops": "ops-key-0123456789abcdef", "app": "app-key-0123456789abcdef"}


def authorize(identity, action, args):
    return identity["sub"] in KEYS


def authorize_run(identity, run_id):
    return identity["sub"] == "ops" or run_id.startswith(f"{identity['sub']}-")


def config():
    server = ServerSettings(authorize=authorize, authorize_run=authorize_run)
    return demo_config().model_copy(update={"plugins": [auth_plugin(api_keys=KEYS, env_var=None)], "server": server})
