"""The MCP bridge in process: the handshake, sessions, every refusal, the tools and their calls."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from bread_sync import Agent, Config
from bread_sync.agents import subagent, tool
from bread_sync.demo import config as demo_config
from bread_sync.models import ReasoningDelta, TextDelta, script
from bread_sync.models.script import call, say
from bread_sync.protocols.mcp import MCP_ACTIONS, mcp_server
from bread_sync.protocols.mcp.tools import agent_tool, can_pause
from bread_sync.server import auth_plugin, create_server
from bread_sync.tasks import Task
from bread_sync.wire import SSE_BEHIND_FOR_GOOD

VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
KEY = "k" * 40


class Verdict(BaseModel):
    verdict: str


@tool(ask=True)
def launch(verdict: Verdict, ctx) -> dict:
    """Launch, once a human approved."""
    return {"launched": True}


judge = Agent(id="judge", output="json", output_schema=Verdict, description="Judges.",
              model=script.provider([say('{"verdict": "fine"}')]))  # fmt: skip


def _crash(convo):
    raise RuntimeError("/secret/path exploded")


broken = Task(id="broken", input_schema=Verdict, output_schema=Verdict, model=script.provider([_crash]))
# Asks before it streams a long answer: a resume whose continuation takes a while.
hold = Agent(id="hold", tools=[launch], model=script.provider([
    call("launch", {"verdict": "go"}), say([f"t{n} " for n in range(1000)], delay=0.02)]))  # fmt: skip
garbled = Agent(id="garbled", output="json", output_schema=Verdict, model=script.provider([say("not json")]))


def serve(make_bread, *plugins, agents=(), tasks=(), **server):
    config = demo_config()
    more = {"agents": [*config.agents, *agents], "tasks": [*config.tasks, *tasks]}
    config = config.model_copy(update={"plugins": list(plugins), **more})
    return create_server(make_bread(config, transport="http-sse", server=server)).test_client()


class Mcp:
    """A JSON-RPC caller of one test client: the handshake, then requests in its session."""

    def __init__(self, client, path="/mcp", headers=None):
        self.client, self.path, self.headers, self.session, self.ids = client, path, dict(headers or {}), None, 0

    def post(self, body, headers=None, session=True):
        sent = {**self.headers, **(headers or {})}
        if session and self.session:
            sent.setdefault("Mcp-Session-Id", self.session)
        return self.client.post(self.path, data=body if isinstance(body, (str, bytes)) else json.dumps(body),
                                headers={"Content-Type": "application/json", **sent})  # fmt: skip

    def initialize(self, version="2025-11-25"):
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        answer = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, session=False)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        self.session = answer.headers["Mcp-Session-Id"]
        return answer.get_json()["result"]

    def request(self, method, params=None, **opts):
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, **({"params": params} if params else {})}
        return self.post(body, **opts)

    def rpc(self, method, params=None):
        answer = self.request(method, params)
        assert answer.status_code == 200 and answer.content_type == "application/json"
        reply = answer.get_json()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == self.ids
        return reply

    def call(self, name, arguments=None):
        reply = self.rpc("tools/call", {"name": name, "arguments": arguments or {}})
        return reply["result"]


@pytest.fixture
def mcp(make_bread):
    session = Mcp(serve(make_bread, mcp_server(agents=None, tasks=None), agents=[judge, garbled, hold], tasks=[broken]))
    session.initialize()
    return session


def sse_messages(text):
    assert "\r" not in text
    messages = []
    for frame in text.split("\n\n"):
        lines = [line for line in frame.split("\n") if line and not line.startswith(":")]
        if lines:
            assert lines[0] == "event: message" and lines[1].startswith("data: ") and len(lines) == 2
            messages.append(json.loads(lines[1][len("data: ") :]))
    return messages


# the handshake and the session


@pytest.mark.parametrize("version", VERSIONS)
def test_initialize_answers_with_the_handshake_version_asked_for(make_bread, version):
    session = Mcp(serve(make_bread, mcp_server()))
    result = session.initialize(version)
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "bread_sync"
    assert session.session.isascii() and session.session.isprintable() and " " not in session.session


@pytest.mark.parametrize("version", ["2026-07-28", "2099-01-01", "1.0"])
def test_initialize_answers_an_unknown_version_with_the_newest(make_bread, version):
    assert Mcp(serve(make_bread, mcp_server())).initialize(version)["protocolVersion"] == "2025-11-25"


def test_each_initialize_opens_a_session_of_its_own(make_bread):
    client = serve(make_bread, mcp_server())
    first, second = Mcp(client), Mcp(client)
    first.initialize(), second.initialize()
    assert first.session != second.session
    assert first.rpc("ping")["result"] == {} and second.rpc("ping")["result"] == {}


def test_the_discover_probe_is_refused_at_once_with_method_not_found(make_bread):
    session = Mcp(serve(make_bread, mcp_server()))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    answer = session.request("server/discover", {"_meta": meta}, headers={"MCP-Protocol-Version": "2026-07-28"})
    assert answer.status_code == 200
    assert answer.get_json()["error"]["code"] == -32601 and answer.get_json()["id"] == 1


def test_a_request_without_a_session_is_400(make_bread):
    answer = Mcp(serve(make_bread, mcp_server())).request("tools/list")
    assert answer.status_code == 400
    assert answer.get_json() == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": answer.get_json()[
        "error"]["message"]}}  # fmt: skip
    assert "Mcp-Session-Id" in answer.get_json()["error"]["message"]


def test_an_unknown_session_is_404(mcp):
    answer = mcp.request("tools/list", headers={"Mcp-Session-Id": "mcp_nobody"})
    assert answer.status_code == 404 and answer.get_json()["error"]["code"] == -32600


def test_delete_ends_the_session_and_a_later_use_is_404(mcp):
    assert mcp.client.delete("/mcp", headers={"Mcp-Session-Id": mcp.session}).status_code == 204
    assert mcp.request("ping").status_code == 404
    assert mcp.request("tools/call", {"name": "agent_echo", "arguments": {"input": "x"}}).status_code == 404
    assert mcp.client.delete("/mcp", headers={"Mcp-Session-Id": mcp.session}).status_code == 404
    assert mcp.client.delete("/mcp").status_code == 400


def test_an_unsupported_protocol_version_header_is_400(mcp):
    answer = mcp.request("ping", headers={"MCP-Protocol-Version": "2026-07-28"})
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == -32600
    assert "2026-07-28" in answer.get_json()["error"]["message"]
    for version in VERSIONS:
        assert mcp.request("ping", headers={"MCP-Protocol-Version": version}).status_code == 200


def test_notifications_and_responses_are_202_with_no_body(mcp):
    for body in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
        {"jsonrpc": "2.0", "id": 9, "result": {}},
    ):
        answer = mcp.post(body)
        assert (answer.status_code, answer.get_data()) == (202, b"")


def test_get_is_405_the_server_opens_no_stream(mcp):
    answer = mcp.client.get("/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": mcp.session})
    assert answer.status_code == 405
    assert answer.get_json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert set(answer.headers["Allow"].split(", ")) >= {"POST", "DELETE"}


def test_ping_and_an_unknown_method(mcp):
    assert mcp.rpc("ping")["result"] == {}
    assert mcp.rpc("resources/list")["error"]["code"] == -32601
    assert mcp.rpc("no/such")["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"{not json", -32700), (b"", -32700), (b"  ", -32700), (b'{"x": NaN}', -32700), (b"\xff\xfe", -32700),
     (b"[1, 2]", -32600), (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600), (b"42", -32600),
     (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}', -32602), (b"{}", -32600),
     (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600), (b'{"jsonrpc": "2.0", "id": [1], "method": "x"}',
     -32600)],
)  # fmt: skip
def test_a_body_that_is_no_json_rpc_message_is_400_and_the_server_goes_on(mcp, body, code):
    answer = mcp.post(body)
    assert answer.status_code == 400
    assert answer.get_json()["error"]["code"] == code and answer.get_json()["id"] is None
    assert "Traceback" not in answer.get_data(as_text=True)
    assert mcp.rpc("ping")["result"] == {}


def test_an_initialize_without_its_params_is_invalid_params(make_bread):
    session = Mcp(serve(make_bread, mcp_server()))
    answer = session.request("initialize", session=False)
    assert answer.status_code == 200 and answer.get_json()["error"]["code"] == -32602
    assert "Mcp-Session-Id" not in answer.headers


# tools/list


@pytest.mark.parametrize("version", VERSIONS)
def test_tools_list_has_only_the_fields_the_negotiated_version_defines(make_bread, version):
    session = Mcp(serve(make_bread, mcp_server()))
    session.initialize(version)
    assert set(session.rpc("tools/list")["result"]) == {"tools"}  # no ttlMs, cacheScope, resultType


def test_tools_list_names_every_agent_and_task_and_resume(mcp, make_bread):
    tools = {t["name"]: t for t in mcp.rpc("tools/list")["result"]["tools"]}
    agents = [a.id for a in demo_config().agents] + ["judge", "garbled", "hold"]
    assert list(tools) == [*(f"agent_{a}" for a in agents), "task_word-count", "task_broken", "resume"]
    text = {"type": "string", "description": "What the agent is asked, as text."}
    assert tools["agent_echo"]["inputSchema"] == {"type": "object", "properties": {"input": text},
                                                  "required": ["input"]}  # fmt: skip
    assert tools["agent_echo"]["description"] == "Streams your input back, word by word."
    writer = tools["agent_writer"]["inputSchema"]
    assert (writer["type"], writer["properties"]["topic"]["type"], writer["required"]) == (
        "object",
        "string",
        ["topic"],
    )
    assert tools["agent_slow"]["inputSchema"]["required"] == ["count"]  # delayMs defaults to 100
    assert tools["task_word-count"]["outputSchema"]["properties"] == {"words": {"title": "Words", "type": "integer"}}
    assert tools["agent_judge"]["outputSchema"]["required"] == ["verdict"]
    assert [name for name, t in tools.items() if "outputSchema" in t] == ["agent_judge", "agent_garbled",
                                                                          "task_word-count", "task_broken"]  # fmt: skip
    assert tools["resume"]["inputSchema"]["required"] == ["checkpointId", "response"]
    assert all(t["inputSchema"]["type"] == "object" for t in tools.values())


def test_only_the_agents_and_tasks_named_are_tools(make_bread):
    session = Mcp(serve(make_bread, mcp_server(path="/tools", agents=["echo"], tasks=[])), path="/tools")
    session.initialize()
    assert [t["name"] for t in session.rpc("tools/list")["result"]["tools"]] == ["agent_echo", "resume"]


def test_by_default_the_agents_are_the_configs_entrypoints(make_bread):
    config = demo_config().model_copy(update={"plugins": [mcp_server()], "entrypoints": ["echo", "writer"]})
    session = Mcp(create_server(make_bread(config, transport="http-sse")).test_client())
    session.initialize()
    names = [t["name"] for t in session.rpc("tools/list")["result"]["tools"]]
    assert names == ["agent_echo", "agent_writer", "task_word-count", "resume"]


def test_an_agent_that_can_pause_has_no_output_schema():
    asker = Agent(id="asker", output=Loose(), output_schema=Verdict, tools=[launch])
    boss = Agent(id="boss", tools=[subagent("asker")])
    every = {"asker": asker, "boss": boss, "judge": judge}
    assert can_pause(asker, every) and can_pause(boss, every) and not can_pause(judge, every)
    assert agent_tool(asker, can_pause(asker, every)).listing.output_schema is None
    assert agent_tool(judge, False).listing.output_schema == Verdict.model_json_schema()


class Loose:
    """A custom output parser: such an agent may have tools, so it may pause."""

    def parse(self, text):
        return {"verdict": text}


def test_a_subagent_cycle_ends_the_pause_search():
    ping = Agent(id="ping", tools=[subagent("pong")])
    pong = Agent(id="pong", tools=[subagent("ping")])
    assert can_pause(ping, {"ping": ping, "pong": pong}) is False


# tools/call


def test_calling_an_agent_answers_its_output_as_text(mcp):
    result = mcp.call("agent_echo", {"input": "one two"})
    assert result == {"content": [{"type": "text", "text": "one two"}], "isError": False}


def test_calling_a_task_answers_text_and_structured_content(mcp):
    result = mcp.call("task_word-count", {"text": "a b c"})
    assert result["structuredContent"] == {"words": 3} and not result["isError"]
    assert json.loads(result["content"][0]["text"]) == {"words": 3}


def test_a_json_agent_answers_structured_content(mcp):
    result = mcp.call("agent_judge", {"input": "anything"})
    assert result["structuredContent"] == {"verdict": "fine"}
    assert json.loads(result["content"][0]["text"]) == {"verdict": "fine"}


def test_an_agent_with_an_input_model_takes_its_object(mcp):
    assert mcp.call("agent_slow", {"count": 2, "delayMs": 0})["content"][0]["text"] == "tick 1 tick 2 "
    assert mcp.call("agent_counter", {"until": 2})["isError"] is False


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("agent_slow", {"count": -1, "delayMs": 0}), ("agent_echo", {}), ("agent_echo", {"input": 5}),
     ("task_word-count", {"words": "x"}), ("resume", {"response": {}}), ("resume", {"checkpointId": "cp_x"})],
)  # fmt: skip
def test_arguments_the_tool_refuses_are_an_error_result(mcp, name, arguments):
    result = mcp.call(name, arguments)
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "INPUT_INVALID"
    assert result["content"][0]["text"].startswith("INPUT_INVALID: ")


def test_a_run_that_fails_is_an_error_result_with_its_code(mcp):
    result = mcp.call("agent_garbled", {"input": "x"})
    assert result["isError"] is True and result["structuredContent"]["code"] == "OUTPUT_INVALID"
    assert result["content"] == [{"type": "text", "text": f"OUTPUT_INVALID: {result['structuredContent']['message']}"}]


def test_a_task_that_crashes_is_an_internal_error_result_that_shows_nothing_of_the_server(mcp, caplog):
    result = mcp.call("task_broken", {"verdict": "x"})
    assert result["isError"] is True and result["structuredContent"]["code"] == "INTERNAL"
    assert "secret" not in json.dumps(result) and "RuntimeError" not in json.dumps(result)
    assert "exploded" in caplog.text  # the log has it whole
    assert mcp.rpc("ping")["result"] == {}


def test_an_unknown_tool_and_params_that_are_no_call_are_invalid_params(mcp):
    assert mcp.rpc("tools/call", {"name": "agent_nobody", "arguments": {}})["error"]["code"] == -32602
    assert mcp.rpc("tools/call", {"arguments": {}})["error"]["code"] == -32602
    assert mcp.rpc("tools/call")["error"]["code"] == -32602


def test_a_call_with_a_progress_token_streams_a_notification_per_crumb(mcp):
    params = {"name": "agent_slow", "arguments": {"count": 3, "delayMs": 0}, "_meta": {"progressToken": "p1"}}
    answer = mcp.request("tools/call", params, headers={"Accept": "application/json, text/event-stream"})
    assert answer.status_code == 200 and answer.mimetype == "text/event-stream"
    assert answer.headers["Bread-Run-Id"].startswith("run_")
    *notes, last = sse_messages(answer.get_data(as_text=True))
    assert {n["method"] for n in notes} == {"notifications/progress"}
    assert [n["params"]["progress"] for n in notes] == list(range(1, len(notes) + 1))
    assert {n["params"]["progressToken"] for n in notes} == {"p1"}
    messages = [n["params"]["message"] for n in notes]
    assert messages[0] == "agent:run:start" and messages[-1] == "agent:run:end"
    assert "".join(m for m in messages if m.startswith("tick")) == "tick 1 tick 2 tick 3 "
    assert last == {"jsonrpc": "2.0", "id": mcp.ids, "result": {"content": [{"type": "text", "text":
                    "tick 1 tick 2 tick 3 "}], "isError": False}}  # fmt: skip


class Thinker:
    """A provider that thinks aloud, then answers."""

    name = "thinker"

    def stream(self, request):
        yield ReasoningDelta("Let me think.")
        yield TextDelta("42")


def test_a_call_whose_client_fell_behind_ends_its_stream_with_no_advice_to_reconnect(make_bread):
    """An MCP stream has no resume: a client that stopped reading loses the call's response,
    and the stream's last words say so, and that its run goes on (no Last-Event-ID)."""
    session = Mcp(serve(make_bread, mcp_server(), max_stream_backlog=20))
    session.initialize()
    params = {"name": "agent_slow", "arguments": {"count": 300, "delayMs": 0}, "_meta": {"progressToken": "p"}}
    answer = session.request("tools/call", params, headers=STREAMED)  # its client reads nothing yet
    bread = session.client.application.extensions["bread_sync"].bread
    assert bread.wait(answer.headers["Bread-Run-Id"], 30)["status"] == "completed"
    body = answer.get_data()
    assert body.endswith(SSE_BEHIND_FOR_GOOD)
    assert {note.get("method") for note in sse_messages(body.decode())} == {"notifications/progress"}


