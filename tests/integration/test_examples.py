"""The examples print what they say, against a real server."""

from __future__ import annotations

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
