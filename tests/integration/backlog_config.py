"""The config of the stalled-client test (``BREAD_CONFIG=tests.integration.backlog_config:config``).

The demo agents plus ``flood``: ``steps`` steps, each a large text and a tool call with a large
input, so a run writes megabytes and many durable crumbs in a few seconds."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bread_sync.agents import Agent, ToolContext, tool
from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say

MAX_STEPS = 1000
PAD = "x" * 8000


class Steps(BaseModel):
    steps: int = Field(ge=1, le=MAX_STEPS)


class Note(BaseModel):
    n: int
    pad: str


@tool(on_repeat="run")
def note(step: Note, ctx: ToolContext) -> dict:
    """Note that a step is done."""
    return {"noted": step.n}


def _step(n: int):
    def play(convo: script.Conversation):
        if n > convo.input["steps"]:
            return None
        return [say(PAD), call("note", {"n": n, "pad": PAD})]

    return play


flood = Agent(
    id="flood",
    description="`steps` steps, each a large text and a tool call with a large input.",
    model=script.provider([_step(n) for n in range(1, MAX_STEPS + 1)] + [say("flooded.")]),
    tools=[note],
    input_schema=Steps,
    max_steps=MAX_STEPS + 2,
)


def config() -> Config:
    base = demo_config()
    return base.model_copy(update={"agents": [*base.agents, flood]})