def test_the_models_thinking_is_progress_marked_as_a_thought(make_bread):
    session = Mcp(serve(make_bread, mcp_server(agents=["thinker"]), agents=[Agent(id="thinker", model=Thinker())]))
    session.initialize()
    params = {"name": "agent_thinker", "arguments": {"input": "?"}, "_meta": {"progressToken": "p"}}
    answer = session.request("tools/call", params, headers={"Accept": "application/json, text/event-stream"})
    *notes, last = sse_messages(answer.get_data(as_text=True))
    [thought] = [n["params"] for n in notes if n["params"]["message"] == "Let me think."]
    assert thought["_meta"] == {"bread-sync/thought": True}
    [said] = [n["params"] for n in notes if n["params"]["message"] == "42"]
    assert "_meta" not in said
    assert last["result"]["content"] == [{"type": "text", "text": "42"}]  # the thinking is no answer


def test_a_progress_token_without_sse_in_accept_is_answered_as_json(mcp):
    params = {"name": "agent_echo", "arguments": {"input": "hi"}, "_meta": {"progressToken": 1}}
    answer = mcp.request("tools/call", params, headers={"Accept": "application/json"})
    assert answer.mimetype == "application/json" and answer.get_json()["result"]["content"][0]["text"] == "hi"


def test_a_paused_call_says_so_and_resume_continues_it(mcp):
    result = mcp.call("agent_writer", {"topic": "rye"})
    pause = result["structuredContent"]
    assert result["isError"] is False
    assert {k: pause[k] for k in ("status", "kind", "toolName", "input")} == {
        "status": "paused", "kind": "approval", "toolName": "publish", "input": {"title": "rye"}}  # fmt: skip
    assert pause["checkpointId"].startswith("cp_") and pause["checkpointId"] in result["content"][0]["text"]
    resumed = mcp.call("resume", {"checkpointId": pause["checkpointId"], "response": {"approved": True}})
    assert resumed["content"] == [{"type": "text", "text": "Published."}] and resumed["isError"] is False
    again = mcp.call("resume", {"checkpointId": pause["checkpointId"], "response": {"approved": True}})
    assert again["isError"] is True and again["structuredContent"]["code"] == "CHECKPOINT_ALREADY_RESUMED"


