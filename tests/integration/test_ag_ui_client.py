"""The official AG-UI client, npm's ``@ag-ui/client`` ``HttpAgent``, against a real gunicorn gevent
server: echo, the writer's interrupt and its resume, and the manager's shared state; and a
carried-on run's stream, as the bridge translates it, read as two messages. The package is
installed into tests/node/ (the ``node_clients`` fixture) once, and reused on later runs."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bread_sync.protocols.ag_ui import create_ag_ui_transformer, encode
from bread_sync.protocols.ag_ui.translator import CONTENT_TYPE
from tests.test_ag_ui import CARRIED_ON


def test_http_agent_runs_echo_the_writers_interrupt_and_resume_and_shares_state(node_clients, pool, http):
    server = pool.primary("http-sse")
    done = subprocess.run(["node", "run_agents.mjs", server.url], cwd=node_clients, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning: no key stripped, no event dropped
    seen = json.loads(done.stdout)
    assert seen["echo"]["result"] == "hello there" and seen["echo"]["text"] == ["hello there"]
    paused, resumed = seen["writer"]["paused"], seen["writer"]["resumed"]
    assert paused["types"][0] == "RUN_STARTED" and paused["types"][-1] == "RUN_FINISHED"
    interrupt = paused["interrupt"]
    assert (interrupt["reason"], interrupt["metadata"]) == (
        "approval",
        {"toolName": "publish", "input": {"title": "rye"}},
    )
    assert interrupt["id"].startswith("cp_") and interrupt["responseSchema"]["required"] == ["approved"]
    assert resumed["result"] == "Published." and resumed["pending"] == []
    assert resumed["types"][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    manager = seen["manager"]
    assert "STATE_SNAPSHOT" in manager["types"]
    state = manager["stateAfterFirst"]  # the client applied bread's snapshots to its state
    assert state["plan"] == "rye" and state["subagent"]["status"] == "completed"
    assert state["task"]["taskId"] == "word-count"  # bread's key won over the client's
    # The second run sent the client's state as it then was: the thread keeps it.
    assert http.get(f"{server.url}/sessions/{manager['thread']}").json()["state"] == state


@contextmanager
def serving_translated(crumbs: list[dict]) -> Iterator[str]:
    """A server whose every POST answers the AG-UI events of ``crumbs``, translated for the
    request's thread and run: a stream as the bridge writes it, without a run to kill."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            transformer = create_ag_ui_transformer(asked["threadId"], asked["runId"])
            body = "".join(encode(event) for crumb in crumbs for event in transformer(crumb)).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ag-ui/run"
    finally:
        server.shutdown()
        server.server_close()


def test_http_agent_holds_a_carried_on_run_s_lost_text_and_its_new_call_s_as_two_messages(node_clients):
    with serving_translated(CARRIED_ON) as url:
        done = subprocess.run(["node", "run_stream.mjs", url], cwd=node_clients, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    seen = json.loads(done.stdout)
    assert seen["types"].count("TEXT_MESSAGE_START") == 2 and seen["types"][-1] == "RUN_FINISHED"
    said = [(m["id"], m["content"]) for m in seen["messages"] if m["role"] == "assistant"]
    assert [content for _, content in said] == ["Lost", "Found"] and said[0][0] != said[1][0]
