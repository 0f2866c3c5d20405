"""``bread-sync invoke|resume|chat|tail --url`` against real gunicorn servers, the same output
and exit codes as in-process; ``tail``; a connection cut during a long run; ``flask bread``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.test_cli import CLI, DEADLINE, cli, pause_line
from tests.test_cli import env as cli_env

from .tcp_proxy import TCPProxy

env = cli_env  # the CLI tests' child environment, as this module's fixture

SLOW = '{"count": 40, "delayMs": 40}'
SLOW_TEXT = "".join(f"tick {n} " for n in range(1, 41))


def test_invoke_over_http_prints_what_in_process_prints(env, server):
    local = cli(env, "invoke", "echo", "hello over there")
    remote = cli(env, "invoke", "--url", server.url, "echo", "hello over there")
    assert (remote.returncode, remote.stdout) == (0, local.stdout) and local.returncode == 0


def test_a_pause_over_http_is_reported_and_resumed_the_same_way(env, server):
    paused = cli({**env, "BREAD_URL": server.url}, "invoke", "writer", '{"topic": "rye"}')
    assert paused.returncode == 3, paused.stderr
    checkpoint = pause_line(paused)
    assert (checkpoint["kind"], checkpoint["toolName"]) == ("approval", "publish")
    resumed = cli(env, "resume", "--url", server.url, checkpoint["checkpointId"], '{"approved": true}')
    assert resumed.returncode == 0 and "Published." in resumed.stdout, resumed.stderr
    again = cli(env, "resume", "--url", server.url, checkpoint["checkpointId"], '{"approved": true}')
    assert again.returncode == 1 and "error: CHECKPOINT_ALREADY_RESUMED:" in again.stderr


def test_refusals_over_http_are_the_same_lines(env, server):
    unknown = cli(env, "invoke", "--url", server.url, "nope")
    assert unknown.returncode == 1 and "error: AGENT_NOT_FOUND:" in unknown.stderr
    assert "agents: artist, counter, echo, interviewer, manager, slow, word-counter, writer" in unknown.stderr
    invalid = cli(env, "invoke", "--url", server.url, "counter", '{"until": "many"}')
    assert invalid.returncode == 1 and "error: INPUT_INVALID:" in invalid.stderr


def test_chat_over_http_keeps_one_session(env, server):
    result = cli(env, "chat", "--url", server.url, "echo", stdin_text="one\ntwo\n/exit\n")
    assert result.returncode == 0 and result.stdout.split() == ["one", "two"], result.stderr


def run_id_of(server, agent, body):
    from bread_sync.client import create_agent_client, http

    with create_agent_client(http.transport(server.url)) as client:
        run = client.thread().send(agent, body)
        outcome = run.wait_until_idle()
        return run.run_id, outcome


def test_tail_follows_a_run_to_its_end_its_error_or_its_pause(env, server):
    done, _ = run_id_of(server, "echo", "tail me")
    ended = cli(env, "tail", "--url", server.url, done)
    assert ended.returncode == 0 and ended.stdout == "tail me\n", ended.stderr
    after = cli(env, "tail", "--url", server.url, done, "--after", "3")
    assert after.returncode == 0 and after.stdout == "", after.stderr
    paused, outcome = run_id_of(server, "writer", {"topic": "tails"})
    at_pause = cli(env, "tail", "--url", server.url, paused)
    assert at_pause.returncode == 3 and pause_line(at_pause)["checkpointId"] == outcome.pause["checkpointId"]
    missing = cli(env, "tail", "--url", server.url, "run_missing")
    assert missing.returncode == 1 and "error: RUN_NOT_FOUND:" in missing.stderr


def test_tail_in_process_reads_a_run_of_a_server_sharing_the_store(env, server):
    done, _ = run_id_of(server, "echo", "shared store")
    result = cli({**env, "BREAD_DB": str(server.db)}, "tail", done)
    assert result.returncode == 0 and result.stdout == "shared store\n", result.stderr


def test_a_connection_cut_during_a_long_run_is_resumed_unnoticed(env, server):
    assert_prints_the_slow_text_once_across_a_cut(env, server, "invoke", "slow", SLOW)


def assert_prints_the_slow_text_once_across_a_cut(env, server, *command):
    """Run the CLI ``command`` (with ``--url`` through a proxy) on the slow agent's run, cut
    the network inside its text; it must reconnect unnoticed and print each tick once."""
    proxy = TCPProxy(server.port)
    try:
        proc = subprocess.Popen([*CLI, command[0], "--url", proxy.url, *command[1:]], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        seen = read_until(proc, b"tick 5 ")
        assert proxy.cut() >= 1
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        proxy.close()
    assert proc.returncode == 0, err
    assert (seen + out).decode() == SLOW_TEXT + "\n"
    assert proxy.connections >= 2


def test_tail_cut_inside_a_segment_prints_the_text_once(env, server):
    """``tail --url`` of a running run, its connection cut by the network inside the run's text:
    it reconnects after its last seq and prints each tick once."""
    from bread_sync.client import create_agent_client, http

    with create_agent_client(http.transport(server.url)) as client:
        run = client.thread().send("slow", SLOW)
        run_id = run.run_id
        run.close()  # the run goes on, driven by the server
    assert_prints_the_slow_text_once_across_a_cut(env, server, "tail", run_id)


def read_until(proc, marker):
    """What ``proc`` printed up to and including ``marker``, read as it comes."""
    seen = b""
    deadline = time.monotonic() + DEADLINE
    while marker not in seen:
        assert time.monotonic() < deadline, seen
        seen += os.read(proc.stdout.fileno(), 4096)
    return seen


FLASK_APP = """
from flask import Flask
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.server.extension import BreadSync

