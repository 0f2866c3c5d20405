"""A2A push notifications on a real gunicorn gevent server with two workers (each runs a
sender), to a webhook of the test's own on 127.0.0.1: every status and artifact update of the
task, in order, once; a failing webhook retried with backoff; deliveries that survive a restart;
the config methods of both versions (v1.0 through the a2a-sdk client); a private webhook refused
where the mount does not allow it; at most ten subscriptions per task; a webhook that never
answers holding up no other task's deliveries."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)

from ..waiting import wait_for
from . import servers
from .a2a_fixtures import DELIVERY_SECONDS, Webhook, rpc_body, strict_v03, strict_v10, v03_ended, v10_ended

CONFIG = "tests.integration.a2a_config:config"


@pytest.fixture(scope="module")
def pushing(tmp_path_factory):
    home = tmp_path_factory.mktemp("a2a-push")
    server = servers.Server("a2a-push", home, home / "bread.db", "http-sse", workers=2, env={"BREAD_CONFIG": CONFIG})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def hook():
    webhook = Webhook()
    yield webhook
    webhook.close()


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def message(text, **fields):
    return {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex, "kind": "message",
            **fields}  # fmt: skip


def call(http, server, path, method, params, headers=None):
    return http.post(server.url + path, json=rpc_body(method, params), headers=headers or {}).json()


def subscribe_v03(http, server, task_id, url, **config):
    return call(http, server, "/a2a/push", "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "pushNotificationConfig": {"url": url, **config}})  # fmt: skip


def started(http, server, path, text, headers=None, method="message/stream", **params):
    """A task started by a stream read to its first frame (the Task), then left to run."""
    body = rpc_body(method, {"message": message(text) if "v1" not in path else {
        "role": "ROLE_USER", "parts": [{"text": text}], "messageId": uuid.uuid4().hex}, **params})  # fmt: skip
    with http.stream("POST", server.url + path, json=body, headers=headers or {}) as live:
        first = json.loads(next(line for line in live.iter_lines() if line.startswith("data: "))[6:])["result"]
    return first.get("task", first)


def test_every_update_of_a_task_reaches_the_webhook_in_order_once(http, pushing, hook):
    task = started(http, pushing, "/a2a/push", "8")
    answer = subscribe_v03(http, pushing, task["id"], hook.url, token="secret-token", id="cfg-1")
    assert answer["result"] == {"taskId": task["id"], "pushNotificationConfig": {
        "id": "cfg-1", "url": hook.url, "token": "secret-token"}}  # fmt: skip
    bodies = hook.wait_for_end(task["id"], v03_ended)
    items = [strict_v03(body) for body in bodies]
    assert [i.kind for i in items] == [*["artifact-update"] * (len(items) - 1), "status-update"]
    assert "".join(i.artifact.parts[0].root.text for i in items[:-1]) == "".join(f"tick {n} " for n in range(1, 9))
    assert items[-1].status.state.value == "completed" and items[-1].final
    time.sleep(1.0)  # a duplicate would be here by now: both workers' senders poll every 0.2 s
    assert hook.bodies_for(task["id"]) == bodies
    assert all(headers["X-A2A-Notification-Token"] == "secret-token" for _, headers in hook.received)


def test_a_failing_webhook_is_retried_with_backoff_until_it_takes_them(http, pushing, hook):
    hook.fail = 3
    task = started(http, pushing, "/a2a/push", "3")
    subscribe_v03(http, pushing, task["id"], hook.url)
    started_at = time.monotonic()
    bodies = hook.wait_for_end(task["id"], v03_ended)
    # 0.5 s, then 1 s, then 2 s between the attempts: the backoff doubles.
    assert hook.refused == 3 and time.monotonic() - started_at >= 3.0
    assert [strict_v03(b).kind for b in bodies] == ["artifact-update", "status-update"]


def test_deliveries_survive_a_restart(http, pushing, hook):
    hook.fail = 10**6  # nothing gets through while the server restarts
    task = started(http, pushing, "/a2a/push", "2")
    subscribe_v03(http, pushing, task["id"], hook.url)
    wait_for(lambda: hook.refused, DELIVERY_SECONDS, "a delivery refused")
    pushing.restart()
    hook.fail = 0
    bodies = hook.wait_for_end(task["id"], v03_ended, seconds=DELIVERY_SECONDS + 30)  # backoff may be at 16 s
    assert [strict_v03(b).kind for b in bodies] == ["artifact-update", "status-update"]


def test_the_v03_config_methods(http, pushing, hook):
    task = started(http, pushing, "/a2a/push", "1")
    subscribe_v03(http, pushing, task["id"], hook.url, id="a")
    bearer = {"schemes": ["Bearer"], "credentials": "xyz"}
    subscribe_v03(http, pushing, task["id"], hook.url + "?b", id="b", authentication=bearer)
    got = call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/get",
               {"id": task["id"], "pushNotificationConfigId": "b"})["result"]  # fmt: skip
    assert got["pushNotificationConfig"]["authentication"] == {"schemes": ["Bearer"], "credentials": "xyz"}
    listed = call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/list", {"id": task["id"]})["result"]
    assert [c["pushNotificationConfig"]["id"] for c in listed] == ["a", "b"]
    deleted = call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/delete",
                   {"id": task["id"], "pushNotificationConfigId": "a"})  # fmt: skip
    assert deleted["result"] is None
    again = call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/delete",
                 {"id": task["id"], "pushNotificationConfigId": "a"})  # fmt: skip
    assert again["error"]["code"] == -32001
    assert subscribe_v03(http, pushing, "run_nope", hook.url)["error"]["code"] == -32001
    assert subscribe_v03(http, pushing, task["id"], "ftp://x/y")["error"]["code"] == -32602
    assert hook.wait_for_end(task["id"], v03_ended)
    # "a" and "b" deliver on their own time: the end that came may be a's alone.
    wait_for(lambda: any(h.get("Authorization") == "Bearer xyz" for _, h in hook.received), DELIVERY_SECONDS,
             "b's delivery, with its token")  # fmt: skip


def test_a_private_webhook_is_refused_unless_the_mount_allows_it(http, pushing, hook):
    card = http.get(pushing.url + "/.well-known/agent-card-slow.json").json()
    assert card["capabilities"]["pushNotifications"] is True  # the demo's mount takes pushes
    task = started(http, pushing, "/a2a/slow", "1")
    for url in (hook.url, "http://localhost:9/x", "http://10.0.0.1/x", "http://[::1]:9/x", "http://169.254.169.254/"):
        answer = call(http, pushing, "/a2a/slow", "tasks/pushNotificationConfig/set",
                      {"taskId": task["id"], "pushNotificationConfig": {"url": url}})  # fmt: skip
        assert answer["error"]["code"] == -32602, url
    no_push = call(http, pushing, "/a2a/writer", "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert no_push["error"]["code"] == -32003  # a mount without push notifications


def test_v10_with_the_sdk_client_configs_and_a_push_named_at_send(pushing, hook):
    # The extra config lives for a moment, during which a sender may deliver to it: to another
    # webhook, so that what the config named at send receives is the task's whole, once.
    spare = Webhook()

    def request(text):
        message_ = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
        configuration = SendMessageConfiguration(task_push_notification_config=TaskPushNotificationConfig(
            url=hook.url, token="t1"))  # fmt: skip
        return SendMessageRequest(message=message_, configuration=configuration)

    async def go():
        card = "/.well-known/agent-card-push-v1.json"
        async with await create_client(pushing.url, ClientConfig(streaming=True), relative_card_path=card) as client:
            events = [event async for event in client.send_message(request("4"))]
            task_id = events[0].task.id
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, id="extra", url=spare.url)
            )
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="extra")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="extra")
            )
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            return task_id, made, got, listed, after

    try:
        task_id, made, got, listed, after = asyncio.run(asyncio.wait_for(go(), 30))
    finally:
        spare.close()
    assert made.id == got.id == "extra" and got.url == spare.url
    assert len(listed.configs) == 2 and [c.url for c in after.configs] == [hook.url]
    bodies = hook.wait_for_end(task_id, v10_ended)
    items = [strict_v10(body) for body in bodies]
    assert [i.WhichOneof("payload") for i in items][-1] == "status_update"
    chunks = [p.text for i in items if i.HasField("artifact_update") for p in i.artifact_update.artifact.parts]
    assert "".join(chunks) == "tick 1 tick 2 tick 3 tick 4 "


def test_v03_config_methods_with_the_sdk_client(http, pushing, hook):
    task = started(http, pushing, "/a2a/push", "2")

    async def go():
        card = "/.well-known/agent-card-push.json"  # a v0.3 card: the SDK's compat transport
        async with await create_client(pushing.url, ClientConfig(streaming=True), relative_card_path=card) as client:
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task["id"], id="sdk", url=hook.url, token="t3")
            )
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task["id"], id="sdk")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task["id"])
            )
            return made, got, listed

    made, got, listed = asyncio.run(asyncio.wait_for(go(), 30))
    assert made.id == got.id == "sdk" and got.url == hook.url and got.token == "t3"
    assert [c.id for c in listed.configs] == ["sdk"]
    bodies = hook.wait_for_end(task["id"], v03_ended)
    assert [strict_v03(b).kind for b in bodies] == ["artifact-update", "status-update"]


def test_a_task_takes_ten_subscriptions_at_most(http, pushing, hook):
    task = started(http, pushing, "/a2a/push", "1")
    for n in range(10):
        assert "result" in subscribe_v03(http, pushing, task["id"], f"{hook.url}?{n}", id=f"c{n}")
    refused = subscribe_v03(http, pushing, task["id"], hook.url, id="c10")
    assert refused["error"]["code"] == -32602 and "push notification configs" in refused["error"]["message"]
    assert "result" in subscribe_v03(http, pushing, task["id"], f"{hook.url}?again", id="c3")  # a set again
    listed = call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/list", {"id": task["id"]})["result"]
    assert len(listed) == 10


class Silent:
    """A webhook that takes every connection and never answers."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._hold, daemon=True).start()

    def _hold(self):
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:  # closed
                return

    def close(self):
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.listener.close()
        for held in self.held:
            held.close()


