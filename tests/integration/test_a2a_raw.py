"""The A2A endpoints' raw wire on a real gunicorn gevent server with two workers, checked
strictly (the SDK client is lenient: it ignores unknown fields and unknown enum values): every
result and stream item against the a2a-sdk's types, every error code, inline bytes under and
over the limits, a resubscribe's replay."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from a2a import types as t1
from a2a.server.tasks.task_manager import append_artifact_to_task

from .a2a_config import PAINTER_TEXT
from .a2a_fixtures import position, rpc_body, sse_frames, strict_v03, strict_v10
from .tcp_proxy import TCPProxy

V1 = {"A2A-Version": "1.0"}
TEXT = {"role": "user", "parts": [{"kind": "text", "text": "hello raw world"}], "messageId": "m1", "kind": "message"}
TEXT_V1 = {"role": "ROLE_USER", "parts": [{"text": "hello raw world"}], "messageId": "m1"}


def message(*parts, **fields):
    return {"role": "user", "parts": list(parts), "messageId": "m", "kind": "message", **fields}


def message_v1(*parts, **fields):
    return {"role": "ROLE_USER", "parts": list(parts), "messageId": "m", **fields}


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def call(http, server, path, method, params, headers=None, **kw):
    answer = http.post(server.url + path, json=rpc_body(method, params), headers=headers or {}, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


def stream(http, server, path, method, params, headers=None):
    answer = http.post(server.url + path, json=rpc_body(method, params), headers=headers or {})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    return sse_frames(answer.text)


def error_of(answer, request_id=1):
    """The code of an error answer; a v1.0 one carries its ErrorInfo (checked in test_a2a_spec)."""
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["id"] == request_id, answer
    assert set(answer["error"]) - {"data"} == {"code", "message"} and answer["error"]["message"]
    return answer["error"]["code"]


def stream_error(answer):
    """A v0.3 streaming method's error: an SSE stream of that one event (test_a2a_spec.py)."""
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream"), answer.text
    ((_, event, _),) = sse_frames(answer.text)
    return event


def test_a_v03_stream_is_strict_v03(http, a2a):
    frames = stream(http, a2a, "/a2a", "message/stream", {"message": TEXT})
    items = [data["result"] for _, data, _ in frames]
    assert all(data["jsonrpc"] == "2.0" and data["id"] == 1 for _, data, _ in frames)
    models = [strict_v03(item) for item in items]
    assert [m.kind for m in models] == ["task", *["artifact-update"] * (len(items) - 2), "status-update"]
    assert [item.get("final") for item in items[1:]] == [None] * (len(items) - 2) + [True]
    assert items[-1]["status"] == {"state": "completed"} and frames[-1][0] is not None
    assert [item["append"] for item in items[1:-1]] == [False, *[True] * (len(items) - 3)]
    assert "".join(i["artifact"]["parts"][0]["text"] for i in items[1:-1]) == "hello raw world"


def test_a_v10_stream_is_strict_protojson(http, a2a):
    frames = stream(http, a2a, "/a2a-v1", "SendStreamingMessage", {"message": TEXT_V1}, V1)
    items = [data["result"] for _, data, _ in frames]
    parsed = [strict_v10(item) for item in items]
    assert [p.WhichOneof("payload") for p in parsed] == ["task", *["artifact_update"] * (len(items) - 2),
                                                         "status_update"]  # fmt: skip
    assert items[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert items[-1]["statusUpdate"]["status"] == {"state": "TASK_STATE_COMPLETED"}
    assert "final" not in json.dumps(items) and '"kind"' not in json.dumps(items)


def test_send_answers_the_task_in_each_versions_shape(http, a2a):
    v03 = call(http, a2a, "/a2a", "message/send", {"message": TEXT})["result"]
    strict_v03(v03)
    assert v03["status"] == {"state": "completed"}
    assert v03["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello raw world"}]
    v10 = call(http, a2a, "/a2a-v1", "SendMessage", {"message": TEXT_V1}, V1)["result"]
    strict_v10(v10, t1.SendMessageResponse)
    assert v10["task"]["status"] == {"state": "TASK_STATE_COMPLETED"}
    record = http.get(f"{a2a.url}/runs/{v10['task']['id']}").json()  # the task is the run, its context the session
    assert record["agentId"] == "echo" and record["sessionId"] == v10["task"]["contextId"]


