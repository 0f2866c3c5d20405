"""The config of a server that calls another (``BREAD_CONFIG=tests.remote_config:config``, with
``BREAD_REMOTE_URL`` the other server's base URL and ``BREAD_REMOTE_WIRE`` ``sse`` or ``ndjson``).

The demo agents, with ``slow`` and ``writer`` shadowed by the remote's own, ``stepper`` (an agent
only the remote has, from ``tests.replica_config``) as ``far-stepper``, and ``missing`` naming an
agent the remote lacks. Leases are short, so a relay whose owner died is noticed quickly.
"""

from __future__ import annotations

import os

from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.transports import http_chunked, http_sse

REMOTES = {"slow": "slow", "writer": "writer", "far-stepper": "stepper", "missing": "no-such-agent"}


def config() -> Config:
    make = http_sse.remote_agent if os.environ.get("BREAD_REMOTE_WIRE") == "sse" else http_chunked.remote_agent
    url = os.environ["BREAD_REMOTE_URL"]
    remote_agents = {local: make(url=url, agent_id=there) for local, there in REMOTES.items()}
    return demo_config().model_copy(update={"remote_agents": remote_agents, "lease_seconds": 5.0})
