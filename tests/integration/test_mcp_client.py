"""The MCP bridge against real gunicorn gevent servers: the official Python SDK client (``mcp``
2.x, in its ``legacy`` and ``auto`` modes) and npm's ``@modelcontextprotocol/sdk``, unchanged; two
servers sharing one store; every refusal on the wire. asyncio drives the Python SDK client only."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import time

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from . import servers
from .bridges_auth_config import BRIEF_IDLE_SECONDS, KEYS, MAX_SESSIONS, READER_TOOL

ACCEPT = {"Accept": "application/json, text/event-stream"}
SECONDS = 30
CANCELLED = ("POST", "notifications/cancelled", 202)
DISPATCHER_LOG = logging.getLogger("mcp.shared.jsonrpc_dispatcher")


class Recorded(httpx.AsyncBaseTransport):
    """The SDK's HTTP transport, recording (HTTP method, JSON-RPC method, status) of each request
    in ``seen``."""

    def __init__(self, seen: list[tuple[str, str | None, int]]):
        self.seen = seen
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        method = json.loads(request.content).get("method") if request.content else None
        self.seen.append((request.method, method, response.status_code))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class LateAnswers(logging.Handler):
    """Counts the answers the SDK dropped because their request had been given up on: its
    dispatcher logs each at debug level once it is done with it."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("dropping response for unknown/late request id"):
            self.dropped += 1

    def __enter__(self) -> LateAnswers:
        DISPATCHER_LOG.addHandler(self)
        self._level, DISPATCHER_LOG.level = DISPATCHER_LOG.level, logging.DEBUG
        return self

    def __exit__(self, *exc: object) -> None:
        DISPATCHER_LOG.removeHandler(self)
        DISPATCHER_LOG.setLevel(self._level)


async def sdk_session(url: str, mode: str, seen: list) -> dict:
    """What the SDK client sees of the demo's tools and their calls."""
    with LateAnswers() as late:
        async with httpx.AsyncClient(timeout=SECONDS, transport=Recorded(seen)) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport, mode=mode, read_timeout_seconds=SECONDS) as client:
                got = await calls(client)
                # The call the SDK gave up on is answered once its run ends cancelled. The client
                # must not close before the SDK has dropped that answer: closing closes the stream
                # the SDK hands it to (anyio.ClosedResourceError or BrokenResourceError, a race of
                # the SDK's own, not a fault of the server's).
                deadline = time.monotonic() + SECONDS
                while not late.dropped and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                got["late answers dropped"] = late.dropped
                return got


async def calls(client: Client) -> dict:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    echo = await client.call_tool("agent_echo", {"input": "hello there"})
    counted = await client.call_tool("task_word-count", {"text": "one two three"})
    ticks = await client.call_tool("agent_slow", {"count": 3, "delayMs": 10}, progress_callback=on_progress)
    refused = await client.call_tool("agent_slow", {"count": -1, "delayMs": 0})
    paused = await client.call_tool("agent_writer", {"topic": "rye"})
    checkpoint = paused.structured_content["checkpointId"]
    resumed = await client.call_tool("resume", {"checkpointId": checkpoint, "response": {"approved": True}})
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("agent_nobody", {})
    with pytest.raises(MCPError) as abandoned:  # the SDK gives up, and says so: notifications/cancelled
        await client.call_tool("agent_slow", {"count": 1000, "delayMs": 20}, read_timeout_seconds=0.5)
    return {
        "version": client.protocol_version, "server": client.server_info.name, "tools": tools, "echo": echo,
        "counted": counted, "ticks": ticks, "progress": progress, "refused": refused, "paused": paused,
        "resumed": resumed, "unknown": unknown.value.error.code, "abandoned": abandoned.value.error.code,
    }  # fmt: skip


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_client_lists_calls_pauses_and_resumes(pool, mode):
    seen: list[tuple[str, str | None, int]] = []
    got = asyncio.run(sdk_session(pool.primary("http-sse").url, mode, seen))
    assert got["version"] == "2025-11-25" and got["server"] == "bread_sync"
    assert {"agent_echo", "agent_writer", "task_word-count", "resume"} <= set(got["tools"])
    assert got["tools"]["task_word-count"].output_schema["required"] == ["words"]
    assert [c.text for c in got["echo"].content] == ["hello there"] and not got["echo"].is_error
    # The SDK validated the structured content against the task's outputSchema.
    assert got["counted"].structured_content == {"words": 3}
    assert got["ticks"].content[0].text == "tick 1 tick 2 tick 3 "
    done = [d for d, _ in got["progress"]]
    assert done == sorted(done) and len(done) == len(set(done)) >= 5
    assert "".join(m for _, m in got["progress"] if m and m.startswith("tick")) == "tick 1 tick 2 tick 3 "
    assert got["refused"].is_error and got["refused"].structured_content["code"] == "INPUT_INVALID"
    pause = got["paused"].structured_content
    assert (pause["status"], pause["kind"], pause["toolName"], pause["input"]) == (
        "paused", "approval", "publish", {"title": "rye"})  # fmt: skip
    assert got["resumed"].content[0].text == "Published."
    assert got["unknown"] == -32602
    assert got["abandoned"] == -32001  # the SDK's own timeout
    assert CANCELLED in seen and got["late answers dropped"] == 1
    assert_the_abandoned_call_was_cancelled(pool.primary("http-sse").url)
    # The probe of auto mode came first and was refused at once; legacy mode sent none.
    first = seen[0][1]
    assert (first, seen[0][2]) == (("server/discover", 200) if mode == "auto" else ("initialize", 200))
    assert [m for _, m, _ in seen].count("initialize") == 1
    assert ("POST", "notifications/initialized", 202) in seen
    assert ("GET", None, 405) in seen  # the stream the client opens for server messages
    assert seen[-1] == ("DELETE", None, 204)  # the client ended its session


