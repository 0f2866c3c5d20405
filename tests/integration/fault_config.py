"""The config of the servers the fault and shutdown tests start
(``BREAD_CONFIG=tests.integration.fault_config:config``): the demo agents plus

- ``stepper`` (from tests.replica_config): ``count`` steps ``delayMs`` long, each saying a few
  words and calling a tool, so its log grows with durable crumbs all along (``slow`` only logs at its end);
- ``stuck``: calls a tool that sleeps ``seconds`` and never looks at the cancel signal, so it
  cannot reach a step boundary in time;
- ``broken``: calls a tool that raises, so the server logs a failure inside a run.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from bread_sync.agents import Agent, ToolContext, tool
from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say

from ..replica_config import stepper


class Step(BaseModel):
    n: int


class Nap(BaseModel):
    seconds: float = Field(ge=0, le=600)


@tool
def nap(args: Nap, ctx: ToolContext) -> dict:
    """Sleep, deaf to cancels."""
    time.sleep(args.seconds)
    return {"slept": args.seconds}


@tool
def explode(args: Step, ctx: ToolContext) -> dict:
    """Always fails."""
    raise RuntimeError(f"step {args.n} broke")


stuck = Agent(
    id="stuck",
    description="Calls a tool that sleeps `seconds` and ignores cancels.",
    model=script.provider([lambda convo: call("nap", {"seconds": convo.input["seconds"]}), say("awake.")]),
    tools=[nap],
    input_schema=Nap,
)

broken = Agent(
    id="broken",
    description="Calls a tool that raises.",
    model=script.provider([call("explode", {"n": 1}), say("it broke.")]),
    tools=[explode],
)


def config() -> Config:
    base = demo_config()
    return base.model_copy(update={"agents": [*base.agents, stepper, stuck, broken]})
