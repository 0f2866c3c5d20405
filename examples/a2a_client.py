"""Call bread_sync agents over A2A with the official a2a-sdk client, unchanged: the demo's echo
(v1.0, the SDK's default), then its slow agent (v0.3), cancelled mid-task from a second client.

    .venv/bin/pip install -q -e '.[a2a]' && .venv/bin/bread-sync start   # in one terminal
    .venv/bin/python examples/a2a_client.py                             # in another

Prints each stream event, the task's state, and the cancel. `BREAD_URL` names another server
(default http://127.0.0.1:3000). The SDK's client is asyncio; the server is not.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from a2a.client import ClientConfig, create_client
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

BASE = os.environ.get("BREAD_URL", "http://127.0.0.1:3000")


def request(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    )


def describe(event) -> str:
    kind = event.WhichOneof("payload")
    if kind == "task":
        return f"task {event.task.id} {TaskState.Name(event.task.status.state)}"
    if kind == "artifact_update":
        return f"artifact {''.join(part.text for part in event.artifact_update.artifact.parts)!r}"
    return f"status {TaskState.Name(event.status_update.status.state)}"


async def echo() -> None:
    # The card at /.well-known/agent-card-v1.json lists a 1.0 interface: the client speaks 1.0.
    async with await create_client(BASE, relative_card_path="/.well-known/agent-card-v1.json") as client:
        task_id = None
        async for event in client.send_message(request("hello over A2A")):
            print(describe(event))
            task_id = task_id or event.task.id
        task = await client.get_task(GetTaskRequest(id=task_id))
        print("get:", TaskState.Name(task.status.state))


async def cancel_slow() -> None:
    card = "/.well-known/agent-card-slow.json"  # a v0.3 card: the client speaks 0.3
    async with await create_client(BASE, ClientConfig(streaming=True), relative_card_path=card) as client, \
            await create_client(BASE, relative_card_path=card) as other:  # fmt: skip
        events = client.send_message(request("50"))  # 50 ticks, 100 ms apart
        first = await anext(events)
        print(describe(first))
        print(describe(await anext(events)))
        canceled = await other.cancel_task(CancelTaskRequest(id=first.task.id))
        print("cancel:", TaskState.Name(canceled.status.state))
        async for event in events:
            last = event
        print(describe(last))


async def main() -> None:
    await echo()
    await cancel_slow()


if __name__ == "__main__":
    asyncio.run(main())
