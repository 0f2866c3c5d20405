"""Every demo agent through its AG-UI mount on a real gunicorn gevent server (``/ag-ui/run`` for
echo, ``/ag-ui/<agentId>`` for the others), each event checked against the ``ag-ui-protocol``
models and the rules of ``@ag-ui/client`` (tests/ag_ui_rules.py); a pause's interrupt answered,
and its continuation checked the same way."""

from __future__ import annotations

import pytest

from ..ag_ui_rules import check_stream, decode_sse
from .test_ag_ui_http import body

#: agent -> (the text sent, the answer to its interrupt or None when it runs to its end, an
#: event type that shows what the agent does).
DEMO = {
    "echo": ("hello there", None, "TEXT_MESSAGE_CONTENT"),
    "writer": ("rye bread", {"approved": True}, "TOOL_CALL_RESULT"),
    "interviewer": ("hi", {"answer": "Ada"}, "TOOL_CALL_START"),
    "slow": ("3 ticks", None, "TEXT_MESSAGE_CONTENT"),
    "counter": ("count to 3", None, "STATE_SNAPSHOT"),
    "manager": ("go", None, "STEP_STARTED"),
    "artist": ("draw", None, "CUSTOM"),
    "word-counter": ("one two three", None, "TOOL_CALL_RESULT"),
}


def mount(agent: str) -> str:
    return "/ag-ui/run" if agent == "echo" else f"/ag-ui/{agent}"


def stream(http, server, agent: str, **fields) -> list[dict]:
    answer = http.post(server.url + mount(agent), json=body(**fields))
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    events = decode_sse(answer.text)
    check_stream(events)
    return events


def test_the_table_holds_every_demo_agent(http, pool):
    assert {agent["id"] for agent in http.get(pool.primary("http-sse").url + "/agents").json()} == set(DEMO)


@pytest.mark.parametrize("agent", DEMO)
def test_a_demo_agent_streams_valid_ag_ui_events_through_its_mount(http, pool, agent):
    server, (text, answer, shown) = pool.primary("http-sse"), DEMO[agent]
    thread = f"demo-{agent}"
    events = stream(http, server, agent, threadId=thread, messages=[{"id": "m1", "role": "user", "content": text}])
    assert [e for e in events if e["type"] == "RUN_ERROR"] == []
    end = events[-1]
    assert end["type"] == "RUN_FINISHED" and end["runId"] == "client-run-1"
    if answer is None:
        assert "outcome" not in end or end["outcome"]["type"] == "success"
        assert shown in {e["type"] for e in events}
        return
    (interrupt,) = end["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": answer}
    resumed = stream(http, server, agent, threadId=thread, runId="client-run-2", messages=[], resume=[entry])
    assert resumed[0]["type"] == "RUN_STARTED" and resumed[-1]["type"] == "RUN_FINISHED"
    assert "outcome" not in resumed[-1] and resumed[-1]["result"]
    assert shown in {e["type"] for e in events + resumed}
