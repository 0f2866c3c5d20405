"""The ag_ui() plugin in process: its route, its action, the thread check and the crumb bus."""

from __future__ import annotations

from bread_sync.demo import config as demo_config
from bread_sync.protocols.ag_ui import AG_UI_ACTIONS, ag_ui
from bread_sync.server import auth_plugin, create_server

from .ag_ui_rules import check_event, check_stream, decode_sse

KEY = "k" * 40
HEADERS = {"Authorization": f"Bearer {KEY}"}


def body(text="hi", thread="t1"):
    return {"threadId": thread, "runId": "r1", "messages": [{"id": "m", "role": "user", "content": text}]}


def serve(make_bread, *plugins, **server):
    config = demo_config().model_copy(update={"plugins": list(plugins)})
    return create_server(make_bread(config, transport="http-sse", server=server)).test_client()


def test_the_demo_mounts_echo_at_ag_ui_run(make_bread):
    client = create_server(make_bread(transport="http-sse")).test_client()
    events = decode_sse(client.post("/ag-ui/run", json=body("one two")).get_data(as_text=True))
    check_stream(events)
    assert events[-1]["result"] == "one two"


def test_the_demo_mounts_every_other_agent_at_ag_ui_its_id(make_bread):
    config = demo_config()
    mounts = {plugin.agent_id: plugin.path for plugin in config.plugins if plugin.name == "ag_ui"}
    assert mounts == {"echo": "/ag-ui/run", **{a.id: f"/ag-ui/{a.id}" for a in config.agents if a.id != "echo"}}
    client = create_server(make_bread(config, transport="http-sse")).test_client()
    events = decode_sse(client.post("/ag-ui/slow", json=body("2 ticks")).get_data(as_text=True))
    check_stream(events)
    assert events[-1]["result"] == "tick 1 tick 2 "


def test_a_plugin_per_agent_at_its_own_path(make_bread):
    client = serve(make_bread, ag_ui(agent_id="echo"), ag_ui(agent_id="manager", path="/ag-ui/manager"))
    events = decode_sse(client.post("/ag-ui/manager", json=body()).get_data(as_text=True))
    check_stream(events)
    assert "subagent_echo" in {e.get("stepName") for e in events}


def test_a_failure_before_the_run_is_a_lone_run_error_at_200(make_bread):
    client = serve(make_bread, ag_ui(agent_id="no-such-agent"))
    answer = client.post("/ag-ui/run", json=body())
    assert answer.status_code == 200 and "Bread-Run-Id" not in answer.headers
    events = decode_sse(answer.get_data(as_text=True))
    check_stream(events)
    assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "AGENT_NOT_FOUND")]


def test_with_auth_the_route_is_the_ag_ui_run_action_and_the_thread_is_checked(make_bread):
    asked = []

    def authorize(identity, action, args):
        asked.append(action)
        return True

    def own_threads(identity, thread_id):
        return thread_id.startswith(identity["sub"])

    plugins = (auth_plugin(api_keys={"alice": KEY}, env_var=None), ag_ui(agent_id="echo", authorize_thread=own_threads))
    client = serve(make_bread, *plugins, authorize=authorize)
    assert client.post("/ag-ui/run", json=body()).status_code == 401
    mine = client.post("/ag-ui/run", json=body(thread="alice-1"), headers=HEADERS)
    assert mine.status_code == 200 and asked == [AG_UI_ACTIONS.run]
    check_stream(decode_sse(mine.get_data(as_text=True)))
    theirs = client.post("/ag-ui/run", json=body(thread="bob-1"), headers=HEADERS)
    assert theirs.status_code == 403 and theirs.get_json() == {"error": "Forbidden"}


def test_a_thread_check_that_does_not_say_true_denies(make_bread):
    client = serve(make_bread, ag_ui(agent_id="echo", authorize_thread=lambda identity, thread: None))
    assert client.post("/ag-ui/run", json=body()).status_code == 403


def test_on_event_maps_every_run_of_the_instance(make_bread):
    seen = []
    plugin = ag_ui(on_event=lambda event: seen.append(event.model_dump(mode="json", by_alias=True)))
    bread = make_bread(demo_config().model_copy(update={"plugins": [plugin]}))
    bread.run("echo", "a b", session="s1", mode="sync")
    bread.run("counter", {"until": 2}, mode="sync")
    for event in seen:
        check_event(event)
    starts = [i for i, e in enumerate(seen) if e["type"] == "RUN_STARTED"]
    assert len(starts) == 2 and seen[0]["threadId"] == "s1"
    check_stream(seen[: starts[1]])
    check_stream(seen[starts[1] :])


def test_without_agent_id_no_route_and_without_on_event_no_hook(make_bread):
    plugin = ag_ui()
    assert not hasattr(plugin, "on_crumb")
    client = serve(make_bread, plugin)
    assert client.post("/ag-ui/run", json=body()).status_code == 404


def test_the_demo_serves_without_the_extra(make_bread, monkeypatch):
    import importlib.util

    from bread_sync import demo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ag_ui" else real(name, *a))
    config = demo.config()
    assert [plugin.name for plugin in config.plugins if plugin.name == "ag_ui"] == []
    client = create_server(make_bread(config, transport="http-sse")).test_client()
    assert client.get("/agents").status_code == 200
    assert client.post("/ag-ui/run", json=body()).status_code == 404
