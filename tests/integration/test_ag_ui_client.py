"""The official AG-UI client, npm's ``@ag-ui/client`` ``HttpAgent``, against a real gunicorn gevent
server: echo, and the writer's interrupt and its resume. The package is installed into
tests/node/ (the ``node_clients`` fixture) once, and reused on later runs."""

from __future__ import annotations

import json
import subprocess


def test_http_agent_runs_echo_and_the_writers_interrupt_and_resume(node_clients, pool):
    server = pool.primary("http-sse")
    done = subprocess.run(["node", "run_agents.mjs", server.url], cwd=node_clients, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning: no key stripped, no event dropped
    seen = json.loads(done.stdout)
    assert seen["echo"]["result"] == "hello there" and seen["echo"]["text"] == ["hello there"]
    paused, resumed = seen["writer"]["paused"], seen["writer"]["resumed"]
    assert paused["types"][0] == "RUN_STARTED" and paused["types"][-1] == "RUN_FINISHED"
    interrupt = paused["interrupt"]
    assert (interrupt["reason"], interrupt["metadata"]) == (
        "approval",
        {"toolName": "publish", "input": {"title": "rye"}},
    )
    assert interrupt["id"].startswith("cp_") and interrupt["responseSchema"]["required"] == ["approved"]
    assert resumed["result"] == "Published." and resumed["pending"] == []
    assert resumed["types"][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
