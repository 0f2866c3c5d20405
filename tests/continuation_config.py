"""The config of the continuation tests (``BREAD_CONFIG=tests.continuation_config:config``).

``crashy`` says a few words, calls three tools (one of each ``on_repeat``), streams some more
text and ends. Each tool writes a line to ``$CALLS_FILE`` per call (with the values of the
run's context). A process started with
``$CRASH_AT`` (one of ``tool-run``, ``tool-ask``, ``tool-fail``, ``model``, ``model-always``,
``task``, a tool's name and its call's ``n``: ``tool-run-2``, or ``after-`` and a crumb type when
the test's child process says so) SIGKILLs itself at that point: inside that tool or task, in the
last model turn after some text was streamed, or once that crumb is logged; once (the
marker ``$CRASH_AT_FILE`` is removed first) unless ``-always``. With ``CRASH_AT=marked`` the
point is the marker's text, so one server can be told a new point for each run.

``boss`` calls ``crashy`` as a subagent; ``chief`` calls ``sinking``, whose model fails;
``unwilling`` is ``crashy`` opted out of continuation. ``looper`` loops three iterations, each
calling ``tool_run`` with its number; the pipeline ``line`` runs the task ``tally`` then
``crashy``; ``counter`` calls ``tally`` as a tool.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from pydantic import BaseModel

from bread_sync.agents import Agent, ToolContext, subagent, task_tool, tool
from bread_sync.config import Config
from bread_sync.errors import MODEL_ERROR, BreadError
from bread_sync.loops import Loop
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.pipelines import Pipeline
from bread_sync.pipelines import Step as PipelineStep
from bread_sync.tasks import Task


class Step(BaseModel):
    n: int


def crash_at(point: str) -> None:
    """SIGKILL this process here if it was told to (and, unless ``-always``, only once)."""
    wanted, marker = os.environ.get("CRASH_AT", ""), Path(os.environ.get("CRASH_AT_FILE", "-"))
    if wanted == "marked":  # a server kept for several runs: the point is the marker's text
        wanted = marker.read_text() if marker.exists() else ""
    if wanted.removesuffix("-always") != point:
        return
    if not wanted.endswith("-always"):
        if not marker.exists():
            return
        marker.unlink()
    os.kill(os.getpid(), signal.SIGKILL)


def _called(name: str, n: int, ctx: ToolContext | None = None) -> dict:
    whose = "".join(f" for {entry['value']}" for entry in ctx.context) if ctx is not None else ""
    with open(os.environ["CALLS_FILE"], "a") as calls:
        calls.write(f"{name} {n}{whose}\n")
    crash_at(name.replace("_", "-"))
    crash_at(f"{name}-{n}".replace("_", "-"))
    return {"done": n}


@tool(on_repeat="run")
def tool_run(step: Step, ctx: ToolContext) -> dict:
    """An idempotent tool: called again when its outcome is unknown."""
    return _called("tool_run", step.n, ctx)


@tool
def tool_ask(step: Step, ctx: ToolContext) -> dict:
    """A tool whose repeat a human approves."""
    return _called("tool_ask", step.n, ctx)


@tool(on_repeat="fail")
def tool_fail(step: Step, ctx: ToolContext) -> dict:
    """A tool never called twice."""
    return _called("tool_fail", step.n, ctx)


def _crash_in_model(convo: script.Conversation) -> list:
    crash_at("model")
    return [say(["all ", "done."])]


STEPS = [
    say(["Working ", "on ", "it. "]),
    call("tool_run", {"n": 1}),
    call("tool_ask", {"n": 2}),
    call("tool_fail", {"n": 3}),
    say(["Almost ", "there: "]),
    _crash_in_model,
]
TOOLS = [tool_run, tool_ask, tool_fail]

crashy = Agent(id="crashy", model=script.provider(STEPS), tools=TOOLS)
unwilling = Agent(id="unwilling", model=script.provider(STEPS), tools=TOOLS, continue_after_crash=False)
boss = Agent(
    id="boss",
    model=script.provider([call("crashy", {"input": "go"}), say("The crew is done.")]),
    tools=[subagent("crashy")],
)


def _model_down(convo: script.Conversation) -> list:
    raise BreadError(MODEL_ERROR, "the model is down")


sinking = Agent(id="sinking", model=script.provider([_model_down]))
chief = Agent(
    id="chief",
    model=script.provider([call("sinking", {"input": "go"}), say("The crew failed.")]),
    tools=[subagent("sinking")],
)


looper = Agent(
    id="looper",
    model=script.provider([lambda convo: call("tool_run", {"n": convo.input["iteration"]}), say("Round done.")]),
    tools=[tool_run],
    loop=Loop(max_iterations=3),
)


def _tally(convo: script.Conversation) -> list:
    n = _called("task", convo.input["n"])["done"]
    return [say(json.dumps({"n": n + 1}))]


tally = Task(id="tally", input_schema=Step, output_schema=Step, model=script.provider([_tally]))
line = Pipeline(id="line", steps=[PipelineStep(task="tally"), PipelineStep(agent="crashy")])
counter = Agent(
    id="counter",
    model=script.provider([call("tally", {"n": 7}), lambda convo: say(f"Counted {convo.last_tool_output['n']}.")]),
    tools=[task_tool("tally")],
)


def config() -> Config:
    agents = [crashy, unwilling, boss, sinking, chief, looper, counter]
    return Config(agents=agents, tasks=[tally], pipelines=[line], blob_store="memory")
