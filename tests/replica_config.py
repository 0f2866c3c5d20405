"""The config of the replicas the Redis tests start (``BREAD_CONFIG=tests.replica_config:config``).

The demo agents plus ``stepper``, a run that writes durable crumbs all along (a tool call per
step), so a test can watch durable progress while Redis is down. Owners look in the store for
recorded cancels only once a minute here: a cancel that ends a run quickly came over Redis.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bread_sync.agents import Agent, ToolContext, tool
from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say

MAX_STEPS = 60


class Steps(BaseModel):
    count: int = Field(ge=1, le=MAX_STEPS)
    delayMs: int = Field(ge=0, le=10_000)  # noqa: N815 - the wire spelling


class Note(BaseModel):
    n: int


@tool(on_repeat="run")  # idempotent: a run carried on after a crash in it calls it again
def note(step: Note, ctx: ToolContext) -> dict:
    """Note that a step is done."""
    return {"noted": step.n}


def _step(n: int):
    def play(convo: script.Conversation):
        if n > convo.input["count"]:
            return None
        return [say([f"step {n} ", "done "], delay=convo.input["delayMs"] / 1000), call("note", {"n": n})]

    return play


stepper = Agent(
    id="stepper",
    description="`count` steps `delayMs` long, each saying two chunks and calling a tool.",
    model=script.provider([_step(n) for n in range(1, MAX_STEPS + 1)] + [say("finished.")]),
    tools=[note],
    input_schema=Steps,
    max_steps=MAX_STEPS + 2,
)


def config() -> Config:
    base = demo_config()
    return base.model_copy(
        update={"agents": [*base.agents, stepper], "cancel_poll_seconds": 60.0, "lease_seconds": 600.0}
    )
