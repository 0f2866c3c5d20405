"""The config of the servers tests/integration/test_nested_http.py starts
(``BREAD_CONFIG=tests.nested_http_config:config``): the demo agents, tasks and pipelines, plus
nested work that is slow (to cancel it midway) or pauses for a human (to resume it on another
process), and an agent with a skill.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from bread_sync.agents import Agent, Skill, ToolContext, subagent, task_tool, tool
from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.loops import Loop
from bread_sync.models import ModelRequest, TextDelta, script
from bread_sync.models.script import call, say
from bread_sync.pipelines import Pipeline, Step

#: How slow the slow nested work is: 1000 ticks 200 ms apart, 200 s unless cancelled.
TICKS, TICK_SECONDS = 1000, 0.2
SLOW_TICKS = {"count": TICKS, "delayMs": int(TICK_SECONDS * 1000)}
SKILL_TEXT = "Answer in exactly three words."


class Nothing(BaseModel):
    pass


@tool(ask=True)
def approve_me(data: Nothing, ctx: ToolContext) -> str:
    """Needs a human's yes."""
    return "approved"


def _slow_round(convo: script.Conversation) -> say:
    """Iteration 1 is quick; every later iteration ticks slowly."""
    iteration = convo.input["iteration"]
    if iteration == 1:
        return say("round 1")
    return say([f"tick {n} " for n in range(1, TICKS + 1)], delay=TICK_SECONDS)


class SystemEcho:
    """A model that says its system prompt: what the agent's prompt and skill made of it."""

    name = "system-echo"

    def stream(self, request: ModelRequest) -> Iterator[TextDelta]:
        yield TextDelta(request.system or "(no system prompt)")


#: A loop that pauses for an approval in every iteration (two of them).
looper = Agent(
    id="looper",
    description="Two iterations, each asking for an approval first.",
    model=script.provider([call("approve_me", {}), lambda convo: say(f"round {convo.input['iteration']}")]),
    tools=[approve_me],
    loop=Loop(max_iterations=2),
)

#: A loop whose second iteration ticks until cancelled.
slow_loop = Agent(
    id="slow-loop",
    description="Iteration 1 says 'round 1'; iteration 2 ticks slowly.",
    model=script.provider([_slow_round]),
    loop=Loop(max_iterations=3),
)

#: Delegates to the writer, which pauses for an approval inside the subagent.
delegator = Agent(
    id="delegator",
    description="Asks the writer (a subagent) for a post.",
    model=script.provider([
        call("writer", {"topic": "nested"}),
        lambda convo: say(f"The writer said: {convo.last_tool_output}"),
    ]),
    tools=[subagent("writer")],
)  # fmt: skip

#: Delegates to the slow agent, which ticks until cancelled inside the subagent.
slow_delegator = Agent(
    id="slow-delegator",
    description="Asks the slow agent (a subagent) for 1000 ticks.",
    model=script.provider([call("slow", SLOW_TICKS), say("never")]),
    tools=[subagent("slow")],
)

#: Calls the word-count task with args that fail its schema.
bad_counter = Agent(
    id="bad-counter",
    description="Calls word-count with a number for its text.",
    model=script.provider([call("word-count", {"text": 3}), lambda convo: say(f"ok={convo.last_tool_ok}")]),
    tools=[task_tool("word-count")],
)

skilled = Agent(
    id="skilled",
    description="Says its system prompt; has the skill 'terse'.",
    model=SystemEcho(),
    prompt="You are skilled.",
    skills={"terse": Skill("terse", "Short answers.", SKILL_TEXT)},
)

#: Echoes its JSON input back as its (parsed) output: a quick first pipeline step.
echo_json = Agent(id="echo-json", model="echo", output="json", description="Echoes JSON back.")

slow_pipe = Pipeline(
    id="slow-pipe",
    description="echo-json passes the ticks on, then the slow agent ticks until cancelled.",
    steps=[Step(agent="echo-json", name="warm-up"), Step(agent="slow", name="ticks")],
)


def config() -> Config:
    base = demo_config()
    return base.model_copy(
        update={
            "agents": [*base.agents, looper, slow_loop, delegator, slow_delegator, bad_counter, skilled, echo_json],
            "pipelines": [*base.pipelines, slow_pipe],
        }
    )