def test_a_context_id_is_the_session(http, a2a):
    said = [message({"kind": "text", "text": word}, contextId="ctx-raw-1") for word in ("one", "two")]
    first, second = (call(http, a2a, "/a2a", "message/send", {"message": m})["result"] for m in said)
    assert first["contextId"] == second["contextId"] == "ctx-raw-1" and first["id"] != second["id"]
    session = http.get(f"{a2a.url}/sessions/ctx-raw-1").json()
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == ["one", "two"]


def test_get_and_list_see_the_task(http, a2a):
    sent = call(http, a2a, "/a2a-v1", "SendMessage", {"message": message_v1({"text": "listed"}, contextId="ctx-list")},
                V1)["result"]["task"]  # fmt: skip
    got = call(http, a2a, "/a2a-v1", "GetTask", {"id": sent["id"]}, V1)["result"]
    strict_v10(got, t1.Task)
    assert got["status"]["state"] == "TASK_STATE_COMPLETED" and got["contextId"] == "ctx-list"
    listed = call(http, a2a, "/a2a-v1", "ListTasks", {"contextId": "ctx-list"}, V1)["result"]
    # The list's own fields all written (the SDK's server's way), each task as GetTask writes it.
    strict_v10({**listed, "tasks": []}, t1.ListTasksResponse, required=False, always_print_fields_with_no_presence=True)
    assert [strict_v10(task, t1.Task).id for task in listed["tasks"]] == [sent["id"]] and listed["totalSize"] == 1
    assert "artifacts" not in listed["tasks"][0]  # only with includeArtifacts
    assert listed["nextPageToken"] == ""
    done = call(http, a2a, "/a2a-v1", "ListTasks", {"contextId": "ctx-list", "status": "TASK_STATE_WORKING"}, V1)
    assert done["result"]["tasks"] == [] and done["result"]["totalSize"] == 0
    v03 = call(http, a2a, "/a2a", "tasks/get", {"id": sent["id"]})  # a v1.0 mount's task, same agent: same task
    assert strict_v03(v03["result"]).status.state.value == "completed"


def test_a_resubscribe_says_connected_then_replays_after_its_position(http, a2a):
    frames = stream(http, a2a, "/a2a/slow", "message/stream", {"message": message({"kind": "text", "text": "6"})})
    task_id = frames[0][1]["result"]["id"]
    # The run has ended: a resubscribe is -32004; its log is the stream a live resubscribe replays.
    resubscribed = http.post(a2a.url + "/a2a/slow", json=rpc_body("tasks/resubscribe", {"id": task_id}))
    assert error_of(stream_error(resubscribed)) == -32004
    ids = [seq for seq, _, _ in frames if seq is not None]
    assert ids == sorted(ids, key=position) and len(ids) >= 1
    texts = [d["result"]["artifact"] for _, d, _ in frames if d["result"].get("kind") == "artifact-update"]
    assert {a["artifactId"] for a in texts} == {f"{task_id}-text-1"}


def test_a_live_resubscribe_from_any_position_loses_nothing_and_keeps_the_artifact(http, a2a):
    expected = "".join(f"tick {n} " for n in range(1, 31))
    with http.stream("POST", a2a.url + "/a2a/slow", json=rpc_body("message/stream", {
            "message": message({"kind": "text", "text": "30"})})) as live:  # fmt: skip
        lines = live.iter_lines()
        task_id = json.loads(next(line for line in lines if line.startswith("data: "))[6:])["result"]["id"]
        next(line for line in lines if line.startswith("data: "))  # a tick: the task runs
        resubscribe = rpc_body("tasks/resubscribe", {"id": task_id})
        # Other connections (on either worker): from the start, after the run's start (seq 1)
        # by Last-Event-ID and by ?after=; all open while the task runs, then read to its end.
        url = a2a.url + "/a2a/slow"
        with http.stream("POST", url, json=resubscribe) as whole, \
                http.stream("POST", url, json=resubscribe, headers={"Last-Event-ID": "1"}) as by_id, \
                http.stream("POST", url, json=resubscribe, params={"after": "1"}) as by_query:  # fmt: skip
            for answer in (whole, by_id, by_query):
                frames = sse_frames(answer.read().decode())
                assert frames[0] == (None, None, ["connected"])
                items = [strict_v03(d["result"]) for _, d, _ in frames[1:]]
                assert items[0].kind == "task" and items[0].status.state.value == "working"
                chunks = [i for i in items if i.kind == "artifact-update"]
                assert "".join(c.artifact.parts[0].root.text for c in chunks) == expected
                assert {c.artifact.artifact_id for c in chunks} == {f"{task_id}-text-1"}
                assert [c.append for c in chunks] == [False, *[True] * (len(chunks) - 1)]
                assert (
                    items[-1].kind == "status-update"
                    and items[-1].final
                    and items[-1].status.state.value == "completed"
                )


