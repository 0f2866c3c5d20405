"""A2A tasks across replicas: two gunicorn gevent servers on one SQLite file and one Redis (the
fan-out), as behind a load balancer. A task started on one is read, resubscribed to, cancelled
and resumed from the other; a resubscribe after a dropped connection loses nothing; a paused
task resumes after its server restarted."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from . import servers
from .a2a_fixtures import Webhook, rpc_body, sse_frames, strict_v03, v03_ended

CONFIG = "tests.integration.a2a_config:config"
#: How long a cancelled task may take to end its stream on the replica that runs it.
CANCEL_SECONDS = 5.0


@pytest.fixture(scope="module")
def pair(tmp_path_factory, redis_url):
    home = tmp_path_factory.mktemp("a2a-replicas")
    env = {"REDIS_URL": redis_url, "BREAD_CONFIG": CONFIG}
    group = [servers.Server(f"a2a-{name}", home, home / "shared.db", "http-sse", env=env) for name in "ab"]
    group[0].start()  # the first creates the SQLite file
    group[1].start()
    yield group
    for server in group:
        server.stop()


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def message(text, task_id=None):
    return {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex,
            "kind": "message", **({"taskId": task_id} if task_id else {})}  # fmt: skip


def call(http, server, path, method, params):
    return http.post(server.url + path, json=rpc_body(method, params)).json()


def opened(http, server, path, text):
    """A stream started on ``server``, its first frame (the Task) read; the open response."""
    response = http.send(http.build_request("POST", server.url + path, json=rpc_body(
        "message/stream", {"message": message(text)})), stream=True)  # fmt: skip
    lines = response.iter_lines()
    task = json.loads(next(line for line in lines if line.startswith("data: "))[6:])["result"]
    return response, lines, task


def items_of(text):
    return [strict_v03(data["result"]) for _, data, _ in sse_frames(text) if data is not None]


def text_of(items):
    return "".join(i.artifact.parts[0].root.text for i in items if i.kind == "artifact-update")


def test_a_dropped_stream_resubscribed_on_the_other_replica_loses_nothing(http, pair):
    a, b = pair
    response, lines, task = opened(http, a, "/a2a/slow", "20")
    next(line for line in lines if line.startswith("data: "))  # a tick: the task runs
    response.close()  # the connection drops; the run goes on
    assert call(http, b, "/a2a/slow", "tasks/get", {"id": task["id"]})["result"]["status"]["state"] == "working"
    answer = http.post(b.url + "/a2a/slow", json=rpc_body("tasks/resubscribe", {"id": task["id"]}))
    assert answer.text.startswith(": connected\n\n")
    items = items_of(answer.text)
    assert items[0].kind == "task" and items[0].id == task["id"] and items[0].context_id == task["contextId"]
    assert text_of(items) == "".join(f"tick {n} " for n in range(1, 21))
    assert items[-1].status.state.value == "completed" and items[-1].final
    assert call(http, a, "/a2a/slow", "tasks/get", {"id": task["id"]})["result"]["status"]["state"] == "completed"


def test_a_task_running_on_one_replica_is_cancelled_from_the_other(http, pair):
    a, b = pair
    response, lines, task = opened(http, a, "/a2a/slow", "200")
    try:
        next(line for line in lines if line.startswith("data: "))
        cancelled = call(http, b, "/a2a/slow", "tasks/cancel", {"id": task["id"]})["result"]
        assert strict_v03(cancelled).status.state.value == "canceled"
        started = time.monotonic()
        rest = [line for line in lines if line.startswith("data: ")]
        assert time.monotonic() - started < CANCEL_SECONDS
    finally:
        response.close()
    last = strict_v03(json.loads(rest[-1][6:])["result"])
    assert last.kind == "status-update" and last.final and last.status.state.value == "canceled"
    assert len(rest) < 150  # it stopped well before its 200 ticks
    assert call(http, b, "/a2a/slow", "tasks/get", {"id": task["id"]})["result"]["status"]["state"] == "canceled"


def test_a_pause_on_one_replica_is_resumed_on_the_other(http, pair):
    a, b = pair
    paused = call(http, a, "/a2a/writer", "message/send", {"message": message("oats")})["result"]
    assert paused["status"]["state"] == "input-required"
    done = call(http, b, "/a2a/writer", "message/send", {"message": message("yes", paused["id"])})["result"]
    assert done["status"]["state"] == "completed" and done["id"] == paused["id"]
    assert [p["text"] for art in done["artifacts"] for p in art["parts"]] == ["Published."]


def test_a_pause_survives_its_servers_restart(http, pair):
    a, _ = pair
    paused = call(http, a, "/a2a/interviewer", "message/send", {"message": message("hello")})["result"]
    assert paused["status"]["state"] == "input-required"
    a.restart()
    got = call(http, a, "/a2a/interviewer", "tasks/get", {"id": paused["id"]})["result"]
    assert got["status"]["state"] == "input-required"
    answer = http.post(a.url + "/a2a/interviewer", json=rpc_body("message/stream", {
        "message": message("Cy", paused["id"])}))  # fmt: skip
    items = items_of(answer.text)
    assert text_of(items) == "Thanks, Cy." and items[-1].status.state.value == "completed"


def test_pushes_are_claimed_once_across_replicas(http, pair):
    a, b = pair
    hook = Webhook()
    try:
        response, lines, task = opened(http, a, "/a2a/push", "6")
        subscribed = call(http, b, "/a2a/push", "tasks/pushNotificationConfig/set",
                          {"taskId": task["id"], "pushNotificationConfig": {"url": hook.url}})  # fmt: skip
        assert subscribed["result"]["taskId"] == task["id"]
        response.close()
        bodies = hook.wait_for_end(task["id"], v03_ended)
        time.sleep(1.0)  # a second delivery would be here by now: each replica's sender polls every 0.2 s
        assert hook.bodies_for(task["id"]) == bodies
        assert [strict_v03(body).kind for body in bodies] == ["artifact-update", "status-update"]
    finally:
        hook.close()
