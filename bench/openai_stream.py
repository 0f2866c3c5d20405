"""The OpenAI-compatible routes' cost: the demo's ``echo`` as a model through ``POST
/v1/chat/completions`` and ``POST /v1/responses``, streamed, beside the same agent on the native
SSE route, ``POST /agents/echo/run``, on one gunicorn server (one gevent worker, the http-sse
transport) in the same run.

Chat completions answer ``chat.completion.chunk`` objects (a content chunk per delta, after the
role's, then the finishing chunk and ``data: [DONE]``); the Responses API typed events
(``response.output_text.delta`` per delta, after response.created, in_progress, the item's and
its part's additions, then their ends and ``response.completed``); the native route crumbs, one
chunk per event on every route. Each request holds its own conversation (a new session each),
its body what the ``openai`` clients send. The workloads and the measures are
bench/bridge_stream.py's::

    .venv/bin/python bench/openai_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

from typing import Any

import bridge_stream
from bridge_stream import DONE, Bridge, Route

CONTENT = "content"


def chat_kind(chunk: dict[str, Any]) -> str:
    """A chat chunk's kind: ``content`` for a text delta (a choice's ``delta.content`` after the
    role's chunk), else ``chunk`` (or ``[DONE]``, which says its ``type``)."""
    if "type" in chunk:
        return chunk["type"]
    delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
    return CONTENT if "content" in delta and "role" not in delta else "chunk"


OPENAI = Bridge(
    "openai_stream.py",
    "## The OpenAI-compatible routes (streamed, beside the native SSE route)",
    (
        Route("chat completions", "/v1/chat/completions",
              lambda text: {"model": "echo", "messages": [{"role": "user", "content": text}], "stream": True},
              CONTENT, DONE, chat_kind),
        Route("responses", "/v1/responses", lambda text: {"model": "echo", "input": text, "stream": True},
              "response.output_text.delta", "response.completed"),
    ),
)  # fmt: skip

if __name__ == "__main__":
    bridge_stream.main(OPENAI, __doc__)
