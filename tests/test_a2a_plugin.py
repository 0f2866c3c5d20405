"""The a2a_server() plugin in process: its actions under auth, the run-ownership hook, the
card's URL, ListTasks' pages, a busy session, a run that fails once its stream started, and the
push sender on the memory store."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bread_sync.agents import Agent
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.protocols.a2a import A2A_ACTIONS, a2a_server
from bread_sync.protocols.a2a.push import A2APushes, sender_of
from bread_sync.server import auth_plugin, create_server

KEY = "k" * 40
HEADERS = {"Authorization": f"Bearer {KEY}"}
V1 = {"A2A-Version": "1.0"}


def failing(convo):
    raise RuntimeError("secret detail /srv/path")


BROKEN = Agent(id="broken", model=script.provider([failing]))


def serve(make_bread, *plugins, **server):
    config = demo_config()
    config = config.model_copy(update={"plugins": list(plugins), "agents": [*config.agents, BROKEN]})
    bread = make_bread(config, transport="http-sse", server=server)
    return bread, create_server(bread).test_client()


def rpc(method, params, request_id=1):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def message(text, **fields):
    return {"message": {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": "m", "kind": "message",
                        **fields}}  # fmt: skip


def test_with_auth_the_card_and_the_rpc_route_are_their_actions_and_tasks_pass_the_ownership_hook(make_bread):
    asked, refused = [], set()

    def authorize(identity, action, args):
        asked.append(action)
        return True

    plugins = (auth_plugin(api_keys={"alice": KEY}, env_var=None), a2a_server("echo"))
    _, client = serve(make_bread, *plugins, authorize=authorize,
                      authorize_run=lambda identity, run_id: run_id not in refused)  # fmt: skip
    assert client.get("/.well-known/agent-card.json").status_code == 401  # the card is gated too
    assert client.get("/.well-known/agent-card.json", headers=HEADERS).status_code == 200
    task = client.post("/a2a", json=rpc("message/send", message("hi")), headers=HEADERS).get_json()["result"]
    assert asked == [A2A_ACTIONS.card, A2A_ACTIONS.rpc]
    refused.add(task["id"])
    denied = client.post("/a2a", json=rpc("tasks/get", {"id": task["id"]}), headers=HEADERS)
    assert denied.status_code == 403 and denied.get_json() == {"error": "Forbidden"}


def test_the_card_names_the_configured_url_or_the_requests_own(make_bread):
    _, client = serve(make_bread, a2a_server("echo", url="https://agents.example.com/a2a"),
                      a2a_server("echo", card_path="/card-v1.json", rpc_path="/x/rpc", spec_version="1.0"))  # fmt: skip
    assert client.get("/.well-known/agent-card.json").get_json()["url"] == "https://agents.example.com/a2a"
    interfaces = client.get("/card-v1.json", base_url="http://localhost:8080").get_json()["supportedInterfaces"]
    assert interfaces == [{"url": "http://localhost:8080/x/rpc", "protocolBinding": "JSONRPC",
                           "protocolVersion": "1.0"}]  # fmt: skip


def test_the_cards_max_age_is_the_mounts_option(make_bread):
    _, client = serve(make_bread, a2a_server("echo", card_max_age=60),
                      a2a_server("echo", card_path="/card-v1.json", rpc_path="/v1", spec_version="1.0"))  # fmt: skip
    assert client.get("/.well-known/agent-card.json").headers["Cache-Control"] == "max-age=60"
    assert client.get("/card-v1.json").headers["Cache-Control"] == "max-age=300"
    for wrong in (-1, 1.5, True):
        with pytest.raises(ValueError, match="card_max_age"):
            a2a_server("echo", card_max_age=wrong)


def test_list_tasks_pages_through_this_agents_tasks_only(make_bread):
    _, client = serve(make_bread, a2a_server("echo", rpc_path="/v1", spec_version="1.0"),
                      a2a_server("slow", rpc_path="/slow", card_path="/slow.json"))  # fmt: skip
    v1_message = {"role": "ROLE_USER", "parts": [{"text": "x"}], "messageId": "m", "contextId": "ctx-pages"}
    made = [client.post("/v1", json=rpc("SendMessage", {"message": v1_message}), headers=V1).get_json()["result"]
            for _ in range(5)]  # fmt: skip
    client.post("/slow", json=rpc("message/send", message("1", contextId="ctx-pages")))  # another agent's
    seen, token = [], ""
    for _ in range(5):
        page = client.post("/v1", json=rpc("ListTasks", {"contextId": "ctx-pages", "pageSize": 2, "pageToken": token}),
                           headers=V1).get_json()["result"]  # fmt: skip
        seen += [task["id"] for task in page["tasks"]]
        token = page["nextPageToken"]
        # The tasks so far, and one more while there is a next page.
        assert page["totalSize"] == len(seen) + (1 if token else 0) and page["pageSize"] == 2
        if not token:
            break
    assert sorted(seen) == sorted(task["task"]["id"] for task in made) and len(seen) == 5
    bad = client.post("/v1", json=rpc("ListTasks", {"pageToken": "abc"}), headers=V1).get_json()
    assert bad["error"]["code"] == -32602


def test_a_busy_session_is_an_internal_error_that_names_its_code(make_bread):
    _, client = serve(make_bread, a2a_server("slow"))
    running = client.post("/a2a", json=rpc("message/stream", message("100", contextId="ctx-busy")), buffered=False)
    task_id = running.headers["Bread-Run-Id"]
    try:
        busy = client.post("/a2a", json=rpc("message/send", message("1", contextId="ctx-busy"))).get_json()
        assert busy["error"]["code"] == -32603 and busy["error"]["message"].startswith("SESSION_BUSY:")
    finally:
        cancelled = client.post("/a2a", json=rpc("tasks/cancel", {"id": task_id})).get_json()
        running.close()
    assert cancelled["result"]["status"]["state"] == "canceled"


def test_a_run_that_fails_mid_stream_ends_it_failed_without_its_details(make_bread):
    _, client = serve(make_bread, a2a_server("broken"))
    text = client.post("/a2a", json=rpc("message/stream", message("go"))).get_data(as_text=True)
    last = json.loads(text.strip().split("\n\n")[-1].split("data: ", 1)[1])["result"]
    assert last["kind"] == "status-update" and last["final"] and last["status"]["state"] == "failed"
    data = last["status"]["message"]["parts"][1]["data"]
    assert data == {"code": "INTERNAL", "message": "internal error: the server's log has the details"}
    assert "secret" not in text and "/srv/path" not in text


class Hook:
    def __init__(self):
        self.bodies = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's spelling
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_the_push_sender_delivers_from_the_memory_store(make_bread):
    mount = a2a_server("echo", push_notifications=True, allow_private_webhooks=True)
    bread, client = serve(make_bread, mount)
    hook = Hook()
    try:
        params = {**message("push me"), "configuration": {"pushNotificationConfig": {"url": hook.url}}}
        sent = client.post("/a2a", json=rpc("message/send", params)).get_json()["result"]
        sender = sender_of(bread)
        sender.mounts[mount.rpc_path] = A2APushes(mount)  # as start() does, without the thread: stepped by hand
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (hook.bodies and hook.bodies[-1].get("kind") == "status-update"):
            sender.step()
        assert [b["kind"] for b in hook.bodies] == ["artifact-update", "status-update"]
        assert hook.bodies[0]["artifact"]["parts"] == [{"kind": "text", "text": "push me"}]
        (config,) = bread.store.list_push_configs(sent["id"])
        assert config["delivered"] == 2 and config["done"] is True and sender.step() is False
    finally:
        hook.server.shutdown()
        hook.server.server_close()
