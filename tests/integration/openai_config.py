"""The config of the OpenAI clients' tests (``BREAD_CONFIG=tests.integration.openai_config:config``):
the demo agents, ``broken`` (whose model fails after its first words) and ``thinker`` (which
streams reasoning before its answer), served at ``/v1``
behind the auth plugin, whose one key the clients send as their API key."""

from __future__ import annotations

from bread_sync import Agent, BreadError, ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.protocols.openai_api import openai_api
from bread_sync.server import auth_plugin

KEY = "openai-client-key-0123456789abcdef"


def _fail(convo: script.Conversation) -> None:
    raise BreadError("MODEL_ERROR", "the model is down")


broken = Agent(id="broken", description="Starts to answer, then its model fails.",
               model=script.provider([script.say("Starting."), _fail]))  # fmt: skip


thinker = Agent(id="thinker", description="Thinks aloud, then answers.",
                model=script.provider([script.think("Two and two. Makes four. "), script.say("Four.")]))  # fmt: skip


def config():
    base = demo_config()
    plugins = [auth_plugin(api_keys={"client": KEY}, env_var=None), openai_api()]
    server = ServerSettings(authorize=lambda identity, action, args: True)
    return base.model_copy(update={"agents": [*base.agents, broken, thinker], "plugins": plugins, "server": server})
