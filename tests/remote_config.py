"""The config of a server that calls another (``BREAD_CONFIG=tests.remote_config:config``, with
``BREAD_REMOTE_URL`` the other server's base URL, ``BREAD_REMOTE_WIRE`` ``sse`` or ``ndjson``, and
``BREAD_REMOTE_KEY``, if set, the API key every request to it carries).

The demo agents, with ``slow`` and ``writer`` shadowed by the remote's own, ``stepper`` (an agent
only the remote has, from ``tests.replica_config``) as ``far-stepper``, and ``missing`` naming an
agent the remote lacks, and ``sleepy``, the remote's ``slow`` read by a relay that re-opens the
stream after half a second of silence; and two local agents that call remote ones as subagents: ``editor`` asks
the remote ``writer`` (which pauses for approval), ``watcher`` the remote ``slow`` (40 ticks).
Leases are short, so a relay whose owner died is noticed quickly.
"""

from __future__ import annotations

import functools
import os

from bread_sync.agents import Agent, subagent
from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.transports import http_chunked, http_sse

HEARTBEAT_TIMEOUT = 0.5
REMOTES = {"slow": "slow", "writer": "writer", "far-stepper": "stepper", "missing": "no-such-agent"}


def _report(convo: script.Conversation) -> say:
    return say(f"The writer said: {convo.last_tool_output}")


editor = Agent(
    id="editor",
    description="Has the remote writer draft a post about bread, then reports what it said.",
    model=script.provider([call("writer", {"topic": "bread"}), _report]),
    tools=[subagent("writer")],
)
watcher = Agent(
    id="watcher",
    description="Watches the remote slow agent tick 40 times.",
    model=script.provider([call("slow", {"count": 40, "delayMs": 100}), say("Watched.")]),
    tools=[subagent("slow")],
)


def config() -> Config:
    make = http_sse.remote_agent if os.environ.get("BREAD_REMOTE_WIRE") == "sse" else http_chunked.remote_agent
    url = os.environ["BREAD_REMOTE_URL"]
    key = os.environ.get("BREAD_REMOTE_KEY")  # a remote behind the auth plugin
    if key:
        make = functools.partial(make, headers={"Authorization": f"Bearer {key}"})
    remote_agents = {local: make(url=url, agent_id=there) for local, there in REMOTES.items()}
    # The remote's slow, read by a relay that takes half a second of silence for a dead stream.
    remote_agents["sleepy"] = make(url=url, agent_id="slow", heartbeat_timeout=HEARTBEAT_TIMEOUT)
    base = demo_config()
    agents = [*base.agents, editor, watcher]
    return base.model_copy(update={"agents": agents, "remote_agents": remote_agents, "lease_seconds": 5.0})
