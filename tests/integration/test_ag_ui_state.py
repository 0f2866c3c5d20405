"""A RunAgentInput's ``state`` and ``context`` on a real gunicorn gevent server: what a tool and a
model see through the AG-UI route, the state the thread keeps for its next run, and the
STATE_SNAPSHOTs carrying the client's state with bread's keys merged in."""

from __future__ import annotations

import json

import pytest

from ..ag_ui_rules import check_stream, decode_sse
from .test_ag_ui_http import body

CONFIG = "tests.state_config:config"
STATE = {"plan": {"steps": ["knead", "bake"]}, "user": "ann"}
CONTEXT = [{"description": "the user's timezone", "value": "Europe/Paris"}]


@pytest.fixture
def server(pool):
    return pool.primary("http-sse", CONFIG)


def run(http, server, agent, **fields) -> list[dict]:
    answer = http.post(f"{server.url}/ag-ui/{agent}", json=body(**fields))
    assert answer.status_code == 200
    events = decode_sse(answer.text)
    check_stream(events)
    return events


def seen_by_the_tool(events) -> dict:
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    return json.loads(result["content"])


def test_a_tool_and_a_model_read_the_state_and_context_the_client_sent(http, server):
    events = run(http, server, "peek", threadId="state-tool", state=STATE, context=CONTEXT)
    assert seen_by_the_tool(events) == {"state": STATE, "context": CONTEXT}
    mirrored = run(http, server, "mirror", threadId="state-model", state=STATE, context=CONTEXT)
    assert json.loads(mirrored[-1]["result"]) == {"state": STATE, "context": CONTEXT}


def test_the_thread_keeps_the_state_and_its_next_run_sees_it(http, server):
    run(http, server, "peek", threadId="state-kept", state=STATE)
    assert http.get(f"{server.url}/sessions/state-kept").json()["state"] == STATE

    later = run(http, server, "peek", threadId="state-kept", runId="client-run-2", state=None, context=[])
    assert seen_by_the_tool(later) == {"state": STATE, "context": []}
    native = http.post(f"{server.url}/agents/mirror/run", json={"input": "go", "session": {"id": "state-kept"}})
    ended = [line for line in native.text.splitlines() if '"agent:run:end"' in line]
    assert ended and json.loads(json.loads(ended[0].removeprefix("data: "))["payload"]["output"])["state"] == STATE


def test_a_resume_continues_with_the_state_and_context_it_sends(http, server):
    paused = run(http, server, "guarded", threadId="state-resume", state={"v": 1})
    (interrupt,) = paused[-1]["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    resumed = run(http, server, "guarded", threadId="state-resume", runId="c-2", messages=[], resume=[entry],
                  state={"v": 2}, context=CONTEXT)  # fmt: skip
    assert seen_by_the_tool(resumed) == {"state": {"v": 2}, "context": CONTEXT}
    assert http.get(f"{server.url}/sessions/state-resume").json()["state"] == {"v": 2}


def test_the_snapshots_carry_the_clients_state_with_breads_keys_winning(http, pool):
    demo = pool.primary("http-sse")
    client = {**STATE, "task": "the client's"}
    events = run(http, demo, "manager", threadId="state-snapshots", state=client)
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert len(snapshots) == 4 and all(s["plan"] == STATE["plan"] and s["user"] == "ann" for s in snapshots)
    assert snapshots[0]["task"] == "the client's"  # no task yet: the client's own key stands
    assert snapshots[-1]["task"]["taskId"] == "word-count"  # then bread's wins
    assert snapshots[-1]["subagent"]["status"] == "completed"
