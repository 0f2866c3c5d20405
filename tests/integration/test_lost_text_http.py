"""The Python client over HTTP against a real gunicorn server whose worker is SIGKILLed while
the model streams: the run is carried on by the respawned worker, and the text the client ends
with is the log's (the text streamed before the kill, never logged, is dropped)."""

from __future__ import annotations

from bread_sync.client import create_agent_client
from bread_sync.client.http import transport
from bread_sync.crumbs import TEXT_DELTA

from .client import log_of, text_of

LOST_TEXT = "tests.integration.lost_text_config:config"


def test_the_python_client_drops_the_text_a_killed_worker_streamed_and_ends_with_the_log_s(
    http, start_server, tmp_path
):
    marker, seen = tmp_path / "kill-once", tmp_path / "text-seen"
    marker.write_text("")
    env = {"BREAD_CONFIG": LOST_TEXT, "BREAD_LEASE_SECONDS": "2", "KILL_MARKER": str(marker), "TEXT_SEEN": str(seen)}
    server = start_server("teller", env=env)
    streamed = []
    with create_agent_client(transport(server.url, heartbeat_timeout=10)) as client:
        run = client.thread().send("teller", "go")
        for frame in run:
            if frame.type == TEXT_DELTA:
                streamed.append(frame.crumb["delta"])
                if frame.crumb["delta"] == "st ":
                    seen.write_text("")  # the worker may die now: this text was never logged
        outcome = run.outcome()
    log = log_of(http, server.url, run.run_id, "sse")
    assert not marker.exists(), "the worker was never killed"
    assert [e.type for e in log].count("agent:run:continued") == 1
    assert outcome.status == "completed"
    assert "".join(streamed).startswith("Hello. Lost Lost ")  # the lost text, then the call made again
    assert outcome.text == text_of(log) == "Hello. Lost Found again."
