"""The config of the A2A tests' server (``BREAD_CONFIG=tests.integration.a2a_config:config``):
the demo, with its fixed A2A mounts, and more mounts for what echo and slow never do: a file
(artist), an approval (writer), a question (interviewer)."""

from __future__ import annotations

from bread_sync.demo import config as demo_config
from bread_sync.protocols.a2a import a2a_server

EXTRA = [
    a2a_server("artist", card_path="/.well-known/agent-card-artist.json", rpc_path="/a2a/artist"),
    a2a_server("writer", card_path="/.well-known/agent-card-writer.json", rpc_path="/a2a/writer"),
    a2a_server("writer", card_path="/.well-known/agent-card-writer-v1.json", rpc_path="/a2a/writer-v1",
               spec_version="1.0"),
    a2a_server("interviewer", card_path="/.well-known/agent-card-interviewer.json", rpc_path="/a2a/interviewer"),
]  # fmt: skip


def config():
    demo = demo_config()
    return demo.model_copy(update={"plugins": [*demo.plugins, *EXTRA]})
