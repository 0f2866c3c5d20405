"""The config of the A2A tests' server (``BREAD_CONFIG=tests.integration.a2a_config:config``):
the demo, with its fixed A2A mounts, and more mounts for what echo and slow never do: a file
(artist), an approval (writer), a question (interviewer), pushes to a local webhook, text in
two segments of one artifact, a file between them (painter), file parts as input (filer)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from bread_sync.agents import Agent
from bread_sync.demo import DOT_PNG
from bread_sync.demo import config as demo_config
from bread_sync.models import ModelRequest, TextDelta, script
from bread_sync.models.script import file, say
from bread_sync.protocols.a2a import a2a_server

#: The painter's text, the second segment slow enough for a test to cut the network inside it.
PAINTER_TEXT = "A dot: " + "".join(f"tick {n} " for n in range(1, 6))

painter = Agent(
    id="painter",
    description="Says a line, draws a dot, then ticks slowly: text, a file, text, in one turn.",
    model=script.provider(
        [say("A dot: "), file(DOT_PNG, "image/png", "dot.png"), say([f"tick {n} " for n in range(1, 6)], delay=0.3)]
    ),
)


class FilesSaidBack:
    """A model that takes any file and answers with the references its input held, each with the
    size of the bytes it was sent: what a message's file parts became."""

    name = "files-said-back"
    file_types = frozenset({"image/png", "application/pdf", "application/octet-stream"})

    def stream(self, request: ModelRequest) -> Iterator[TextDelta]:
        files = [m for m in request.messages if m["role"] == "user"][-1].get("files", [])
        yield TextDelta(json.dumps([{**ref, "size": len(request.files[ref["uri"]].data)} for ref in files]))


FILER = Agent(id="filer", model=FilesSaidBack(), description="Says back the files it was sent.")

EXTRA = [
    a2a_server("artist", card_path="/.well-known/agent-card-artist.json", rpc_path="/a2a/artist"),
    a2a_server("writer", card_path="/.well-known/agent-card-writer.json", rpc_path="/a2a/writer"),
    a2a_server("writer", card_path="/.well-known/agent-card-writer-v1.json", rpc_path="/a2a/writer-v1",
               spec_version="1.0"),
    a2a_server("interviewer", card_path="/.well-known/agent-card-interviewer.json", rpc_path="/a2a/interviewer"),
    a2a_server("filer", card_path="/.well-known/agent-card-filer.json", rpc_path="/a2a/files"),
    a2a_server("filer", card_path="/.well-known/agent-card-filer-v1.json", rpc_path="/a2a/files-v1",
               spec_version="1.0"),
    # Push notifications to the tests' own webhooks, on 127.0.0.1.
    a2a_server("slow", card_path="/.well-known/agent-card-push.json", rpc_path="/a2a/push", push_notifications=True,
               allow_private_webhooks=True),
    a2a_server("slow", card_path="/.well-known/agent-card-push-v1.json", rpc_path="/a2a/push-v1", spec_version="1.0",
               push_notifications=True, allow_private_webhooks=True),
    a2a_server("painter", card_path="/.well-known/agent-card-painter-v1.json", rpc_path="/a2a/painter-v1",
               spec_version="1.0"),
]  # fmt: skip


def config():
    demo = demo_config()
    return demo.model_copy(update={"agents": [*demo.agents, painter, FILER], "plugins": [*demo.plugins, *EXTRA]})