def test_an_input_pause_is_answered_through_resume(mcp):
    pause = mcp.call("agent_interviewer", {"input": "hello"})["structuredContent"]
    assert (pause["kind"], pause["toolName"], pause["input"]) == (
        "input",
        "ask_user",
        {"question": "What is your name?"},
    )
    refused = mcp.call("resume", {"checkpointId": pause["checkpointId"], "response": {"approved": True}})
    assert refused["structuredContent"]["code"] == "INPUT_INVALID"  # and the checkpoint stays answerable
    answered = mcp.call("resume", {"checkpointId": pause["checkpointId"], "response": {"answer": "Ada"}})
    assert answered["content"][0]["text"] == "Thanks, Ada."


def test_resume_passes_the_run_ownership_hook_and_a_refusal_says_no_more_than_unknown(make_bread):
    owned = {}

    def authorize_run(identity, run_id):
        return owned.get(run_id, True)

    session = Mcp(serve(make_bread, mcp_server(), authorize_run=authorize_run))
    session.initialize()
    pause = session.call("agent_writer", {"topic": "rye"})["structuredContent"]
    run_id = make_bread_run_of(session, pause["checkpointId"])
    owned[run_id] = False
    denied = session.call("resume", {"checkpointId": pause["checkpointId"], "response": {"approved": True}})
    unknown = session.call("resume", {"checkpointId": "cp_nothing", "response": {"approved": True}})
    assert denied["structuredContent"]["code"] == unknown["structuredContent"]["code"] == "CHECKPOINT_NOT_FOUND"
    owned[run_id] = True
    allowed = session.call("resume", {"checkpointId": pause["checkpointId"], "response": {"approved": False}})
    assert allowed["content"][0]["text"] == "Not published."