def test_bad_requests_get_each_reference_code(http, a2a):
    raw = http.post(a2a.url + "/a2a", content=b"{not json", headers={"Content-Type": "application/json"})
    assert raw.status_code == 200 and error_of(raw.json(), None) == -32700
    assert error_of(http.post(a2a.url + "/a2a", json=[rpc_body("tasks/get", {"id": "x"})]).json(), None) == -32600
    assert error_of(http.post(a2a.url + "/a2a", json={"id": 1, "method": "tasks/get"}).json()) == -32600
    assert error_of(call(http, a2a, "/a2a", "tasks/nope", {})) == -32601
    assert error_of(call(http, a2a, "/a2a", "SendMessage", {"message": TEXT})) == -32601  # a v1.0 name on v0.3
    for params in ({"message": message()}, {"message": message({"kind": "video"})},
                   {"message": message({"kind": "data", "data": [1, 2]})}, {}):  # fmt: skip
        assert error_of(call(http, a2a, "/a2a", "message/send", params)) == -32602, params
    assert (
        error_of(call(http, a2a, "/a2a-v1", "SendMessage", {"message": message_v1({"mediaType": "x"})}, V1)) == -32602
    )
    assert error_of(call(http, a2a, "/a2a", "tasks/get", {})) == -32602
    assert error_of(call(http, a2a, "/a2a", "tasks/get", {"id": "run_unknown"})) == -32001
    assert error_of(call(http, a2a, "/a2a-v1", "GetExtendedAgentCard", {}, V1)) == -32007
    assert error_of(call(http, a2a, "/a2a-v1", "GetTask", {"id": "x"})) == -32009  # no A2A-Version: 0.3
    assert error_of(call(http, a2a, "/a2a", "tasks/get", {"id": "x"}, V1)) == -32009
    assert (
        error_of(
            call(http, a2a, "/a2a/slow", "message/send", {"message": message({"kind": "text", "text": "no digits"})})
        )
        == -32602
    )


def test_task_errors_of_the_lifecycle(http, a2a):
    done = call(http, a2a, "/a2a", "message/send", {"message": TEXT})["result"]
    # Another agent's run id is no task of this endpoint.
    assert error_of(call(http, a2a, "/a2a/slow", "tasks/get", {"id": done["id"]})) == -32001
    assert error_of(call(http, a2a, "/a2a/slow", "tasks/cancel", {"id": done["id"]})) == -32001
    assert error_of(call(http, a2a, "/a2a", "tasks/cancel", {"id": done["id"]})) == -32002
    resubscribed = http.post(a2a.url + "/a2a", json=rpc_body("tasks/resubscribe", {"id": done["id"]}))
    assert error_of(stream_error(resubscribed)) == -32004
    running = stream_start(http, a2a)
    bad = http.post(a2a.url + "/a2a/slow", json=rpc_body("tasks/resubscribe", {"id": running}),
                    headers={"Last-Event-ID": "x"})  # fmt: skip
    assert error_of(stream_error(bad)) == -32602
    past = http.post(a2a.url + "/a2a/slow", json=rpc_body("tasks/resubscribe", {"id": running}),
                     params={"after": "100000"})  # fmt: skip
    assert error_of(stream_error(past)) == -32602
    assert call(http, a2a, "/a2a/slow", "tasks/cancel", {"id": running})["result"]["status"] == {"state": "canceled"}


