"""mcp_tools against a real gunicorn gevent server: its agents call the tools of its own MCP
endpoint (the demo's ``/mcp``) over HTTP, so no outside server is needed: a call, an approval
through ``ask``, progress as ``tool:progress`` crumbs, and a cancel that reaches the MCP server
as ``notifications/cancelled`` (the server's run of the call ends cancelled)."""

from __future__ import annotations

import pytest

from ..waiting import wait_for
from . import servers
from .client import open_stream, resume, run, run_error_of

WIRE = "sse"
CONFIG = "tests.integration.mcp_tools_config:config"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: every test here reads only the runs it started."""
    home = tmp_path_factory.mktemp("mcp-tools")
    server = servers.Server("mcp-tools", home, home / "bread.db", "http-sse", env={"BREAD_CONFIG": CONFIG})
    yield server.start()
    server.stop()


def crumbs_of(stream, kind: str) -> list[dict]:
    return [e.data for e in stream.crumbs if e.type == kind]


def test_the_demo_word_counter_calls_task_word_count_through_mcp(http, server):
    stream = run(http, server.url, "word-counter", {"input": "one two three"}, WIRE)
    [called], [answered] = crumbs_of(stream, "tool:call"), crumbs_of(stream, "tool:result")
    assert called["toolName"] == "task_word-count" and called["input"] == {"text": "one two three"}
    assert answered["output"] == {"words": 3} and answered["toolCallId"] == called["toolCallId"]
    assert stream.last_crumb.type == "agent:run:end" and stream.last_crumb.data["output"] == "3 words."


def test_a_tool_named_in_ask_is_called_once_a_human_approves(http, server):
    paused = run(http, server.url, "careful-counter", {"input": "a b"}, WIRE)
    pause = paused.last_crumb.data
    assert pause["type"] == "human:required" and pause["kind"] == "approval"
    assert pause["toolName"] == "task_word-count" and crumbs_of(paused, "tool:result") == []
    resumed = resume(http, server.url, pause["checkpointId"], {"approved": True}, WIRE)
    assert crumbs_of(resumed, "tool:result")[0]["output"] == {"words": 2}
    assert resumed.last_crumb.data["output"] == "got {'words': 2}"


def test_progress_is_logged_and_a_cancel_reaches_the_mcp_server(http, server):
    with open_stream(http, "POST", f"{server.url}/agents/slow-caller/run", WIRE, body={"input": "go"}) as stream:
        assert stream.status == 200, stream.text
        progress = stream.until(lambda e: e.type == "tool:progress", "the call's first progress").data
        [called] = crumbs_of(stream, "tool:call")
        assert progress["toolCallId"] == called["toolCallId"] and progress["progress"] == 1
        assert progress["message"] == "agent:run:start"  # what the demo's MCP server says first
        assert http.post(f"{server.url}/runs/{stream.run_id}/cancel").status_code == 200
        stream.rest()
    assert run_error_of(stream, WIRE)["code"] == "RUN_CANCELLED"
    assert http.get(f"{server.url}/runs/{stream.run_id}").json()["status"] == "cancelled"

    def slow_runs_cancelled() -> bool:
        slow = http.get(f"{server.url}/runs", params={"agent": "slow"}).json()
        return len(slow) == 1 and slow[0]["status"] == "cancelled"

    wait_for(slow_runs_cancelled, 10, "the MCP server's run of the call to end cancelled")