STREAMED = {"Accept": "application/json, text/event-stream"}


def cancel_call(mcp, request_id):
    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    answer = mcp.post(notice)
    assert answer.status_code == 202 and answer.get_data() == b""


def test_notifications_cancelled_cancels_the_run_of_the_call_it_names(mcp):
    params = {"name": "agent_slow", "arguments": {"count": 1000, "delayMs": 20}, "_meta": {"progressToken": "p"}}
    answer = mcp.request("tools/call", params, headers=STREAMED)  # streams while the run goes on
    run_id = answer.headers["Bread-Run-Id"]
    cancel_call(mcp, mcp.ids + 1)  # another request's id: nothing of this call
    cancel_call(mcp, str(mcp.ids))  # "3" is not 3
    assert make_bread_store(mcp).get_run(run_id)["status"] == "running"
    cancel_call(mcp, mcp.ids)
    *notes, last = sse_messages(answer.get_data(as_text=True))
    assert last["id"] == mcp.ids and last["result"]["isError"] is True
    assert last["result"]["structuredContent"]["code"] == "RUN_CANCELLED"
    assert len(notes) < 100 and make_bread_store(mcp).get_run(run_id)["status"] == "cancelled"


def test_notifications_cancelled_cancels_a_resumes_continuation(mcp):
    pause = mcp.call("agent_hold", {"input": "go"})["structuredContent"]
    params = {"name": "resume", "arguments": {"checkpointId": pause["checkpointId"], "response": {"approved": True}},
              "_meta": {"progressToken": "p"}}  # fmt: skip
    answer = mcp.request("tools/call", params, headers=STREAMED)
    cancel_call(mcp, mcp.ids)
    last = sse_messages(answer.get_data(as_text=True))[-1]
    assert last["result"]["structuredContent"]["code"] == "RUN_CANCELLED"
    assert make_bread_store(mcp).get_run(answer.headers["Bread-Run-Id"])["status"] == "cancelled"


