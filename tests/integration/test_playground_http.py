"""The playground against real servers: the passive tail answers an EventSource in SSE whatever
the configured wire, and ``bread-sync start`` and ``dev`` on loopback serve the page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from .client import MEDIA_TYPES, fetch, open_stream, passive_url, pause_writer, run, text_of
from .servers import free_port, wait_until_serving

EVENT_STREAM = {"Accept": "text/event-stream"}
BREAD_SYNC = str(Path(sys.executable).parent / "bread-sync")


def test_an_event_stream_accept_gets_sse_from_either_wire(http, server, wire):
    run_id = run(http, server.url, "echo", {"input": "one two three"}, wire).run_id

    tail = fetch(http, "GET", passive_url(server.url, run_id), "sse", headers=EVENT_STREAM)

    assert (tail.status, tail.media_type) == (200, "text/event-stream")
    assert tail.raw.startswith(b"retry: 3000\n\n")
    assert tail.types == ["retry", "agent:run:start", "text:delta", "agent:run:end"]
    assert text_of(tail.events) == "one two three"


def test_without_an_event_stream_accept_the_tail_speaks_the_configured_wire(http, server, wire):
    run_id = run(http, server.url, "echo", {"input": "one two"}, wire).run_id

    for headers in ({}, {"Accept": "*/*"}, {"Accept": MEDIA_TYPES[wire]}):
        tail = fetch(http, "GET", passive_url(server.url, run_id), wire, headers=headers)
        assert (tail.status, tail.media_type) == (200, MEDIA_TYPES[wire]), headers
        assert [e.type for e in tail.crumbs] == ["agent:run:start", "text:delta", "agent:run:end"]


def test_an_event_stream_tail_starts_after_last_event_id(http, server, wire):
    run_id, _, paused = pause_writer(http, server.url, wire)
    durable = [e.seq for e in paused.crumbs if e.type != "text:delta"]  # [1, 3, 4, 5, 6, 7]

    headers = {**EVENT_STREAM, "Last-Event-ID": str(durable[-3])}
    with open_stream(http, "GET", passive_url(server.url, run_id, after=0), "sse", headers=headers) as tail:
        tail.until(lambda e: e.type == "human:required", "the pause")  # the tail stays open across it

    assert tail.media_type == "text/event-stream"
    assert [e.seq for e in tail.crumbs] == durable[-2:]
    assert [e.type for e in tail.crumbs] == ["tool:call", "human:required"]


@pytest.mark.parametrize("command", [["start", "--workers", "1"], ["dev"]], ids=["start", "dev"])
def test_the_servers_on_loopback_serve_the_page(tmp_path, command):
    port = free_port()
    log = tmp_path / "server.log"
    env = {"PATH": "/usr/bin:/bin", "BREAD_INSTANCE": str(tmp_path / "instance"), "HOME": str(tmp_path)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([BREAD_SYNC, *command, "--port", str(port)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        wait_until_serving(proc, port, log)
        base = f"http://127.0.0.1:{port}"
        page = httpx.get(f"{base}/_bread/", timeout=10)
        assert page.status_code == 200 and "playground.js" in page.text
        root = httpx.get(base, headers={"Accept": "text/html"}, timeout=10)
        assert (root.status_code, root.headers["location"]) == (302, "/_bread/")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the group this test started: dev's reloader child too
        proc.wait(30)


def test_plain_gunicorn_leaves_the_page_off_unless_bread_playground(http, server, start_server):
    assert http.get(f"{server.url}/_bread/").status_code == 404

    on = start_server("playground-on", env={"BREAD_PLAYGROUND": "true"})
    assert http.get(f"{on.url}/_bread/playground.js").status_code == 200
