"""Issue 33: the A2A endpoints as the v0.3 and v1.0 specifications read them, in raw HTTP on a
real gunicorn gevent server with two workers (the official client's side is test_a2a_sdk.py)."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import httpx
import pytest
from a2a import types as t1

from .a2a_fixtures import Webhook, rpc_body, sse_frames, strict_v03, strict_v10, v03_ended

V1 = {"A2A-Version": "1.0"}
TEXT = {"role": "user", "parts": [{"kind": "text", "text": "hello spec"}], "messageId": "m1", "kind": "message"}
TEXT_V1 = {"role": "ROLE_USER", "parts": [{"text": "hello spec"}], "messageId": "m1"}


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def post(http, server, path, method, params, headers=None):
    answer = http.post(server.url + path, json=rpc_body(method, params), headers=headers or {})
    assert answer.status_code == 200, answer.text
    return answer.json()


def error_body(answer):
    """An error answer's body: JSON, or a v0.3 stream's one event (item 5)."""
    if answer.headers["content-type"].startswith("text/event-stream"):
        ((_, event, _),) = sse_frames(answer.text)
        return event
    return answer.json()


def error_info(reason):
    return {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org",
            "metadata": {}}  # fmt: skip


# -- item 3: v1.0 errors carry google.rpc.ErrorInfo ------------------------------------------


@pytest.mark.parametrize(
    ("path", "method", "params", "headers", "reason"),
    [
        ("/a2a-v1", "GetTask", {"id": "run_unknown"}, V1, "TASK_NOT_FOUND"),
        ("/a2a-v1", "GetTask", {}, V1, "INVALID_PARAMS"),
        ("/a2a-v1", "Nope", {}, V1, "METHOD_NOT_FOUND"),
        ("/a2a-v1", "GetExtendedAgentCard", {}, V1, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
        ("/a2a-v1", "GetTask", {"id": "x"}, {}, "VERSION_NOT_SUPPORTED"),
        ("/a2a/writer-v1", "CreateTaskPushNotificationConfig", {"taskId": "x", "url": "https://example.com/h"}, V1,
         "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    ],
)  # fmt: skip
def test_a_v10_error_carries_its_error_info(http, a2a, path, method, params, headers, reason):
    error = post(http, a2a, path, method, params, headers)["error"]
    assert error["data"] == [error_info(reason)], error


def test_a_v10_parse_error_carries_its_error_info_and_v03_errors_none(http, a2a):
    raw = http.post(a2a.url + "/a2a-v1", content=b"{not json", headers={"Content-Type": "application/json", **V1})
    assert raw.json()["error"]["data"] == [error_info("PARSE_ERROR")]
    assert "data" not in post(http, a2a, "/a2a", "tasks/get", {"id": "run_unknown"})["error"]


# -- item 4: agent cards are cacheable -------------------------------------------------------


@pytest.mark.parametrize("card", ["/.well-known/agent-card.json", "/.well-known/agent-card-v1.json"])
def test_a_card_is_cacheable_with_a_strong_etag_and_304(http, a2a, card):
    first = http.get(a2a.url + card)
    assert first.status_code == 200 and first.headers["Cache-Control"] == "max-age=300"
    etag = first.headers["ETag"]
    assert etag == f'"{hashlib.sha256(first.content).hexdigest()}"'  # strong: no W/
    again = http.get(a2a.url + card)  # the other worker, maybe: the same bytes, the same tag
    assert again.headers["ETag"] == etag and again.content == first.content
    for matching in (etag, f'"other", {etag}', "*"):
        cached = http.get(a2a.url + card, headers={"If-None-Match": matching})
        assert cached.status_code == 304 and cached.content == b"" and cached.headers["ETag"] == etag, matching
    assert http.get(a2a.url + card, headers={"If-None-Match": '"other"'}).status_code == 200


# -- item 6: invalid messages are refused, and nothing runs ------------------------------------


def runs_of(http, server, agent):
    return {r["id"] for r in http.get(server.url + "/runs", params={"agent": agent}).json()}


@pytest.mark.parametrize(
    ("path", "method", "message", "headers"),
    [
        ("/a2a", "message/send", {**TEXT, "parts": [{"text": "no kind"}]}, {}),
        ("/a2a", "message/stream", {**TEXT, "parts": [{"kind": "text", "text": "a"}, {"text": "no kind"}]}, {}),
        ("/a2a", "message/send", {**TEXT, "parts": [{"kind": "video", "text": "unknown kind"}]}, {}),
        ("/a2a-v1", "SendMessage", {"role": "ROLE_USER", "parts": [{"text": "no messageId"}]}, V1),
        ("/a2a-v1", "SendStreamingMessage", {"messageId": "m", "parts": [{"text": "no role"}]}, V1),
        ("/a2a-v1", "SendMessage", {**TEXT_V1, "role": "ROLE_UNSPECIFIED"}, V1),
    ],
)  # fmt: skip
def test_an_invalid_message_is_invalid_params_and_starts_no_run(http, a2a, path, method, message, headers):
    before = runs_of(http, a2a, "echo")
    answer = http.post(a2a.url + path, json=rpc_body(method, {"message": message}), headers=headers)
    assert answer.status_code == 200 and error_body(answer)["error"]["code"] == -32602, answer.text
    assert runs_of(http, a2a, "echo") == before


# -- item 7: v1.0 push configs -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hook():
    webhook = Webhook()
    yield webhook
    webhook.close()


def test_v10_push_configs_take_the_task_id_alike_list_as_get_writes_and_delete_twice(http, a2a, hook):
    path = "/a2a/push-v1"
    task = post(http, a2a, path, "SendMessage", {"message": {**TEXT_V1, "parts": [{"text": "1"}]}}, V1)
    task_id = task["result"]["task"]["id"]
    made = post(http, a2a, path, "CreateTaskPushNotificationConfig", {"task_id": task_id, "id": "a", "url": hook.url},
                V1)["result"]  # fmt: skip
    assert made == {"id": "a", "taskId": task_id, "url": hook.url}
    for key in ("taskId", "task_id"):
        assert post(http, a2a, path, "GetTaskPushNotificationConfig", {key: task_id, "id": "a"}, V1)["result"] == made
        listed = post(http, a2a, path, "ListTaskPushNotificationConfigs", {key: task_id}, V1)["result"]
        assert listed == {"configs": [made], "nextPageToken": ""}, key
    for key in ("taskId", "task_id"):  # the second delete of the same config succeeds too
        deleted = post(http, a2a, path, "DeleteTaskPushNotificationConfig", {key: task_id, "id": "a"}, V1)
        assert deleted == {"jsonrpc": "2.0", "id": 1, "result": None}, deleted
    assert post(http, a2a, path, "ListTaskPushNotificationConfigs", {"taskId": task_id}, V1)["result"]["configs"] == []
    unknown = post(http, a2a, path, "DeleteTaskPushNotificationConfig", {"taskId": "run_nope", "id": "a"}, V1)
    assert unknown["error"]["code"] == -32001
    assert post(http, a2a, path, "GetTaskPushNotificationConfig", {"id": "a"}, V1)["error"]["code"] == -32602


# -- item 5: v0.3 stream errors are an SSE stream of one JSON-RPC error event ------------------


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("message/stream", {"message": {**TEXT, "parts": []}}, -32602),
        ("message/stream", {"message": {**TEXT, "taskId": "run_unknown"}}, -32001),
        ("tasks/resubscribe", {"id": "run_unknown"}, -32001),
        ("tasks/resubscribe", {}, -32602),
    ],
)
def test_a_v03_stream_refused_at_once_is_an_sse_stream_of_its_error(http, a2a, method, params, code):
    answer = http.post(a2a.url + "/a2a", json=rpc_body(method, params, request_id="s-1"))
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    ((_, event, _),) = sse_frames(answer.text)
    assert event["id"] == "s-1" and event["error"]["code"] == code and set(event) == {"jsonrpc", "id", "error"}


def test_v03_other_methods_and_v10_streams_still_answer_errors_as_json(http, a2a):
    got = http.post(a2a.url + "/a2a", json=rpc_body("tasks/get", {"id": "run_unknown"}))
    assert got.headers["content-type"].startswith("application/json") and got.json()["error"]["code"] == -32001
    v10 = http.post(a2a.url + "/a2a-v1", json=rpc_body("SubscribeToTask", {"id": "run_unknown"}), headers=V1)
    assert v10.headers["content-type"].startswith("application/json") and v10.json()["error"]["code"] == -32001
    envelope = http.post(a2a.url + "/a2a", json={"id": 1, "method": "message/stream"})  # no jsonrpc: not read
    assert envelope.headers["content-type"].startswith("application/json")


# -- item 2: tasks with their artifacts and history, rebuilt from the run's log ----------------


def texts(task):
    return ["".join(p["text"] for p in a["parts"] if "text" in p) for a in task.get("artifacts", [])]


def test_get_task_answers_the_artifacts_and_history_send_answered(http, a2a):
    sent = post(http, a2a, "/a2a", "message/send", {"message": TEXT})["result"]
    got = post(http, a2a, "/a2a", "tasks/get", {"id": sent["id"]})["result"]
    strict_v03(got)
    assert got["artifacts"] == sent["artifacts"] and texts(got) == ["hello spec"]
    assert [(m["role"], m["parts"]) for m in got["history"]] == [("user", [{"kind": "text", "text": "hello spec"}])]
    assert post(http, a2a, "/a2a", "tasks/get", {"id": sent["id"], "historyLength": 0})["result"].get("history") is None
    sent = post(http, a2a, "/a2a-v1", "SendMessage", {"message": TEXT_V1}, V1)["result"]["task"]
    got = post(http, a2a, "/a2a-v1", "GetTask", {"id": sent["id"]}, V1)["result"]
    strict_v10(got, t1.Task)
    assert got["artifacts"] == sent["artifacts"] and got["history"][0]["role"] == "ROLE_USER"
    assert "history" not in post(http, a2a, "/a2a-v1", "GetTask", {"id": sent["id"], "historyLength": 0}, V1)["result"]
    for path, method, headers in (("/a2a", "tasks/get", {}), ("/a2a-v1", "GetTask", V1)):
        task_id = sent["id"] if headers else got["id"]
        refused = post(http, a2a, path, method, {"id": task_id, "historyLength": -1}, headers)
        assert refused["error"]["code"] == -32602, refused


def test_a_paused_and_answered_tasks_history_is_its_messages_in_order_by_history_length(http, a2a):
    paused = post(http, a2a, "/a2a/writer", "message/send", {"message": {**TEXT, "parts": [
        {"kind": "text", "text": "rye"}]}})["result"]  # fmt: skip
    assert paused["status"]["state"] == "input-required"
    got = post(http, a2a, "/a2a/writer", "tasks/get", {"id": paused["id"]})["result"]
    assert [m["role"] for m in got["history"]] == ["user", "agent"]
    assert got["history"][1]["parts"][0]["data"]["checkpointId"] == paused["status"]["message"]["messageId"]
    answer = {**TEXT, "taskId": paused["id"], "contextId": paused["contextId"], "parts": [
        {"kind": "text", "text": "yes"}]}  # fmt: skip
    done = post(http, a2a, "/a2a/writer", "message/send", {"message": answer})["result"]
    assert done["status"]["state"] == "completed"
    got = post(http, a2a, "/a2a/writer", "tasks/get", {"id": paused["id"]})["result"]
    assert [m["role"] for m in got["history"]] == ["user", "agent", "user"]
    assert got["history"][2]["parts"] == [{"kind": "data", "data": {"approved": True}}]
    # Every turn's text: the continuation's send answered its own turn's only.
    assert len(texts(got)) == 2 and texts(got)[1:] == texts(done) and len({m["messageId"] for m in got["history"]}) == 3
    last = post(http, a2a, "/a2a/writer", "tasks/get", {"id": paused["id"], "historyLength": 2})["result"]
    assert last["history"] == got["history"][1:]


def test_a_running_task_is_working_with_its_input_and_list_tasks_includes_outputs_when_asked(http, a2a):
    """A running task's artifacts so far are what its log holds (text at its next durable crumb:
    slow has none before its end; tests/test_a2a.py folds a log cut mid-run)."""
    data = {"count": 400, "delayMs": 20}
    body = rpc_body("SendStreamingMessage", {"message": {**TEXT_V1, "parts": [{"data": data}]}})
    with http.stream("POST", a2a.url + "/a2a/slow-v1", json=body, headers=V1) as streaming:
        first = next(line for line in streaming.iter_lines() if line.startswith("data: "))
        task_id = json.loads(first[6:])["result"]["task"]["id"]
        got = post(http, a2a, "/a2a/slow-v1", "GetTask", {"id": task_id}, V1)["result"]
        assert got["status"]["state"] == "TASK_STATE_WORKING"
        assert [(m["role"], m["parts"]) for m in got["history"]] == [("ROLE_USER", [{"data": data}])]
        listed = post(http, a2a, "/a2a/slow-v1", "ListTasks", {"includeArtifacts": True, "historyLength": 1}, V1)
        mine = next(t for t in listed["result"]["tasks"] if t["id"] == task_id)
        # ListTasks writes every field, the empty ones too (as the SDK's server does).
        assert [(m["messageId"], m["parts"]) for m in mine["history"]] == [(got["history"][0]["messageId"],
                                                                             [{"data": data}])]  # fmt: skip
        assert post(http, a2a, "/a2a/slow-v1", "CancelTask", {"id": task_id}, V1)["result"]
    done = post(http, a2a, "/a2a/slow-v1", "SendMessage", {"message": {**TEXT_V1, "parts": [{"text": "3"}]}}, V1)
    task_id = done["result"]["task"]["id"]
    listed = post(http, a2a, "/a2a/slow-v1", "ListTasks", {"includeArtifacts": True}, V1)["result"]["tasks"]
    assert texts(next(t for t in listed if t["id"] == task_id)) == ["tick 1 tick 2 tick 3 "]
    bare = post(http, a2a, "/a2a/slow-v1", "ListTasks", {"historyLength": 0}, V1)["result"]["tasks"]
    assert all("artifacts" not in t and "history" not in t for t in bare)
    assert post(http, a2a, "/a2a/slow-v1", "ListTasks", {"historyLength": -2}, V1)["error"]["code"] == -32602


# -- item 1: non-blocking sends ------------------------------------------------------------------

#: How long a polled task may take to end.
POLL_SECONDS = 30.0


def poll(http, server, path, method, task_id, headers, ended):
    """Get Task until ``ended(task)``, within POLL_SECONDS."""
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        task = post(http, server, path, method, {"id": task_id}, headers)["result"]
        if ended(task) or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


def slow_v03(text, **configuration):
    return {"message": {**TEXT, "parts": [{"kind": "text", "text": text}]}, "configuration": configuration}


def slow_v1(text, **configuration):
    return {"message": {**TEXT_V1, "parts": [{"text": text}]}, "configuration": configuration}


def test_a_v03_send_not_blocking_answers_working_at_once_and_polls_to_its_artifacts(http, a2a):
    sent = post(http, a2a, "/a2a/slow", "message/send", slow_v03("20", blocking=False))["result"]
    strict_v03(sent)
    assert sent["status"] == {"state": "working"} and "artifacts" not in sent  # blocking, it is completed
    done = poll(http, a2a, "/a2a/slow", "tasks/get", sent["id"], {}, lambda t: t["status"]["state"] != "working")
    assert done["status"]["state"] == "completed", done
    assert texts(done) == ["".join(f"tick {n} " for n in range(1, 21))]
    assert [m["role"] for m in done["history"]] == ["user"]
    blocking = post(http, a2a, "/a2a/slow", "message/send", slow_v03("2", blocking=True))["result"]
    assert blocking["status"]["state"] == "completed"


def test_a_v10_send_returning_immediately_is_working_and_can_be_subscribed_to_or_cancelled(http, a2a):
    sent = post(http, a2a, "/a2a/slow-v1", "SendMessage", slow_v1("5", returnImmediately=True), V1)["result"]["task"]
    assert sent["status"]["state"] == "TASK_STATE_WORKING"
    body = rpc_body("SubscribeToTask", {"id": sent["id"]})
    followed = http.post(a2a.url + "/a2a/slow-v1", json=body, headers=V1)
    items = [data["result"] for _, data, _ in sse_frames(followed.text) if data]
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    long = post(http, a2a, "/a2a/slow-v1", "SendMessage", slow_v1("600", returnImmediately=True), V1)
    task_id = long["result"]["task"]["id"]
    assert post(http, a2a, "/a2a/slow-v1", "CancelTask", {"id": task_id}, V1)["result"]["status"]["state"] == (
        "TASK_STATE_CANCELED")  # fmt: skip
    ended = poll(http, a2a, "/a2a/slow-v1", "GetTask", task_id, V1, lambda t: "WORKING" not in t["status"]["state"])
    assert ended["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_non_blocking_send_whose_client_leaves_at_once_completes_and_get_task_has_its_outputs(http, a2a):
    context = f"ctx-leaves-{time.monotonic_ns()}"
    params = {"message": {**TEXT_V1, "parts": [{"text": "10"}], "contextId": context},
              "configuration": {"returnImmediately": True}}  # fmt: skip
    payload = json.dumps(rpc_body("SendMessage", params)).encode()
    head = (f"POST /a2a/slow-v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()  # fmt: skip
    with socket.create_connection(("127.0.0.1", int(a2a.url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(head + payload)  # and gone, reading nothing
    deadline, listed = time.monotonic() + POLL_SECONDS, []
    while not listed and time.monotonic() < deadline:
        listed = post(http, a2a, "/a2a/slow-v1", "ListTasks", {"contextId": context}, V1)["result"]["tasks"]
    (task,) = listed
    done = poll(http, a2a, "/a2a/slow-v1", "GetTask", task["id"], V1, lambda t: "WORKING" not in t["status"]["state"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(done) == ["".join(f"tick {n} " for n in range(1, 11))]
    # The input as the run took it: slow's input model read the text as its object.
    given = [{"data": {"count": 10, "delayMs": 100}}]
    assert [(m["role"], m["parts"]) for m in done["history"]] == [("ROLE_USER", given)]


def test_a_non_blocking_send_naming_a_push_config_delivers_to_its_end(http, a2a, hook):
    params = slow_v03("3", blocking=False, pushNotificationConfig={"url": hook.url})
    sent = post(http, a2a, "/a2a/push", "message/send", params)["result"]
    assert sent["status"] == {"state": "working"}
    bodies = hook.wait_for_end(sent["id"], v03_ended)
    assert "".join(b["artifact"]["parts"][0]["text"] for b in bodies if b["kind"] == "artifact-update") == (
        "tick 1 tick 2 tick 3 ")  # fmt: skip