def test_another_sessions_notice_with_the_same_request_id_cancels_nothing(mcp):
    params = {"name": "agent_slow", "arguments": {"count": 30, "delayMs": 10}, "_meta": {"progressToken": "p"}}
    answer = mcp.request("tools/call", params, headers=STREAMED)
    other = Mcp(mcp.client)
    other.initialize()
    cancel_call(other, mcp.ids)
    assert sse_messages(answer.get_data(as_text=True))[-1]["result"]["isError"] is False


def test_a_late_notice_leaves_a_paused_call_and_its_continuation_alone(mcp):
    pause = mcp.call("agent_hold", {"input": "go"})["structuredContent"]
    paused_call = mcp.ids
    cancel_call(mcp, paused_call)  # the call answered already: its run waits, paused
    run_id = make_bread_run_of(mcp, pause["checkpointId"])
    assert make_bread_store(mcp).get_run(run_id)["status"] == "paused"
    params = {"name": "resume", "arguments": {"checkpointId": pause["checkpointId"], "response": {"approved": True}},
              "_meta": {"progressToken": "p"}}  # fmt: skip
    answer = mcp.request("tools/call", params, headers=STREAMED)
    cancel_call(mcp, paused_call)  # names the run the resume call now continues: still nothing
    assert make_bread_store(mcp).get_run(run_id)["status"] == "running"
    cancel_call(mcp, mcp.ids)  # the resume call's own notice
    assert sse_messages(answer.get_data(as_text=True))[-1]["result"]["structuredContent"]["code"] == "RUN_CANCELLED"
    assert mcp_plugin(mcp)._continued == {}  # the continuation's entry went with its stream


