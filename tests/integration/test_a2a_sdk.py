"""The official a2a-sdk 1.3 client, unchanged, against the demo's A2A endpoints on a real
gunicorn gevent server with two workers: v0.3 (through the SDK's compat transport) and v1.0
(its default)."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

V03 = {"echo": "/.well-known/agent-card.json", "slow": "/.well-known/agent-card-slow.json"}
V10 = {"echo": "/.well-known/agent-card-v1.json", "slow": "/.well-known/agent-card-slow-v1.json"}
VERSIONS = {"0.3": V03, "1.0": V10}
#: How long a client call may take before the test fails.
CALL_SECONDS = 30


def request(text, task_id=None):
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, CALL_SECONDS))


async def client_for(server, version, agent, streaming=True):
    return await create_client(server.url, client_config=ClientConfig(streaming=streaming),
                               relative_card_path=VERSIONS[version][agent])  # fmt: skip


async def collect(stream):
    return [event async for event in stream]


def kinds(events):
    return [event.WhichOneof("payload") for event in events]


def text_of(events):
    return "".join(p.text for e in events if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts)


@pytest.fixture(params=["0.3", "1.0"])
def version(request):
    return request.param


def test_the_card_picks_the_version_of_the_mount(a2a, version):
    async def go():
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, a2a.url, VERSIONS[version]["echo"]).get_agent_card()
            return [(i.protocol_version, i.url) for i in card.supported_interfaces]

    interfaces = run(go())
    path = "/a2a" if version == "0.3" else "/a2a-v1"
    assert [(v.rsplit(".", 1)[0] if v.count(".") == 2 else v, url) for v, url in interfaces] == [
        (version, a2a.url + path)
    ]


def test_a_streamed_message_is_the_task_then_its_text_then_completed(a2a, version):
    async def go():
        async with await client_for(a2a, version, "echo") as client:
            events = await collect(client.send_message(request("hello there friend")))
            task = await client.get_task(GetTaskRequest(id=events[0].task.id))
            return events, task

    events, task = run(go())
    assert kinds(events)[0] == "task" and events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert set(kinds(events)[1:-1]) == {"artifact_update"}
    assert text_of(events) == "hello there friend"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    ids = {e.artifact_update.artifact.artifact_id for e in events if e.HasField("artifact_update")}
    assert ids == {f"{events[0].task.id}-text-1"}
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and task.context_id == events[0].task.context_id


def test_a_message_sent_without_streaming_answers_the_finished_task(a2a, version):
    async def go():
        async with await client_for(a2a, version, "echo", streaming=False) as client:
            return await collect(client.send_message(request("just once")))

    (event,) = run(go())
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in event.task.artifacts for p in a.parts] == ["just once"]


def test_a_slow_task_is_cancelled_mid_stream_from_another_connection(a2a, version):
    async def go():
        async with await client_for(a2a, version, "slow") as client, await client_for(a2a, version, "slow") as other:
            stream = client.send_message(request("100"))
            first = await anext(stream)
            await anext(stream)  # a tick arrived: the task is running
            canceled = await other.cancel_task(CancelTaskRequest(id=first.task.id))
            rest = await collect(stream)
            with pytest.raises(TaskNotCancelableError):
                await other.cancel_task(CancelTaskRequest(id=first.task.id))
            with pytest.raises(UnsupportedOperationError):
                await collect(other.subscribe(SubscribeToTaskRequest(id=first.task.id)))
            return canceled, rest, await other.get_task(GetTaskRequest(id=first.task.id))

    canceled, rest, task = run(go())
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    assert len([e for e in rest if e.HasField("artifact_update")]) < 99
    assert task.status.state == TaskState.TASK_STATE_CANCELED


def test_a_resubscribe_follows_the_running_task_to_its_end(a2a, version):
    async def go():
        async with await client_for(a2a, version, "slow") as client, await client_for(a2a, version, "slow") as other:
            stream = client.send_message(request("12"))
            first = await anext(stream)
            again = await collect(other.subscribe(SubscribeToTaskRequest(id=first.task.id)))
            return first, await collect(stream), again

    first, live, again = run(go())
    assert kinds(again)[0] == "task" and again[0].task.id == first.task.id
    assert again[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    expected = "".join(f"tick {n} " for n in range(1, 13))
    assert text_of(live) == expected and text_of(again) == expected  # the replay from the start, then live


def test_an_unknown_task_is_task_not_found(a2a, version):
    async def go():
        async with await client_for(a2a, version, "echo") as client:
            await client.get_task(GetTaskRequest(id="run_nope"))

    with pytest.raises(TaskNotFoundError):
        run(go())


def test_a_stream_refused_at_once_raises_its_a2a_error_in_the_client(a2a, version):
    """v0.3 answers it as an SSE stream of the one error event, v1.0 as JSON: the client raises
    the A2A error from either (issue 33 item 5)."""

    async def go(open_stream):
        async with await client_for(a2a, version, "echo") as client:
            return await collect(open_stream(client))

    with pytest.raises(TaskNotFoundError):
        run(go(lambda client: client.subscribe(SubscribeToTaskRequest(id="run_nope"))))
    with pytest.raises(TaskNotFoundError):
        run(go(lambda client: client.send_message(request("hi", task_id="run_nope"))))


def test_a_message_sent_without_waiting_is_working_and_polls_to_its_artifacts(a2a, version):
    """returnImmediately (v1.0; the SDK's v0.3 transport sends it as blocking: false), then
    GetTask until the task ends (issue 33 item 1)."""

    async def go():
        async with await client_for(a2a, version, "slow", streaming=False) as client:
            sent = request("8")
            sent.configuration.return_immediately = True
            (first,) = await collect(client.send_message(sent))
            task, deadline = first.task, time.monotonic() + CALL_SECONDS - 5
            while task.status.state == TaskState.TASK_STATE_WORKING and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                task = await client.get_task(GetTaskRequest(id=first.task.id))
            return first.task, task

    first, done = run(go())
    assert first.status.state == TaskState.TASK_STATE_WORKING and not first.artifacts
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "".join(p.text for a in done.artifacts for p in a.parts) == "".join(f"tick {n} " for n in range(1, 9))
    assert [m.role for m in done.history] == [Role.ROLE_USER]
