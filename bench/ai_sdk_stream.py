"""The AI SDK bridge's cost: the demo's ``echo`` through ``POST /ai-sdk/echo`` (a UI message
stream) beside the same agent on the native SSE route, ``POST /agents/echo/run``, on one gunicorn
server (one gevent worker, the http-sse transport) in the same run.

The AI SDK route answers UI message chunks (``text-delta`` per delta, and start, start-step,
text-start/end, finish-step, finish, then ``data: [DONE]``), the native route crumbs, one chunk
per event either way. Every chat is one of its own, its body what ``DefaultChatTransport``
sends. The workloads and the measures are bench/bridge_stream.py's::

    .venv/bin/python bench/ai_sdk_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import uuid
from typing import Any

import bridge_stream
from bridge_stream import DONE, Bridge, Route


def chat_body(text: str) -> dict[str, Any]:
    """What the ``ai`` package's DefaultChatTransport sends for a new user message, in a chat of its own."""
    message = {"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": f"bench-{uuid.uuid4().hex}", "messages": [message], "trigger": "submit-message"}


AI_SDK = Bridge(
    "ai_sdk_stream.py",
    "## The AI SDK bridge (UI message stream beside the native SSE route)",
    (Route("AI SDK", "/ai-sdk/echo", chat_body, "text-delta", DONE),),
)

if __name__ == "__main__":
    bridge_stream.main(AI_SDK, __doc__)
