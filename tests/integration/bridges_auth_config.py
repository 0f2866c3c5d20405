"""The config of the bridges' auth tests (``BREAD_CONFIG=tests.integration.bridges_auth_config:config``):
the demo agents behind the auth plugin, served over MCP and A2A, with three keys. ``alice`` and
``bob`` may do anything; ``reader`` may only read (JSON-RPC methods told apart by ``authorize``'s
``args``). An A2A context (a bread session) and its tasks are the caller's whose name starts its
id (``alice-...``); each ``authorize_run`` asked is logged, for the tests to count."""

from __future__ import annotations

import logging

from flask import current_app

from bread_sync import ServerSettings
from bread_sync.demo import config as demo_config
from bread_sync.protocols.a2a import a2a_server
from bread_sync.protocols.mcp import mcp_server
from bread_sync.server import auth_plugin

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef",
        "reader": "reader-key-0123456789abcdef"}  # fmt: skip
#: What ``reader`` may ask, over MCP and A2A.
READS = {"initialize", "notifications/initialized", "ping", "tools/list", "tasks/get", "GetTask", "ListTasks"}
#: The one tool ``reader`` may call.
READER_TOOL = "task_word-count"
#: How many MCP sessions an identity holds on ``/mcp``; how long one may idle on ``/mcp-brief``.
MAX_SESSIONS, BRIEF_IDLE_SECONDS = 3, 1.0

log = logging.getLogger("bread_sync.tests")


def authorize(identity, action, args):
    if identity["sub"] != "reader" or action not in ("mcp.request", "a2a.rpc"):
        return True
    return args.get("method") in READS or args.get("tool") == READER_TOOL


def owns_context(identity, context_id):
    return context_id.startswith(f"{identity['sub']}-")


def authorize_run(identity, run_id):
    log.warning("authorize_run %s %s", identity["sub"], run_id)
    record = current_app.extensions["bread_sync"].bread.store.get_run(run_id)
    return record is None or owns_context(identity, record["sessionId"])


def config():
    plugins = [
        auth_plugin(api_keys=KEYS, env_var=None),
        mcp_server(agents=["echo"], tasks=["word-count"], max_sessions=MAX_SESSIONS),
        mcp_server("/mcp-brief", agents=["echo"], tasks=[], session_idle_seconds=BRIEF_IDLE_SECONDS),
        a2a_server("echo", authorize_context=owns_context),
        a2a_server("echo", card_path="/.well-known/agent-card-v1.json", rpc_path="/a2a-v1", spec_version="1.0",
                   authorize_context=owns_context),
    ]  # fmt: skip
    server = ServerSettings(authorize=authorize, authorize_run=authorize_run)
    return demo_config().model_copy(update={"plugins": plugins, "server": server})
