"""The config of the state and context tests (``BREAD_CONFIG=tests.state_config:config``): agents
that say what their run was given. ``peek`` calls a tool that answers its ``ctx.state`` and
``ctx.context``; ``guarded`` does the same behind an approval; ``mirror``'s model writes its
request's ``session_state`` and ``context`` as its text. Each is mounted over AG-UI at
``/ag-ui/<id>``; the pipeline ``peek-step`` runs ``peek``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bread_sync.agents import Agent, ToolContext, tool
from bread_sync.config import Config
from bread_sync.models import ModelEvent, ModelRequest, TextDelta, script
from bread_sync.models.script import call, say
from bread_sync.pipelines import Pipeline, Step
from bread_sync.protocols.ag_ui import ag_ui


def _seen(ctx: ToolContext) -> dict[str, Any]:
    return {"state": ctx.state, "context": ctx.context}


@tool
def peek(input: Any, ctx: ToolContext) -> dict:
    """Tell what the run was given."""
    return _seen(ctx)


@tool(ask=True)
def guarded_peek(input: Any, ctx: ToolContext) -> dict:
    """Tell what the run was given, once a human approves."""
    return _seen(ctx)


class Mirror:
    """A model that answers what its request carries of the run's state and context."""

    name = "mirror"

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        yield TextDelta(json.dumps({"state": request.session_state, "context": request.context}))


AGENTS = [
    Agent(id="peek", model=script.provider([call("peek", {}), say("seen")]), tools=[peek]),
    Agent(id="guarded", model=script.provider([call("guarded_peek", {}), say("seen")]), tools=[guarded_peek]),
    Agent(id="mirror", model=Mirror()),
]


def config() -> Config:
    mounts = [ag_ui(agent_id=agent.id, path=f"/ag-ui/{agent.id}") for agent in AGENTS]
    return Config(agents=list(AGENTS), pipelines=[Pipeline(id="peek-step", steps=[Step(agent="peek")])], plugins=mounts)