def ended(http, server, task_id):
    def completed():
        return call(http, server, "/a2a/push", "tasks/get", {"id": task_id})["result"]["status"]["state"] == "completed"

    wait_for(completed, DELIVERY_SECONDS, f"task {task_id} to end")


def test_a_webhook_that_never_answers_holds_up_no_other_tasks_deliveries(http, pushing, hook):
    silent = Silent()
    stalled = started(http, pushing, "/a2a/push", "2")
    task = started(http, pushing, "/a2a/push", "1")
    try:
        for n in range(10):
            subscribe_v03(http, pushing, stalled["id"], f"{silent.url}?{n}", id=f"s{n}")
        wait_for(lambda: len(silent.held) >= 2, DELIVERY_SECONDS, "both workers' senders to wait on it")
        ended(http, pushing, task["id"])
        subscribed = time.monotonic()
        subscribe_v03(http, pushing, task["id"], hook.url)
        wait_for(lambda: hook.bodies_for(task["id"]), DELIVERY_SECONDS, f"task {task['id']}'s delivery")
        # Due at once, it goes out within a turn of a sender (0.2 s); before, behind 10 s POSTs.
        assert time.monotonic() - subscribed < 3.0
    finally:
        for n in range(10):
            call(http, pushing, "/a2a/push", "tasks/pushNotificationConfig/delete",
                 {"id": stalled["id"], "pushNotificationConfigId": f"s{n}"})  # fmt: skip
        silent.close()