def stream_start(http, server):
    """A slow task started and left running (its stream read to its first event, then dropped)."""
    body = rpc_body("message/stream", {"message": message({"kind": "text", "text": "200"})})
    with http.stream("POST", server.url + "/a2a/slow", json=body) as live:
        return json.loads(next(line for line in live.iter_lines() if line.startswith("data: "))[6:])["result"]["id"]


def test_inline_bytes_go_to_the_blob_store_under_the_limit(http, a2a):
    data = b"\x89PNG bytes of a file"
    part = {
        "kind": "file",
        "file": {"bytes": base64.b64encode(data).decode(), "mimeType": "image/png", "name": "a.png"},
    }
    task = call(http, a2a, "/a2a/files", "message/send", {"message": message(part)})["result"]
    (said,) = json.loads(task["artifacts"][0]["parts"][0]["text"])  # filer says its files back
    assert said["mimeType"] == "image/png" and said["uri"].startswith("/files/") and said["size"] == len(data)
    assert http.get(a2a.url + said["uri"]).content == data
    v1 = call(http, a2a, "/a2a/files-v1", "SendMessage", {"message": message_v1(
        {"raw": base64.b64encode(data).decode(), "mediaType": "image/png"})}, V1)["result"]["task"]  # fmt: skip
    (said,) = json.loads(v1["artifacts"][0]["parts"][0]["text"])
    assert http.get(a2a.url + said["uri"]).content == data


def test_a_file_by_uri_is_one_of_this_servers_never_a_url_and_of_a_type_the_model_takes(http, a2a):
    stored = http.post(a2a.url + "/files", content=b"%PDF-1.4", headers={"Content-Type": "application/pdf"}).json()
    by_uri = {"kind": "file", "file": {"uri": stored["uri"], "mimeType": "application/pdf"}}
    task = call(http, a2a, "/a2a/files", "message/send", {"message": message(by_uri)})["result"]
    (said,) = json.loads(task["artifacts"][0]["parts"][0]["text"])
    assert (said["uri"], said["mimeType"], said["size"]) == (stored["uri"], "application/pdf", 8)
    by_url = {"kind": "file", "file": {"uri": "https://example.com/a.pdf", "mimeType": "application/pdf"}}
    answer = call(http, a2a, "/a2a/files", "message/send", {"message": message(by_url)})
    assert error_of(answer) == -32602 and "INPUT_INVALID" in answer["error"]["message"]
    assert error_of(call(http, a2a, "/a2a", "message/send", {"message": message(by_uri)})) == -32005  # echo takes none


