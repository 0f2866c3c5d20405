"""Token usage on the run: what each model call reported, summed on ``agent:run:end``, ``task:end``
and their records, across subagents, tasks, a remote agent, a pause and a resume."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel
from werkzeug.serving import make_server

from bread_sync import Agent, Config, create_bread
from bread_sync.agents import subagent, task_tool, tool
from bread_sync.models.script import call, provider, say, usage
from bread_sync.server import create_server
from bread_sync.tasks import Task
from bread_sync.transports import http_chunked
from bread_sync.usage import RunUsage


class Words(BaseModel):
    text: str


class Count(BaseModel):
    words: int


def tokens(input_tokens: int, output_tokens: int, **by_model: dict[str, Any]) -> dict[str, Any]:
    total = {"inputTokens": input_tokens, "outputTokens": output_tokens, "totalTokens": input_tokens + output_tokens}
    return {**total, "byModel": by_model} if by_model else total


@tool(ask=True)
def publish(input: Words, ctx) -> str:
    """Publish it."""
    return "ok"


COUNTER = Task(id="count", model=provider([say('{"words": 2}'), usage(5, 1)]), input_schema=Words, output_schema=Count)
HELPER = Agent(id="helper", model=provider([say("Helped."), usage(7, 3)]))
LEAD = Agent(
    id="lead",
    model=provider(
        [
            call("helper", {"input": "help"}),
            usage(10, 2),
            call("count", {"text": "two words"}),
            usage(20, 4),
            call("publish", {"text": "done"}),
            usage(30, 6),
            say("Done."),
            usage(40, 8),
        ]
    ),
    tools=[subagent("helper"), task_tool("count"), publish],
)


def make_bread():
    return create_bread(Config(agents=[LEAD, HELPER], tasks=[COUNTER], store="memory"))


def test_usage_is_summed_across_subagent_task_pause_and_resume():
    bread = make_bread()
    try:
        paused = bread.run("lead", "go", mode="sync")
        assert paused.status == "paused"
        so_far = bread.store.get_run(paused.run_id)["usage"]
        assert so_far["inputTokens"] == 10 + 7 + 20 + 5 + 30

        resumed = bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
        end = resumed.crumbs[-1]
        # the lead's four turns, the helper's and the task's, each under its model's name (a script's
        # agent names it after itself, as GET /agents does; a task's provider object is its name)
        by_model = {"script:lead": tokens(100, 20), "script:helper": tokens(7, 3), "script:script": tokens(5, 1)}
        expected = tokens(112, 24, **by_model)
        assert end["type"] == "agent:run:end" and end["usage"] == expected
        assert bread.store.get_run(paused.run_id)["usage"] == expected

        (task_end,) = [crumb for crumb in paused.crumbs if crumb["type"] == "task:end"]
        assert task_end["usage"] == tokens(5, 1, **{"script:script": tokens(5, 1)})
        assert bread.store.get_task_run(task_end["taskRunId"])["usage"] == task_end["usage"]
    finally:
        bread.close()


def test_a_run_whose_model_reports_nothing_has_no_usage():
    bread = create_bread(Config(agents=[Agent(id="echo", model="echo")], store="memory"))
    try:
        result = bread.run("echo", "hi", mode="sync")
        assert "usage" not in result.crumbs[-1]
        assert bread.store.get_run(result.run_id)["usage"] is None
    finally:
        bread.close()


def test_a_tally_goes_through_its_wire_shape_unchanged():
    tally = RunUsage()
    tally.add("openai:m", 3, 4)
    tally.add("script:s", 1, 0)
    tally.add("openai:m", 1, 1)
    wire = tally.to_wire()
    assert wire == tokens(5, 5, **{"openai:m": tokens(4, 5), "script:s": tokens(1, 0)})
    assert RunUsage.from_wire(wire).to_wire() == wire
    assert RunUsage().to_wire() is None


def test_a_remote_agents_usage_counts_for_the_run_that_relays_it(make_bread):
    spender = Agent(id="spender", model=provider([say("Spent."), usage(9, 4)]))
    remote = make_server("127.0.0.1", 0, create_server(make_bread(Config(agents=[spender]), transport="http-chunked")))
    thread = threading.Thread(target=remote.serve_forever, daemon=True)
    thread.start()
    try:
        far = http_chunked.remote_agent(url=f"http://127.0.0.1:{remote.port}", agent_id="spender")
        bread = make_bread(Config(agents=[], remote_agents={"far": far}))
        result = bread.run("far", "go", mode="sync")
    finally:
        remote.shutdown()
        thread.join(10)

    expected = tokens(9, 4, **{"script:spender": tokens(9, 4)})
    assert result.crumbs[-1]["usage"] == expected
    assert bread.store.get_run(result.run_id)["usage"] == expected
