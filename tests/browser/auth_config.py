"""The config of the browser tests' server with auth on
(``BREAD_CONFIG=tests.browser.auth_config:config``): the demo agents behind the auth plugin, one
key that may do anything, and the playground turned on by the tests' ``BREAD_PLAYGROUND=1``."""

from __future__ import annotations

from bread_sync import ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin

KEY = "playground-key-0123456789abcdef"
#: Signs the stream tokens the page mints for its EventSource tails.
SECRET = "playground-secret-0123456789abcdef"


def authorize(identity, action, args):
    return identity["sub"] == "me"


def config():
    plugins = [auth_plugin(api_keys={"me": KEY}, env_var=None, secret=SECRET), *demo_config().plugins]
    return demo_config().model_copy(update={"plugins": plugins, "server": ServerSettings(authorize=authorize)})
