"""One bread_sync server calling an agent of another: the caller's `writer` is the remote's.

    .venv/bin/bread-sync start --port 3001                                     # the remote (the demo)
    BREAD_CONFIG=examples.remote_agents:config BREAD_REMOTE_URL=http://127.0.0.1:3001 \\
        .venv/bin/bread-sync start --port 3000                                 # the caller
    .venv/bin/python examples/remote_agents.py                                 # a client of the caller

The client runs `writer` on the caller, which relays the remote's run: the crumbs come under the
caller's run id and seqs; the writer's pause for approval is a checkpoint of the caller, and the
resume sent to the caller resumes the remote's. `BREAD_URL` names the caller (default
http://127.0.0.1:3000). The client uses only the standard library (the caller answers NDJSON).
"""

from __future__ import annotations

import json
import os
import urllib.request

from bread_sync.config import Config
from bread_sync.demo import config as demo_config
from bread_sync.transports import http_chunked

BASE = os.environ.get("BREAD_URL", "http://127.0.0.1:3000")


def config() -> Config:
    """The caller's config: the demo, with `writer` served by the server at BREAD_REMOTE_URL."""
    remote = http_chunked.remote_agent(url=os.environ["BREAD_REMOTE_URL"], agent_id="writer")
    return demo_config().model_copy(update={"remote_agents": {"writer": remote}})


def post(path: str, body: dict) -> list[dict]:
    """POST a JSON body to the caller; the CrumbFrames of its NDJSON answer."""
    request = urllib.request.Request(f"{BASE}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return [json.loads(line) for line in response.read().decode().splitlines() if line]


def show(frames: list[dict]) -> dict:
    """Print each crumb with its seq; the last crumb."""
    for frame in frames:
        crumb = frame["crumb"]
        print(f"{frame['seq']:>3} {crumb['type']:18} {crumb.get('delta', '')}".rstrip())
    return frames[-1]["crumb"]


def main() -> None:
    paused = show(post("/agents/writer/run", {"input": {"topic": "sourdough"}}))
    print(f"paused: {paused['toolName']} {json.dumps(paused['input'])} (checkpoint of the caller)")
    ended = show(post(f"/resume/{paused['checkpointId']}", {"response": {"approved": True}}))
    print(f"output: {ended['output']}")


if __name__ == "__main__":
    main()
