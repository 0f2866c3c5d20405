"""A HITL pause over A2A, live, on a real gunicorn gevent server with two workers: the stream
ends at ``input-required`` with the pause's data part, and the next message on the task resumes
it (a text: an answer or yes/no; a data part: as it is), on any worker, after a restart too."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from .a2a_fixtures import position as position_of
from .a2a_fixtures import rpc_body, sse_frames, strict_v03, strict_v10

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


def message(part, task_id=None, **fields):
    return {"role": "user", "parts": [part], "messageId": uuid.uuid4().hex, "kind": "message",
            **({"taskId": task_id} if task_id else {}), **fields}  # fmt: skip


def text(value):
    return {"kind": "text", "text": value}


def stream(http, server, path, msg):
    answer = http.post(server.url + path, json=rpc_body("message/stream", {"message": msg}))
    assert answer.status_code == 200, answer.text
    return [(seq, strict_v03(data["result"])) for seq, data, _ in sse_frames(answer.text)]


def texts(items):
    return "".join(p.root.text for _, i in items if i.kind == "artifact-update" for p in i.artifact.parts)


def test_an_approval_pauses_the_stream_and_a_yes_resumes_it(http, a2a):
    first = stream(http, a2a, "/a2a/writer", message(text("bread")))
    task_id = first[0][1].id
    pause = first[-1][1]
    assert pause.kind == "status-update" and pause.final and pause.status.state.value == "input-required"
    (part,) = pause.status.message.parts
    data = part.root.data
    assert set(data) == {"checkpointId", "kind", "toolName", "toolCallId", "input", "question"}
    assert data["kind"] == "approval" and data["toolName"] == "publish" and data["input"] == {"title": "bread"}
    assert texts(first) == "Drafting a post about bread."
    got = http.post(a2a.url + "/a2a/writer", json=rpc_body("tasks/get", {"id": task_id})).json()["result"]
    assert got["status"]["state"] == "input-required" and got["status"]["message"]["parts"][0]["data"] == data
    resumed = stream(http, a2a, "/a2a/writer", message(text(" YES "), task_id))
    assert resumed[0][1].kind == "task" and resumed[0][1].id == task_id
    assert texts(resumed) == "Published."
    assert {i.artifact.artifact_id for _, i in resumed if i.kind == "artifact-update"} == {f"{task_id}-text-2"}
    assert resumed[-1][1].status.state.value == "completed" and resumed[-1][1].final
    # The pause was answered: another answer is refused, the task has ended.
    again = http.post(a2a.url + "/a2a/writer", json=rpc_body("message/send", {"message": message(text("y"), task_id)}))
    assert again.json()["error"]["code"] == -32004


def test_any_other_text_denies_an_approval(http, a2a):
    paused = http.post(a2a.url + "/a2a/writer", json=rpc_body("message/send", {"message": message(text("rye"))}))
    task = paused.json()["result"]
    assert task["status"]["state"] == "input-required"
    done = http.post(
        a2a.url + "/a2a/writer", json=rpc_body("message/send", {"message": message(text("nope"), task["id"])})
    )
    result = done.json()["result"]
    assert result["status"]["state"] == "completed"
    assert [p["text"] for a in result["artifacts"] for p in a["parts"]] == ["Not published."]


def test_an_input_takes_a_text_as_the_answer_or_a_data_part_as_it_is(http, a2a):
    for answer, name in ((text("Ann"), "Ann"), ({"kind": "data", "data": {"answer": "Bob"}}, "Bob")):
        first = stream(http, a2a, "/a2a/interviewer", message(text("hi")))
        data = first[-1][1].status.message.parts[0].root.data
        assert data["kind"] == "input" and data["question"] == "What is your name?"
        resumed = stream(http, a2a, "/a2a/interviewer", message(answer, first[0][1].id))
        assert texts(resumed) == f"Thanks, {name}."


def test_a_paused_tasks_resubscribe_replays_from_each_id_and_ends_at_the_pause(http, a2a):
    first = stream(http, a2a, "/a2a/writer", message(text("crumbs")))
    task_id = first[0][1].id
    ids = [seq for seq, _ in first if seq is not None]
    assert ids and ids == sorted(ids, key=position_of)
    for position in ["0", *ids]:
        answer = http.post(a2a.url + "/a2a/writer", json=rpc_body("tasks/resubscribe", {"id": task_id}),
                           headers={"Last-Event-ID": position})  # fmt: skip
        frames = sse_frames(answer.text)
        assert frames[0] == (None, None, ["connected"])
        items = [strict_v03(d["result"]) for _, d, _ in frames[1:]]
        assert items[0].kind == "task" and items[0].status.state.value == "input-required"
        if position != ids[-1]:
            # What the live stream said past the id, the log's text whole rather than in chunks.
            assert collapsed(items[1:]) == collapsed(past(first, position))
            assert items[-1].kind == "status-update" and items[-1].status.state.value == "input-required"
        else:
            assert len(items) == 1  # nothing past the pause: the Task says it all


def past(framed, position):
    """The live stream's items past the event with id ``position``."""
    ids = [seq for seq, _ in framed]
    start = ids.index(position) + 1 if position in ids else 1
    return [item for _, item in framed[start:]]


def collapsed(items):
    """Items as (kind, what they say), a text artifact's chunks as one."""
    out = []
    for item in items:
        if item.kind == "artifact-update" and item.artifact.parts[0].root.kind == "text":
            said = ("text", item.artifact.artifact_id)
            if out and out[-1][:2] == said:
                out[-1] = (*said, out[-1][2] + item.artifact.parts[0].root.text)
                continue
            out.append((*said, item.artifact.parts[0].root.text))
        else:
            out.append((item.kind, item.model_dump(mode="json", exclude_none=True)))
    return out


def test_v10_pauses_with_the_sdk_client_and_resumes_on_the_same_task(a2a):
    def request(value, task_id=None):
        msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=value)])
        if task_id:
            msg.task_id = task_id
        return SendMessageRequest(message=msg)

    async def go():
        card = "/.well-known/agent-card-writer-v1.json"
        async with await create_client(a2a.url, ClientConfig(streaming=True), relative_card_path=card) as client:
            first = [e async for e in client.send_message(request("toast"))]
            second = [e async for e in client.send_message(request("approve", first[0].task.id))]
            return first, second

    first, second = asyncio.run(asyncio.wait_for(go(), 30))
    pause = first[-1].status_update.status
    assert pause.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert pause.message.parts[0].data.struct_value.fields["toolName"].string_value == "publish"
    assert second[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    text_ = "".join(p.text for e in second if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts)
    assert text_ == "Published."


def test_a_v10_pause_is_strict_protojson(http, a2a):
    answer = http.post(a2a.url + "/a2a/writer-v1", headers=V1, json=rpc_body("SendStreamingMessage", {"message": {
        "role": "ROLE_USER", "parts": [{"text": "jam"}], "messageId": "m"}}))  # fmt: skip
    items = [strict_v10(d["result"]) for _, d, _ in sse_frames(answer.text)]
    assert items[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "final" not in answer.text
