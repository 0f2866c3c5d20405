"""Use bread_sync's agents as MCP tools, as an MCP host would, with the official MCP Python SDK:
list the demo's tools, call echo and the word-count task, follow the slow agent's progress, and
answer the writer's pause through the resume tool.

    .venv/bin/pip install -q -e '.[mcp]' mcp && .venv/bin/bread-sync start   # in one terminal
    .venv/bin/python examples/mcp_tools.py                                   # in another

`BREAD_URL` names another server (default http://127.0.0.1:3000); the MCP endpoint is its `/mcp`.
The SDK's client is asynchronous, so this script is too; the server is not.
"""

from __future__ import annotations

import asyncio
import os

from mcp import Client

BASE = os.environ.get("BREAD_URL", "http://127.0.0.1:3000")


def text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def main() -> None:
    async with Client(f"{BASE}/mcp", read_timeout_seconds=30) as client:
        print(f"protocol {client.protocol_version}, server {client.server_info.name}")
        print("tools:", " ".join(tool.name for tool in (await client.list_tools()).tools))
        print("agent_echo:", text(await client.call_tool("agent_echo", {"input": "hello from MCP"})))
        counted = await client.call_tool("task_word-count", {"text": "one two three"})
        print("task_word-count:", counted.structured_content)

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            print(f"  progress {done:g}: {message}")

        slow = await client.call_tool("agent_slow", {"count": 3, "delayMs": 50}, progress_callback=on_progress)
        print("agent_slow:", text(slow))
        paused = (await client.call_tool("agent_writer", {"topic": "sourdough"})).structured_content
        print(f"agent_writer: {paused['status']}, {paused['kind']} of {paused['toolName']} {paused['input']}")
        answer = {"checkpointId": paused["checkpointId"], "response": {"approved": True}}
        print("resume:", text(await client.call_tool("resume", answer)))


if __name__ == "__main__":
    asyncio.run(main())
