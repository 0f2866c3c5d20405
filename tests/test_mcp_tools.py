"""mcp_tools: a remote MCP server's tools as an agent's, through the synchronous client, against
the demo's MCP endpoint served over real HTTP on a thread of this process (and, for what a
server misbehaving looks like, the scripted local server of tests/fake_provider.py)."""

from __future__ import annotations

import socket

import pytest

from bread_sync import Agent, BreadError, CancelToken, Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.protocols.mcp import mcp_tools as make_toolset
from bread_sync.protocols.mcp.client import McpClient as Client
from bread_sync.protocols.mcp.client import drained

from .fake_provider import STALL, Fail, Stream
from .waiting import wait_for

SLOW_TICKS = {"count": 1000, "delayMs": 20}


#: The toolsets and clients the running test made: closed when it ends, connections and all.
MADE: list = []


def mcp_tools(*args, **kwargs):
    MADE.append(make_toolset(*args, **kwargs))
    return MADE[-1]


def McpClient(*args, **kwargs):  # noqa: N802 - the class, kept for closing
    MADE.append(Client(*args, **kwargs))
    return MADE[-1]


@pytest.fixture(autouse=True)
def _closed_after():
    yield
    while MADE:
        MADE.pop().close()


@pytest.fixture
def served(make_bread, serve_in_thread):
    """The demo's bread, served: its ``/mcp`` is the MCP server under test."""
    bread = make_bread(transport="http-sse")
    return bread, f"{serve_in_thread(bread)}/mcp"


def calling(tool_name: str, arguments: dict, toolset, agent_id: str = "caller") -> Agent:
    """An agent that calls one tool, then says what it gave."""
    model = script.provider([call(tool_name, arguments), lambda convo: say(str(convo.last_tool_output))])
    return Agent(id=agent_id, model=model, tools=[toolset])


def bread_of(make_bread, *agents):
    return make_bread(Config(agents=list(agents)))


def of_type(crumbs, kind):
    return [c for c in crumbs if c["type"] == kind]