def test_inline_bytes_over_10_mb_are_invalid_params_and_past_16_mib_the_body_is_too_large(http, a2a):
    over = base64.b64encode(b"\0" * (10 * 1024 * 1024 + 3)).decode()  # about 14 MB of base64: under the body limit
    part = {"kind": "file", "file": {"bytes": over, "mimeType": "application/octet-stream"}}
    assert error_of(call(http, a2a, "/a2a", "message/send", {"message": message(part)})) == -32602
    assert error_of(call(http, a2a, "/a2a-v1", "SendMessage", {"message": message_v1({"raw": over})}, V1)) == -32602
    huge = json.dumps(
        rpc_body("message/send", {"message": message({"kind": "text", "text": "x" * (16 * 1024 * 1024)})})
    )
    answer = http.post(a2a.url + "/a2a", content=huge, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "BODY_TOO_LARGE"
    # The server's own limit (1 MiB) still holds on its other routes; the A2A route served on.
    assert http.post(a2a.url + "/agents/echo/run", content=huge).status_code == 413
    assert call(http, a2a, "/a2a", "message/send", {"message": TEXT})["result"]["status"]["state"] == "completed"


def test_a_generated_file_streams_as_an_artifact_with_an_absolute_uri(http, a2a):
    frames = stream(http, a2a, "/a2a/artist", "message/stream", {"message": message({"kind": "text", "text": "draw"})})
    items = [strict_v03(d["result"]) for _, d, _ in frames]
    files = [i for i in items if i.kind == "artifact-update" and i.artifact.parts[0].root.kind == "file"]
    assert len(files) == 1 and files[0].artifact.artifact_id == f"{items[0].id}-file-1"
    file = files[0].artifact.parts[0].root.file
    assert file.mime_type == "image/png" and file.uri.startswith(a2a.url + "/files/")
    assert http.get(file.uri).content.startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('"\\ud800"', -32602),  # JSON, but no UTF-8 text carries it: INVALID_REQUEST, as on every route
        ("NaN", -32700),  # Python reads it; JSON has no NaN
        ("1e999", -32700),
    ],
)
def test_a_body_no_other_route_takes_is_refused_before_any_run(http, a2a, text, code):
    body = '{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": %s}}'
    body %= json.dumps(message({"kind": "text", "text": "@"})).replace('"@"', text)
    answer = http.post(a2a.url + "/a2a", content=body.encode(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200
    assert error_of(answer.json(), None) == code  # an error, not a Task: no run started


def test_a_streams_task_carries_the_seq_of_the_runs_start_and_a_resubscribe_from_it_replays_the_rest(http, a2a):
    expected = "".join(f"tick {n} " for n in range(1, 21))
    with http.stream("POST", a2a.url + "/a2a/slow", json=rpc_body("message/stream", {
            "message": message({"kind": "text", "text": "20"})})) as live:  # fmt: skip
        lines = live.iter_lines()
        head = [next(lines), next(lines)]
        assert head[0] == "id: 1" and head[1].startswith("data: "), head  # the Task, the last event of seq 1
        task = json.loads(head[1][6:])["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "working"
        resubscribe = rpc_body("tasks/resubscribe", {"id": task["id"]})
        with http.stream("POST", a2a.url + "/a2a/slow", json=resubscribe, headers={"Last-Event-ID": "1"}) as again:
            frames = sse_frames(again.read().decode())
        items = [strict_v03(d["result"]) for _, d, _ in frames[1:]]
        assert items[0].kind == "task"
        chunks = [i for i in items if i.kind == "artifact-update"]
        assert "".join(c.artifact.parts[0].root.text for c in chunks) == expected
        assert items[-1].kind == "status-update" and items[-1].status.state.value == "completed"


def test_a_stream_cut_inside_a_later_segment_resubscribes_with_only_the_unseen_text(http, a2a):
    """The painter's stream (v1.0: text, a file, text in the same artifact), cut by the network
    inside its second text segment, then SubscribeToTask from the last id the client got: the
    task the SDK's own fold makes of all it got holds the run's text once."""
    params = {"message": message_v1({"text": "paint"})}
    got = read_until_cut(http, a2a, "/a2a/painter-v1", rpc_body("SendStreamingMessage", params), text_chunks=4)
    task = got[0][1].task
    last_id = [event_id for event_id, _ in got if event_id is not None][-1]
    again = http.post(a2a.url + "/a2a/painter-v1", json=rpc_body("SubscribeToTask", {"id": task.id}),
                      headers={**V1, "Last-Event-ID": last_id})  # fmt: skip
    items = [strict_v10(data["result"]) for _, data, _ in sse_frames(again.text) if data is not None]
    assert items[-1].status_update.status.state == t1.TaskState.TASK_STATE_COMPLETED
    for item in [item for _, item in got] + items:
        if item.HasField("artifact_update"):
            append_artifact_to_task(task, item.artifact_update)
    (text,) = [artifact for artifact in task.artifacts if artifact.artifact_id == f"{task.id}-text-1"]
    assert "".join(part.text for part in text.parts) == PAINTER_TEXT


def read_until_cut(http, server, path, body, text_chunks):
    """The events (v1.0, with their ids) a client got of a stream through a proxy that cuts the
    connection once ``text_chunks`` text chunks came."""
    got, buffer, cut = [], "", False
    proxy = TCPProxy(server.port)
    try:
        with http.stream("POST", proxy.url + path, json=body, headers=V1) as answer:
            try:
                for chunk in answer.iter_text():
                    *blocks, buffer = (buffer + chunk).split("\n\n")
                    frames = sse_frames("".join(f"{block}\n\n" for block in blocks))
                    got += [(event_id, strict_v10(data["result"])) for event_id, data, _ in frames if data]
                    if not cut and sum(item.HasField("artifact_update") for _, item in got) >= text_chunks:
                        cut = proxy.cut() > 0
            except httpx.HTTPError:
                pass  # the cut
    finally:
        proxy.close()
    assert cut
    return got
