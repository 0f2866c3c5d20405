"""The demo, with agents that call the demo's own MCP server's tools through ``mcp_tools`` as
the tests of tests/integration/test_mcp_tools_http.py need: one whose call waits for a human's
approval (``ask``), one that calls the slow agent's tool (progress, and a cancel mid-call)."""

from __future__ import annotations

import os

from bread_sync import Agent
from bread_sync.demo import DEFAULT_MCP_URL
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.protocols.mcp import mcp_tools

#: Enough ticks, 20 ms apart, that the call is under way for minutes unless cancelled.
SLOW_TICKS = {"count": 10_000, "delayMs": 20}


def _said(convo: script.Conversation) -> say:
    return say(f"got {convo.last_tool_output}")


def config():
    url = os.environ.get("BREAD_DEMO_MCP_URL", DEFAULT_MCP_URL)
    careful = Agent(
        id="careful-counter",
        tools=[mcp_tools(url, allow=["task_word-count"], ask=["task_word-count"])],
        model=script.provider([lambda convo: call("task_word-count", {"text": str(convo.input)}), _said]),
    )
    slow = Agent(
        id="slow-caller",
        tools=[mcp_tools(url, allow=["agent_slow"])],
        model=script.provider([call("agent_slow", SLOW_TICKS), _said]),
    )
    demo = demo_config()
    return demo.model_copy(update={"agents": [*demo.agents, careful, slow]})