def test_the_tools_are_listed_when_a_run_first_needs_them_then_kept(served):
    bread, url = served
    toolset = mcp_tools(url, allow=["task_word-count", "agent_slow"])
    assert toolset.client._client is None  # nothing sent, nothing even made, as the config loads
    tools = toolset.tools()
    assert [t.name for t in tools] == ["agent_slow", "task_word-count"]
    assert toolset.tools() is tools
    counting = next(t for t in tools if t.name == "task_word-count")
    assert counting.description == "Counts the words of a text."
    assert counting.parameters()["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert not counting.ask and counting.on_repeat == "ask"


def test_a_call_is_a_tool_call_and_its_structured_result(served, make_bread):
    _, url = served
    caller = calling("task_word-count", {"text": "one two three"}, mcp_tools(url, allow=["task_word-count"]))
    result = bread_of(make_bread, caller).run("caller", "go", mode="sync")
    [called], [answered] = of_type(result.crumbs, "tool:call"), of_type(result.crumbs, "tool:result")
    assert called["toolName"] == answered["toolName"] == "task_word-count"
    assert called["input"] == {"text": "one two three"} and answered["output"] == {"words": 3}
    assert result.output == "{'words': 3}"


def test_a_tool_without_structured_content_gives_its_text(served, make_bread):
    _, url = served
    caller = calling("agent_echo", {"input": "hi there"}, mcp_tools(url, allow=["agent_echo"]))
    result = bread_of(make_bread, caller).run("caller", "go", mode="sync")
    assert of_type(result.crumbs, "tool:result")[0]["output"] == "hi there"


def test_a_tool_named_in_ask_waits_for_approval_then_calls(served, make_bread):
    _, url = served
    caller = calling("task_word-count", {"text": "a b"}, mcp_tools(url, ask=["task_word-count"]))
    bread = bread_of(make_bread, caller)
    paused = bread.run("caller", "go", mode="sync")
    assert paused.status == "paused" and paused.checkpoint["kind"] == "approval"
    assert paused.checkpoint["toolName"] == "task_word-count"
    resumed = bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert of_type(resumed.crumbs, "tool:result")[0]["output"] == {"words": 2}


def test_a_denied_call_never_reaches_the_server(served, make_bread):
    serving, url = served
    caller = calling("agent_echo", {"input": "x"}, mcp_tools(url, ask=["agent_echo"]))
    bread = bread_of(make_bread, caller)
    paused = bread.run("caller", "go", mode="sync")
    denied = bread.resume(paused.checkpoint["checkpointId"], {"approved": False}, mode="sync")
    assert of_type(denied.crumbs, "tool:error")[0]["error"].code == "TOOL_DENIED"
    assert serving.store.list_runs(agent="echo") == []


def test_progress_notifications_become_tool_progress_crumbs(served, make_bread):
    _, url = served
    caller = calling("agent_slow", {"count": 2, "delayMs": 0}, mcp_tools(url, allow=["agent_slow"]))
    result = bread_of(make_bread, caller).run("caller", "go", mode="sync")
    call_id = of_type(result.crumbs, "tool:call")[0]["toolCallId"]
    first = of_type(result.crumbs, "tool:progress")[0]  # the others within a second are dropped
    assert first == {"type": "tool:progress", "runId": result.run_id, "toolCallId": call_id, "progress": 1,
                     "message": "agent:run:start"}  # fmt: skip
    assert of_type(result.crumbs, "tool:result")[0]["output"] == "tick 1 tick 2 "


def test_a_cancelled_run_cancels_its_call_at_the_server(served, make_bread):
    serving, url = served
    caller = calling("agent_slow", SLOW_TICKS, mcp_tools(url, allow=["agent_slow"]))
    bread = bread_of(make_bread, caller)
    run = bread.run("caller", "go")
    crumbs = []
    for crumb in run:
        crumbs.append(crumb)
        if crumb["type"] == "tool:progress":
            bread.cancel(run.run_id)
    assert crumbs[-1]["type"] == "agent:error" and crumbs[-1]["error"].code == "RUN_CANCELLED"
    assert_cancelled_at_the_server(serving)


def assert_cancelled_at_the_server(serving) -> None:
    """The server's run of the call ends cancelled: notifications/cancelled reached it."""
    [slow] = serving.store.list_runs(agent="slow")
    wait_for(lambda: serving.store.get_run(slow["id"])["status"] == "cancelled", 10, "the server's run cancelled")


def test_a_cancel_wakes_a_read_blocked_on_the_answer(served):
    serving, url = served
    client, signal = McpClient(url), CancelToken()
    calls = client.call_tool("agent_slow", SLOW_TICKS, signal)
    next(calls)  # the first progress: the server's run is under way
    signal.cancel()  # no more progress is read: the blocked read is woken by its socket's shutdown
    with pytest.raises(BreadError) as raised:
        drained(calls)
    assert raised.value.code == "RUN_CANCELLED"
    assert_cancelled_at_the_server(serving)


def test_an_error_result_is_a_tool_error_with_the_servers_text(served, make_bread):
    _, url = served
    caller = calling("task_word-count", {"text": 42}, mcp_tools(url))
    [error] = of_type(bread_of(make_bread, caller).run("caller", "go", mode="sync").crumbs, "tool:error")
    assert error["error"].code == "TOOL_FAILED"
    assert error["error"].message.startswith("MCP tool task_word-count: INPUT_INVALID")


def test_a_json_rpc_error_is_tool_failed_with_the_servers_message_and_code(served):
    _, url = served
    with pytest.raises(BreadError) as raised:
        drained(McpClient(url).call_tool("no_such_tool", {}, CancelToken()))
    assert raised.value.code == "TOOL_FAILED" and "no tool 'no_such_tool'" in raised.value.message
    assert raised.value.context == {"mcpCode": -32602}


def test_a_session_the_server_forgot_is_opened_again_and_the_request_sent_again(served):
    serving, url = served
    client = McpClient(url)
    assert drained(client.call_tool("task_word-count", {"text": "a"}, CancelToken())).structured_content
    forgotten = client.session_id
    serving.store.delete_mcp_session(forgotten)
    result = drained(client.call_tool("task_word-count", {"text": "a b"}, CancelToken()))
    assert result.structured_content == {"words": 2} and client.session_id not in (None, forgotten)


def test_an_answer_past_max_bytes_is_refused(served):
    _, url = served
    with pytest.raises(BreadError, match="longer than 200 bytes") as raised:
        mcp_tools(url, max_bytes=200).tools()
    assert raised.value.code == "TOOL_FAILED"


def test_a_server_that_stalls_is_a_timeout_not_a_hang(provider_server):
    provider_server.play(Stream([STALL], end=None))
    with pytest.raises(BreadError, match="did not answer in time") as raised:
        mcp_tools(f"{provider_server.origin}/mcp", timeout=0.2).tools()
    assert raised.value.code == "TOOL_FAILED"


def test_an_answer_that_is_no_json_rpc_is_refused(provider_server):
    provider_server.play(Stream([{"hello": "world"}], end=None))
    with pytest.raises(BreadError, match="no JSON-RPC message"):
        mcp_tools(f"{provider_server.origin}/mcp").tools()


def test_a_compressed_answer_is_refused_unread(provider_server):
    provider_server.play(Fail(200, "inflates to anything", {"Content-Encoding": "gzip"}))
    with pytest.raises(BreadError, match="compressed"):
        mcp_tools(f"{provider_server.origin}/mcp").tools()
    assert provider_server.requests[0]["headers"]["accept-encoding"] == "identity"


INITIALIZED = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
ACCEPTED = Fail(202, "", {})


def test_a_request_the_server_sends_in_its_stream_is_declined(provider_server):
    ping = {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}
    provider_server.play(
        Stream([{"jsonrpc": "2.0", "id": 1, "result": INITIALIZED}], end=None),
        ACCEPTED,  # notifications/initialized
        Stream([ping, {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}], end=None),
        ACCEPTED,  # the answer to the ping
    )
    assert mcp_tools(f"{provider_server.origin}/mcp").tools() == []
    answer = provider_server.requests[-1]["body"]
    assert answer["id"] == "srv-1" and answer["error"]["code"] == -32601


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_out_of_reach_fails_the_run_and_the_next_run_lists_again(make_bread, serve_in_thread):
    port = unused_port()
    bread = bread_of(make_bread, calling("task_word-count", {"text": "a"}, mcp_tools(f"http://127.0.0.1:{port}/mcp")))
    failed = bread.run("caller", "go", mode="sync")
    assert failed.status == "failed" and failed.error.code == "TOOL_FAILED"
    assert "could not be reached" in failed.error.message
    serve_in_thread(make_bread(transport="http-sse"), port)  # the server is up now
    assert bread.run("caller", "go", mode="sync").status == "completed"


def test_the_demo_word_counter_counts_through_the_demos_own_mcp_server(make_bread, serve_in_thread, monkeypatch):
    port = unused_port()
    monkeypatch.setenv("BREAD_DEMO_MCP_URL", f"http://127.0.0.1:{port}/mcp")
    bread = make_bread(demo_config(), transport="http-sse")  # the demo reads where its MCP server is
    MADE.extend(bread.agent("word-counter").tools)
    serve_in_thread(bread, port)
    result = bread.run("word-counter", "one two three four", mode="sync")
    assert result.output == "4 words."
    assert of_type(result.crumbs, "tool:result")[0]["toolName"] == "task_word-count"
