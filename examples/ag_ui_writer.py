"""Talk to a bread_sync agent over AG-UI, as a frontend would: run the demo `writer`, answer its
interrupt, and print the events.

    .venv/bin/pip install -q -e '.[ag-ui]' && .venv/bin/bread-sync start   # in one terminal
    .venv/bin/python examples/ag_ui_writer.py                               # in another

Prints each event's type (and the text), the interrupt the writer asks, then the continuation.
`BREAD_URL` names another server (default http://127.0.0.1:3000). Only the standard library and
the `ag-ui-protocol` models (to read the events) are used.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid

from ag_ui.core import EventType, ResumeEntry, RunAgentInput, UserMessage

BASE = os.environ.get("BREAD_URL", "http://127.0.0.1:3000")


def post(path: str, body: RunAgentInput) -> list[dict]:
    """POST a RunAgentInput; the AG-UI events of the response, parsed from its SSE frames."""
    data = body.model_dump_json(by_alias=True, exclude_none=True).encode()
    request = urllib.request.Request(f"{BASE}{path}", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    lines = (line for frame in text.split("\n\n") for line in frame.splitlines())
    return [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]


def show(events: list[dict]) -> dict | None:
    """Print the events; the interrupt the run ended with, if any."""
    for event in events:
        extra = event.get("delta", "")
        print(f"{event['type']:22} {extra}".rstrip())
        if event["type"] == EventType.RUN_FINISHED and event.get("outcome", {}).get("type") == "interrupt":
            return event["outcome"]["interrupts"][0]
    return None


def turn(thread: str, run_id: str, **fields) -> RunAgentInput:
    return RunAgentInput(thread_id=thread, run_id=run_id, state={}, tools=[], context=[], forwarded_props={}, **fields)


def main() -> None:
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    ask = turn(thread, "run-1", messages=[UserMessage(id="m1", role="user", content="sourdough")])
    interrupt = show(post("/ag-ui/writer", ask))
    print(f"interrupt: {interrupt['message']}")
    approve = ResumeEntry(interrupt_id=interrupt["id"], status="resolved", payload={"approved": True})
    show(post("/ag-ui/writer", turn(thread, "run-2", messages=[], resume=[approve])))


if __name__ == "__main__":
    main()
