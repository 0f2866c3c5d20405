"""The examples print what they say, against a real server."""

from __future__ import annotations

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
