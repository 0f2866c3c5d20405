"""The examples print what they say, against a real server."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from .servers import MAIN


def run_example(name: str, server) -> list[str]:
    """The lines an example prints against ``server``; it must succeed and print no warning."""
    env = {"BREAD_URL": server.url, "PATH": ""}
    done = subprocess.run([sys.executable, str(MAIN / "examples" / name)], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


def test_the_ag_ui_example_runs_the_writer_through_its_interrupt(pool):
    lines = run_example("ag_ui_writer.py", pool.primary("http-sse"))
    assert lines[0] == "RUN_STARTED" and "TOOL_CALL_START" in lines
    interrupt = lines.index(next(line for line in lines if line.startswith("interrupt: ")))
    assert lines[interrupt - 1] == "RUN_FINISHED" and "publish" in lines[interrupt]
    assert lines[interrupt + 1] == "RUN_STARTED" and lines[-1] == "RUN_FINISHED"
    assert any(line.startswith("TEXT_MESSAGE_CONTENT") and "Published." in line for line in lines[interrupt:])


def test_the_mcp_example_lists_calls_follows_progress_and_resumes(pool):
    lines = run_example("mcp_tools.py", pool.primary("http-sse"))
    assert lines[0] == "protocol 2025-11-25, server bread_sync"
    assert lines[1].startswith("tools: agent_echo ") and lines[1].endswith(" task_word-count resume")
    assert lines[2:4] == ["agent_echo: hello from MCP", "task_word-count: {'words': 3}"]
    progress = [line for line in lines if line.startswith("  progress ")]
    assert progress[0] == "  progress 1: agent:run:start" and progress[-1].endswith(": agent:run:end")
    assert "agent_slow: tick 1 tick 2 tick 3 " in lines
    assert lines[-2:] == ["agent_writer: paused, approval of publish {'title': 'sourdough'}", "resume: Published."]


def test_the_a2a_example_streams_echo_and_cancels_slow(pool):
    lines = run_example("a2a_client.py", pool.primary("http-sse"))
    assert lines[0].startswith("task run_") and lines[0].endswith("TASK_STATE_WORKING")
    texts = [ast.literal_eval(line[len("artifact ") :]) for line in lines if line.startswith("artifact ")]
    assert "".join(texts) == "hello over A2Atick 1 "  # echo's text, then the one tick before the cancel
    assert "get: TASK_STATE_COMPLETED" in lines and "cancel: TASK_STATE_CANCELED" in lines
    assert lines[-1] == "status TASK_STATE_CANCELED"


def test_the_openai_example_chats_streams_and_answers_the_writer_s_pause(pool):
    lines = run_example("openai_client.py", pool.primary("http-sse"))
    assert lines == [
        "models: echo writer interviewer slow counter manager artist word-counter",
        "chat: hello from the OpenAI client",
        "stream: one |two |three",
        "responses: a response",
        "writer: Drafting a post about sourdough. / Approve the call of publish? Answer yes or no.",
        "bread: paused approval publish",
        "answered: Published.",
    ]


def test_the_ai_sdk_example_chats_answers_the_writer_s_approval_and_stops_slow(pool, node_clients):
    # Run from tests/node, where the pinned `ai` is installed, as the README runs it beside its own.
    script = node_clients / "example_ai_sdk_chat.mjs"
    script.write_bytes((MAIN / "examples" / "ai_sdk_chat.mjs").read_bytes())
    try:
        done = subprocess.run(["node", script.name], cwd=node_clients, capture_output=True, text=True, timeout=60,
                              env={"BREAD_URL": pool.primary("http-sse").url, "PATH": os.environ["PATH"]})  # fmt: skip
    finally:
        script.unlink()
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == [
        "echo: hello from the AI SDK",
        'writer: Drafting a post about sourdough. / approval-requested {"title":"sourdough"}',
        'answered: Published. / output-available {"published":true,"title":"sourdough"}',
        "stopped: cancelled",
    ]