def test_a_request_id_used_again_in_a_session_is_refused_not_answered_twice(mcp):
    first = mcp.call("agent_echo", {"input": "first words"})
    mcp.ids -= 1  # the same id again, as a client that restarted its count would send
    again = mcp.request("tools/call", {"name": "agent_echo", "arguments": {"input": "other words"}})
    assert first["content"][0]["text"] == "first words"
    assert again.status_code == 200 and again.get_json()["error"]["code"] == -32600
    assert "already used" in again.get_json()["error"]["message"]


def mcp_plugin(session):
    config = session.client.application.extensions["bread_sync"].bread.config
    return next(plugin for plugin in config.plugins if plugin.name == "mcp")


def test_a_cancel_passes_the_run_ownership_hook(make_bread):
    denied = set()
    session = Mcp(serve(make_bread, mcp_server(), authorize_run=lambda identity, run_id: run_id not in denied))
    session.initialize()
    params = {"name": "agent_slow", "arguments": {"count": 30, "delayMs": 10}, "_meta": {"progressToken": "p"}}
    answer = session.request("tools/call", params, headers=STREAMED)
    denied.add(answer.headers["Bread-Run-Id"])
    cancel_call(session, session.ids)
    assert sse_messages(answer.get_data(as_text=True))[-1]["result"]["isError"] is False