app = Flask(__name__)
BreadSync(app, create_bread(config()))
"""


@pytest.mark.parametrize("wire", ["sse"])
def test_flask_bread_has_the_same_commands(env, tmp_path, server):
    (tmp_path / "embedding.py").write_text(FLASK_APP)
    flask = [sys.executable, "-m", "flask", "--app", "embedding", "bread"]

    def run(*args, **options):
        return subprocess.run([*flask, *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=DEADLINE, **options)  # fmt: skip

    assert run("invoke", "echo", "embedded").stdout == "embedded\n"
    paused = run("invoke", "writer", '{"topic": "flask"}')
    assert paused.returncode == 3, paused.stderr
    checkpoint = json.loads(paused.stdout.strip().splitlines()[-1])["checkpointId"]
    resumed = run("resume", checkpoint, '{"approved": true}')
    assert resumed.returncode == 0 and "Published." in resumed.stdout, resumed.stderr
    remote = run("invoke", "--url", server.url, "echo", "from a server")
    assert (remote.returncode, remote.stdout) == (0, "from a server\n"), remote.stderr
    gc = run("gc", "--older-than", "30", "--dry-run")
    assert gc.returncode == 0 and json.loads(gc.stdout)["dryRun"] is True, gc.stderr
    help_text = run("--help").stdout
    assert all(name in help_text for name in ("invoke", "resume", "chat", "tail", "gc"))


def hint_of(result):
    line = next(line for line in result.stderr.splitlines() if line.startswith("paused: continue with "))
    return line.removeprefix("paused: continue with ")


def test_a_pause_over_http_hints_a_resume_that_reaches_the_same_server(env, server):
    paused = cli(env, "invoke", "--url", server.url, "--api-key", "secret-xyz", "writer", '{"topic": "rye"}')
    assert paused.returncode == 3, paused.stderr
    hint = hint_of(paused)
    assert hint.endswith(f' --url {server.url} --api-key "$BREAD_API_KEY"') and "secret-xyz" not in paused.stderr
    # The hint as a shell runs it, with the key where it says to keep it.
    command = ["bash", "-c", hint.replace("bread-sync", " ".join(CLI), 1)]
    resumed = subprocess.run(command, env={**env, "BREAD_API_KEY": "secret-xyz"}, capture_output=True, text=True,
                             timeout=DEADLINE)  # fmt: skip
    assert resumed.returncode == 0 and "Published." in resumed.stdout, resumed.stderr
    from_env = cli({**env, "BREAD_API_KEY": "secret-xyz"}, "invoke", "--url", server.url, "writer", '{"topic": "x"}')
    assert hint_of(from_env).endswith(f" --url {server.url}")  # the key is found in the environment again
