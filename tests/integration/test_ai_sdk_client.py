"""The AI SDK's own client code, npm's ``ai`` (major version pinned in tests/node/package.json:
the one whose UI message stream has tool approvals), against a real gunicorn gevent server's AI
SDK routes: ``AbstractChat`` (what ``useChat`` wraps) over ``DefaultChatTransport``, and
``readUIMessageStream``. Text, tools run on the server, a file, an approval answered, an input
tool answered, a stream cut and resumed with every part once, a stop, a malformed body."""

from __future__ import annotations

import json
import subprocess

from .tcp_proxy import TCPProxy

#: The slow agent's ticks for a text of "12": the whole text a resumed stream must hold, once.
TWELVE_TICKS = "".join(f"tick {n} " for n in range(1, 13))


def test_the_ai_sdk_chat_reads_every_answer(node_clients, pool):
    server = pool.primary("http-sse")
    done = subprocess.run(["node", "run_ai_sdk.mjs", server.url], cwd=node_clients, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["echo"] == {"status": "ready", "roles": ["user", "assistant"], "text": "hello there",
                            "parts": ["step-start", "text"]}  # fmt: skip
    manager = seen["manager"]
    assert manager["text"] == "hello from the managerEcho said it back; it has 4 words."  # the subagent's text too
    assert [(t["type"], t["state"]) for t in manager["tools"]] == [("tool-echo", "output-available"),
                                                                   ("tool-word-count", "output-available")]  # fmt: skip
    assert manager["tools"][1]["output"] == {"words": 4}
    assert {"type": "data-subagent", "status": "completed"} in manager["data"]
    assert {"type": "data-task", "status": "completed"} in manager["data"]
    assert seen["artist"] == {"text": "Here is a dot.", "mediaType": "image/png", "status": 200, "type": "image/png"}
    paused = seen["writerPaused"]
    assert (paused["state"], paused["input"], paused["count"]) == ("approval-requested", {"title": "rye"}, 2)
    assert paused["approvalId"].startswith("cp_")
    writer = seen["writer"]  # the continuation appended to the message the pause ended
    assert writer["count"] == 2 and writer["text"] == "Drafting a post about rye.Published."
    assert (writer["state"], writer["output"]) == ("output-available", {"published": True, "title": "rye"})
    assert seen["interviewerPaused"] == {"state": "input-available", "input": {"question": "What is your name?"}}
    assert seen["interviewer"]["text"] == "Thanks, Ada."
    resumed = seen["resumed"]
    assert resumed["before"][0] == "start" and resumed["before"].count("text-delta") == 2
    assert (resumed["parts"], resumed["text"]) == (["step-start", "text"], TWELVE_TICKS)  # every part once
    assert seen["afterEnd"] is None  # 204: the chat runs nothing
    assert seen["reloaded"] == {"roles": ["user", "assistant"], "text": TWELVE_TICKS, "status": "ready"}
    stop = seen["stop"]
    assert (stop["status"], stop["body"], stop["run"], stop["again"]) == (200, {"cancelled": stop["runId"]},
                                                                          "cancelled", 204)  # fmt: skip
    assert "INVALID_REQUEST" in seen["invalid"]
    assert seen["errors"] == []


def test_a_chat_cut_inside_its_text_and_resumed_in_place_holds_the_text_once(node_clients, pool):
    """The AI SDK's chat, its connection cut by the network after two ticks, then resumed in
    place (``chat.resumeStream()``, the message it holds half written): one assistant message,
    each tick once."""
    server = pool.primary("http-sse")
    proxy = TCPProxy(server.port)
    try:
        node = subprocess.Popen(["node", "run_ai_sdk_cut.mjs", proxy.url], cwd=node_clients, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert node.stdout.readline() == "cut\n", node.stderr.read()
            assert proxy.cut() >= 1
            out, err = node.communicate("cut\n", timeout=120)
        finally:
            node.kill()
    finally:
        proxy.close()
    assert node.returncode == 0, err
    seen = json.loads(out)
    ticks = "".join(f"tick {n} " for n in range(1, 41))  # 4 s of ticks: the run outlasts the cut
    assert seen["before"]["text"].startswith("tick 1 tick 2 ") and seen["before"]["text"] != ticks
    assert (seen["roles"], seen["text"], seen["status"]) == (["user", "assistant"], ticks, "ready")
