"""The AG-UI bridge's cost: the demo's ``echo`` through ``POST /ag-ui/run`` beside the same agent
on the native SSE route, ``POST /agents/echo/run``, on one gunicorn server (one gevent worker,
the http-sse transport) in the same run.

The AG-UI route answers AG-UI events (``TEXT_MESSAGE_CONTENT`` per delta, and RUN_STARTED,
TEXT_MESSAGE_START/END, RUN_FINISHED), the native route crumbs (``text:delta`` per delta, and
the run's start and end), one chunk per event either way. Every AG-UI run is a thread of its
own. The workloads and the measures are bench/bridge_stream.py's::

    .venv/bin/python bench/ag_ui_stream.py --repeat 5 --write docs/performance.md
"""

from __future__ import annotations

import uuid
from typing import Any

import bridge_stream
from bridge_stream import Bridge, Route


def ag_ui_body(text: str) -> dict[str, Any]:
    """What @ag-ui/client's HttpAgent sends, on a thread of its own."""
    return {"threadId": f"bench-{uuid.uuid4().hex}", "runId": uuid.uuid4().hex, "protocolVersion": "1.0",
            "tools": [], "context": [], "forwardedProps": {}, "state": {},
            "messages": [{"id": "m1", "role": "user", "content": text}]}  # fmt: skip


AG_UI = Bridge(
    "ag_ui_stream.py",
    "## The AG-UI bridge (gunicorn, gevent)",
    (Route("AG-UI", "/ag-ui/run", ag_ui_body, "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"),),
)

if __name__ == "__main__":
    bridge_stream.main(AG_UI, __doc__)
