"""The A2A endpoints behind the auth plugin, on a real gunicorn gevent server: a context is
continued only by whom ``authorize_context`` allows, ``authorize`` tells the JSON-RPC methods
apart, and ListTasks pages through the caller's tasks without reading everyone's."""

from __future__ import annotations

import httpx
import pytest

from . import servers
from .a2a_fixtures import rpc_body
from .bridges_auth_config import KEYS

CONFIG = "tests.integration.bridges_auth_config:config"
V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    home = tmp_path_factory.mktemp("a2a-auth")
    server = servers.Server("a2a-auth", home, home / "bread.db", env={"BREAD_CONFIG": CONFIG})
    yield server.start()
    server.stop()


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def post(http, server, name, method, params, path="/a2a", headers=None):
    sent = {"Authorization": f"Bearer {KEYS[name]}", **(V1 if path == "/a2a-v1" else {}), **(headers or {})}
    return http.post(server.url + path, json=rpc_body(method, params), headers=sent)


def send(http, server, name, context_id, text="hi"):
    message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": "m", "kind": "message",
               "contextId": context_id}  # fmt: skip
    return post(http, server, name, "message/send", {"message": message}).json()


def list_tasks(http, server, name, **params):
    return post(http, server, name, "ListTasks", params, path="/a2a-v1").json()["result"]


def test_a_context_is_continued_only_by_whom_authorize_context_allows(http, guarded):
    first = send(http, guarded, "alice", "alice-ctx")["result"]
    assert first["contextId"] == "alice-ctx" and first["status"]["state"] == "completed"
    refused = send(http, guarded, "bob", "alice-ctx", "mine now")
    assert refused["error"]["code"] == -32602 and "alice-ctx" in refused["error"]["message"]
    v1 = {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}], "messageId": "m", "contextId": "alice-ctx"}}
    assert post(http, guarded, "bob", "SendMessage", v1, path="/a2a-v1").json()["error"]["code"] == -32602
    # No run started: the context holds alice's one task.
    assert [t["id"] for t in list_tasks(http, guarded, "alice", contextId="alice-ctx")["tasks"]] == [first["id"]]
    assert send(http, guarded, "bob", "bob-ctx")["result"]["status"]["state"] == "completed"


def test_authorize_tells_the_json_rpc_methods_apart(http, guarded):
    assert send(http, guarded, "reader", "reader-ctx") == {"error": "Forbidden"}  # message/send is no read
    # A read is let through to the method (here: no such task).
    assert post(http, guarded, "reader", "tasks/get", {"id": "run_nobody"}).json()["error"]["code"] == -32001
    spoof = post(http, guarded, "reader", "message/send", {"message": {}}, path="/a2a?method=tasks/get")
    assert (spoof.status_code, spoof.json()) == (403, {"error": "Forbidden"})
    garbage = http.post(guarded.url + "/a2a", content=b"{oops", headers={"Authorization": f"Bearer {KEYS['alice']}"})
    assert garbage.status_code == 200 and garbage.json()["error"]["code"] == -32700


def test_list_tasks_pages_through_the_callers_tasks_asking_for_few_others(http, guarded):
    for n in range(12):  # bob's first: the last updated come first, so alice's page is read before them
        send(http, guarded, "bob", f"bob-list-{n}")
    mine = [send(http, guarded, "alice", f"alice-list-{n}")["result"]["id"] for n in range(3)]
    asked = hook_calls(guarded)
    page = list_tasks(http, guarded, "alice", pageSize=1)
    assert [t["id"] for t in page["tasks"]] == [mine[-1]] and page["nextPageToken"]
    assert hook_calls(guarded) - asked == 2  # the page's task, and the one that says there is another
    seen, token = [], ""
    for _ in range(10):
        page = list_tasks(http, guarded, "alice", pageSize=2, pageToken=token)
        seen += page["tasks"]
        token = page["nextPageToken"]
        assert page["totalSize"] <= len(seen) + 1  # alice's tasks only, never bob's 12
        if not token:
            break
    assert set(mine) <= {t["id"] for t in seen} and all(t["contextId"].startswith("alice-") for t in seen)
    assert page["totalSize"] == len(seen)


def hook_calls(server) -> int:
    """How many times the server asked ``authorize_run`` about alice (the config logs each)."""
    return server.log_path.read_text().count("authorize_run alice")