def assert_the_abandoned_call_was_cancelled(url: str) -> None:
    """The last run of ``slow`` (the call the SDK abandoned) ends cancelled, long before its 20 s."""
    with httpx.Client(timeout=SECONDS) as http:
        runs = [r for r in http.get(f"{url}/runs").json() if r["agentId"] == "slow"]
        last = max(runs, key=lambda r: r["createdAt"])
        deadline = time.monotonic() + 10
        while last["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            last = http.get(f"{url}/runs/{last['id']}").json()
    assert last["status"] == "cancelled" and last["id"].startswith("run_mcp_")


def rpc(http, url, method, params=None, session=None, id=1, **headers):
    body = {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params is not None else {})}
    sent = {**ACCEPT, **({"Mcp-Session-Id": session} if session else {}), **headers}
    return http.post(f"{url}/mcp", json=body, headers=sent)


def initialize(http, url, version="2025-06-18", headers=None):
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    answer = rpc(http, url, "initialize", params, **(headers or {}))
    assert answer.status_code == 200 and answer.json()["result"]["protocolVersion"] == version
    return answer.headers["Mcp-Session-Id"]


def test_a_session_opened_on_one_server_serves_on_another_sharing_its_store(pool):
    first, second = pool.primary("http-sse"), pool.peer("http-sse")
    with httpx.Client(timeout=SECONDS) as http:
        session = initialize(http, first.url)
        on = {"session": session, "MCP-Protocol-Version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        noted = http.post(f"{second.url}/mcp", json=note, headers={**ACCEPT, "Mcp-Session-Id": session})
        assert noted.status_code == 202
        tools = rpc(http, second.url, "tools/list", id=2, **on).json()["result"]["tools"]
        assert "agent_echo" in {t["name"] for t in tools}
        call = {"name": "agent_echo", "arguments": {"input": "across"}}
        echo = rpc(http, second.url, "tools/call", call, id=3, **on)
        assert echo.json()["result"]["content"] == [{"type": "text", "text": "across"}]
        call = {"name": "agent_writer", "arguments": {"topic": "oat"}}
        paused = rpc(http, second.url, "tools/call", call, id=4, **on)
        checkpoint = paused.json()["result"]["structuredContent"]["checkpointId"]
        answer = {"checkpointId": checkpoint, "response": {"approved": False}}
        resumed = rpc(http, second.url, "tools/call", {"name": "resume", "arguments": answer}, id=5, **on)
        assert resumed.json()["result"]["content"][0]["text"] == "Not published."
        assert http.delete(f"{second.url}/mcp", headers={"Mcp-Session-Id": session}).status_code == 204
        # Ended on the second, unknown on the first too.
        for server in (first, second):
            assert rpc(http, server.url, "ping", id=6, **on).status_code == 404


def test_every_refusal_on_the_wire_leaves_the_server_serving(pool):
    url = pool.primary("http-sse").url
    with httpx.Client(timeout=SECONDS) as http:
        probe = rpc(http, url, "server/discover", {}, **{"MCP-Protocol-Version": "2026-07-28"})
        assert (probe.status_code, probe.json()["error"]["code"]) == (200, -32601)
        # Refused at the HTTP layer, each with its request's id (MCP basic), a string one too.
        no_session = rpc(http, url, "tools/list", id="r-1")
        assert (no_session.status_code, no_session.json()["id"]) == (400, "r-1")
        gone = rpc(http, url, "tools/list", session="mcp_gone", id=41)
        assert (gone.status_code, gone.json()["id"]) == (404, 41)
        session = initialize(http, url)
        bad_version = rpc(http, url, "ping", session=session, id=42, **{"MCP-Protocol-Version": "1999-01-01"})
        assert bad_version.status_code == 400 and bad_version.json()["error"]["code"] == -32600
        assert bad_version.json()["id"] == 42
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}  # no id to carry: null
        assert http.post(f"{url}/mcp", json=note, headers=ACCEPT).json()["id"] is None
        garbage = http.post(f"{url}/mcp", content=b"{oops", headers={**ACCEPT, "Content-Type": "application/json"})
        assert garbage.status_code == 400 and set(garbage.json()) == {"jsonrpc", "id", "error"}
        assert garbage.json()["id"] is None and garbage.json()["error"]["code"] == -32700
        assert rpc(http, url, "no/such", session=session).json()["error"]["code"] == -32601
        unknown = rpc(http, url, "tools/call", {"name": "agent_nobody", "arguments": {}}, session=session)
        assert unknown.json()["error"]["code"] == -32602
        failed = rpc(http, url, "tools/call", {"name": "agent_echo", "arguments": {}}, session=session)
        assert failed.json()["result"]["isError"] is True
        stream = http.get(f"{url}/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session})
        assert stream.status_code == 405
        assert rpc(http, url, "ping", session=session).json()["result"] == {}
        assert http.get(f"{url}/health").status_code == 200


def test_the_typescript_sdk_client_lists_calls_pauses_and_resumes(node_clients, pool):
    server = pool.primary("http-sse")
    done = subprocess.run(["node", "run_mcp.mjs", f"{server.url}/mcp"], cwd=node_clients, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning
    seen = json.loads(done.stdout)
    assert seen["version"] == "2025-11-25" and seen["server"] == "bread_sync"
    assert {"agent_echo", "agent_writer", "task_word-count", "resume"} <= set(seen["tools"])
    assert seen["echo"] == {"content": [{"type": "text", "text": "hello there"}], "isError": False}
    assert seen["counted"]["structuredContent"] == {"words": 3}
    assert seen["ticks"]["content"][0]["text"] == "tick 1 tick 2 tick 3 "
    assert seen["progress"] == sorted(seen["progress"]) and len(seen["progress"]) >= 5
    assert "".join(m for m in seen["messages"] if m.startswith("tick")) == "tick 1 tick 2 tick 3 "
    assert seen["paused"]["structuredContent"]["status"] == "paused"
    assert seen["resumed"]["content"][0]["text"] == "Thanks, Ada."
    assert seen["refused"]["isError"] is True and seen["refused"]["structuredContent"]["code"] == "INPUT_INVALID"
    assert seen["unknown"] == -32602
    assert seen["aborted"].endswith("enough") and seen["cancelStatus"] == 202
    assert_the_abandoned_call_was_cancelled(server.url)


# Behind the auth plugin: a session is its opener's, capped per identity, ended when idle.

GUARDED = "tests.integration.bridges_auth_config:config"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    home = tmp_path_factory.mktemp("mcp-auth")
    server = servers.Server("mcp-auth", home, home / "bread.db", env={"BREAD_CONFIG": GUARDED})
    yield server.start()
    server.stop()


def as_(name: str) -> dict:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def stored_sessions(server, *session_ids: str) -> list[str]:
    with sqlite3.connect(server.db) as db:
        marks = ", ".join("?" * len(session_ids))
        return sorted(i for (i,) in db.execute(f"SELECT id FROM mcp_sessions WHERE id IN ({marks})", session_ids))


async def sdk_echo(url: str, headers: dict) -> tuple[set[str], str]:
    async with httpx.AsyncClient(timeout=SECONDS, headers=headers) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=SECONDS) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            echo = await client.call_tool("agent_echo", {"input": "mine"})
            return tools, echo.content[0].text


def test_the_sdk_client_is_served_behind_auth(guarded):
    tools, echoed = asyncio.run(sdk_echo(guarded.url, as_("alice")))
    assert tools == {"agent_echo", "task_word-count", "resume"} and echoed == "mine"


def test_a_session_answers_only_the_identity_that_opened_it(guarded):
    with httpx.Client(timeout=SECONDS) as http:
        session = initialize(http, guarded.url, headers=as_("alice"))
        on = {"session": session, **as_("bob")}
        assert rpc(http, guarded.url, "tools/list", **on).status_code == 404
        call = rpc(http, guarded.url, "tools/call", {"name": "agent_echo", "arguments": {"input": "x"}}, id=7, **on)
        assert (call.status_code, call.json()["error"]["code"]) == (404, -32600)
        note = {"jsonrpc": "2.0", "method": CANCELLED[1], "params": {"requestId": 7}}
        headers = {**ACCEPT, "Mcp-Session-Id": session, **as_("bob")}
        assert http.post(f"{guarded.url}/mcp", json=note, headers=headers).status_code == 404
        assert http.delete(f"{guarded.url}/mcp", headers={"Mcp-Session-Id": session, **as_("bob")}).status_code == 404
        # Still alice's, whole: bob used none of its request ids.
        mine = {"session": session, **as_("alice")}
        echo = rpc(http, guarded.url, "tools/call", {"name": "agent_echo", "arguments": {"input": "x"}}, id=7, **mine)
        assert echo.json()["result"]["content"] == [{"type": "text", "text": "x"}]
        assert http.delete(f"{guarded.url}/mcp", headers={"Mcp-Session-Id": session, **as_("alice")}).status_code == 204


def test_an_identitys_oldest_session_is_ended_past_its_cap_and_no_one_elses(guarded):
    with httpx.Client(timeout=SECONDS) as http:
        bobs = initialize(http, guarded.url, headers=as_("bob"))
        readers = [initialize(http, guarded.url, headers=as_("reader")) for _ in range(MAX_SESSIONS + 1)]
        pings = [rpc(http, guarded.url, "ping", session=s, **as_("reader")).status_code for s in readers]
        assert pings == [404] + [200] * MAX_SESSIONS
        assert stored_sessions(guarded, *readers) == sorted(readers[1:])
        assert rpc(http, guarded.url, "ping", session=bobs, **as_("bob")).status_code == 200


def test_an_idle_session_ends_and_leaves_the_store(guarded):
    url = f"{guarded.url}/mcp-brief"
    with httpx.Client(timeout=SECONDS) as http:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        session = http.post(url, json=body, headers={**ACCEPT, **as_("alice")}).headers["Mcp-Session-Id"]
        time.sleep(BRIEF_IDLE_SECONDS * 1.5)  # the clock is what is under test: the session's idle time
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        late = http.post(url, json=ping, headers={**ACCEPT, "Mcp-Session-Id": session, **as_("alice")})
        assert late.status_code == 404
        assert stored_sessions(guarded, session) == []


def test_authorize_tells_the_json_rpc_methods_and_tools_apart(guarded):
    with httpx.Client(timeout=SECONDS) as http:
        session = initialize(http, guarded.url, headers=as_("reader"))
        on = {"session": session, **as_("reader")}
        assert rpc(http, guarded.url, "tools/list", **on).status_code == 200
        count = {"name": "task_word-count", "arguments": {"text": "a b"}}
        assert rpc(http, guarded.url, "tools/call", count, **on).json()["result"]["structuredContent"] == {"words": 2}
        echo = {"name": "agent_echo", "arguments": {"input": "x"}}
        assert rpc(http, guarded.url, "tools/call", echo, **on).json() == {"error": "Forbidden"}
        # The query does not speak for the body.
        spoof = http.post(f"{guarded.url}/mcp?method=tools/list&tool={READER_TOOL}", headers={**ACCEPT,
                          "Mcp-Session-Id": session, **as_("reader")},
                          json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": echo})  # fmt: skip
        assert spoof.status_code == 403
        # A body that is no JSON still gets its JSON-RPC error from the endpoint.
        garbage = http.post(f"{guarded.url}/mcp", content=b"{oops", headers={**ACCEPT, **as_("alice")})
        assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
