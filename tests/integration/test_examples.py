"""The examples print what they say, against a real server."""

from __future__ import annotations

import ast
import subprocess
import sys

from .servers import MAIN


def test_the_ag_ui_example_runs_the_writer_through_its_interrupt(pool):
    server = pool.primary("http-sse")
    env = {"BREAD_URL": server.url, "PATH": ""}
    done = subprocess.run([sys.executable, str(MAIN / "examples" / "ag_ui_writer.py")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "RUN_STARTED" and "TOOL_CALL_START" in lines
    interrupt = lines.index(next(line for line in lines if line.startswith("interrupt: ")))
    assert lines[interrupt - 1] == "RUN_FINISHED" and "publish" in lines[interrupt]
    assert lines[interrupt + 1] == "RUN_STARTED" and lines[-1] == "RUN_FINISHED"
    assert any(line.startswith("TEXT_MESSAGE_CONTENT") and "Published." in line for line in lines[interrupt:])


def test_the_a2a_example_streams_echo_and_cancels_slow(pool):
    server = pool.primary("http-sse")
    env = {"BREAD_URL": server.url, "PATH": ""}
    done = subprocess.run([sys.executable, str(MAIN / "examples" / "a2a_client.py")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("task run_") and lines[0].endswith("TASK_STATE_WORKING")
    texts = [ast.literal_eval(line[len("artifact ") :]) for line in lines if line.startswith("artifact ")]
    assert "".join(texts) == "hello over A2Atick 1 "  # echo's text, then the one tick before the cancel
    assert "get: TASK_STATE_COMPLETED" in lines and "cancel: TASK_STATE_CANCELED" in lines
    assert lines[-1] == "status TASK_STATE_CANCELED"
