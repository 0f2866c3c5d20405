"""The config of the lost-text test (``BREAD_CONFIG=tests.integration.lost_text_config:config``).

``teller`` says a few words, calls a tool, then streams "Lost " in its last model turn and, the
first time (while ``$KILL_MARKER`` exists), waits until the test says it read that text
(``$TEXT_SEEN`` exists) and SIGKILLs its worker: the text was streamed and never logged. The
respawned worker carries the run on and the call is made again, to its end.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bread_sync.agents import Agent, tool
from bread_sync.config import Config
from bread_sync.models import script
from bread_sync.models.script import call, say

#: How long the worker waits for the test to have read the text before it dies anyway.
SEEN_SECONDS = 30.0


@tool(on_repeat="run")
def noted() -> dict:
    """Done before the kill: its result is logged."""
    return {"ok": True}


def _killed_once_read(convo: script.Conversation) -> list:
    marker = Path(os.environ["KILL_MARKER"])
    if marker.exists():
        seen, deadline = Path(os.environ["TEXT_SEEN"]), time.monotonic() + SEEN_SECONDS
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # cooperative under gevent: the response writes the text meanwhile
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return [say("Found again.")]


teller = Agent(
    id="teller",
    description="Says a few words, calls a tool, then says more; its worker dies once mid-text.",
    model=script.provider([say("Hello. "), call("noted", {}), say(["Lo", "st "]), _killed_once_read]),
    tools=[noted],
)


def config() -> Config:
    return Config(agents=[teller])