def make_bread_store(session):
    return session.client.application.extensions["bread_sync"].bread.store


def make_bread_run_of(session, checkpoint_id):
    bread = session.client.application.extensions["bread_sync"].bread
    return bread.store.get_checkpoint(checkpoint_id)["runId"]


def test_with_auth_every_request_is_the_mcp_request_action(make_bread):
    asked = []

    def authorize(identity, action, args):
        asked.append(action)
        return True

    client = serve(make_bread, auth_plugin(api_keys={"alice": KEY}, env_var=None), mcp_server(), authorize=authorize)
    assert Mcp(client).request("ping", session=False).status_code == 401
    session = Mcp(client, headers={"Authorization": f"Bearer {KEY}"})
    session.initialize()
    assert session.call("agent_echo", {"input": "hi"})["content"][0]["text"] == "hi"
    assert (
        session.client.delete("/mcp", headers={**session.headers, "Mcp-Session-Id": session.session}).status_code == 204
    )
    assert set(asked) == {MCP_ACTIONS.request} and len(asked) == 3


def test_a_store_without_mcp_sessions_is_refused_when_the_plugin_mounts(make_bread):
    from bread_sync.stores.memory import MemoryStore

    class Forgetful(MemoryStore):
        create_mcp_session = None

    config = Config(agents=[judge], plugins=[mcp_server()])
    with pytest.raises(TypeError, match="create_mcp_session"):
        create_server(make_bread(config, store=Forgetful(), transport="http-sse"))


def test_the_demo_mounts_every_agent_and_task_at_mcp_but_the_one_that_calls_it(make_bread):
    config = demo_config()
    [plugin] = [p for p in config.plugins if p.name == "mcp"]
    assert plugin.path == "/mcp"
    session = Mcp(create_server(make_bread(config, transport="http-sse")).test_client())
    session.initialize()
    names = {t["name"] for t in session.rpc("tools/list")["result"]["tools"]}
    agents = {f"agent_{a.id}" for a in config.agents if a.id != "word-counter"}
    assert names == agents | {f"task_{t.id}" for t in config.tasks} | {"resume"}


def test_the_bridge_loads_no_asyncio_server_stack_nor_the_mcp_sdk():
    import subprocess
    import sys

    probe = (
        "import sys, bread_sync.protocols.mcp, bread_sync.server, bread_sync.demo\n"
        "stacks = ('asyncio', 'anyio', 'starlette', 'uvicorn', 'sse_starlette', 'mcp')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in stacks))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")
