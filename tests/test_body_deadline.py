"""The request body's deadline (server/deadline.py) outside gunicorn: a connection's socket handed
over as gunicorn hands it (``gunicorn.socket``) is cut off when the body stalls; the end to end
case under gunicorn is tests/integration/test_hostile_input.py."""

from __future__ import annotations

import socket

import pytest
from flask import Flask

from bread_sync.server import BreadSync
from bread_sync.server.deadline import BodyDeadline

#: Long enough to never pass on a busy machine unless the body truly stalls.
BOUND_SECONDS = 10.0


@pytest.fixture
def connection():
    """The server's end of a connection whose client sends nothing, and the client's end."""
    server, client = socket.socketpair()
    server.settimeout(BOUND_SECONDS)  # a deadline that never fires fails the test, not hangs it
    yield server, client
    server.close()
    client.close()


def test_a_stalled_read_is_cut_off_at_the_deadline_and_says_so(connection):
    server, _ = connection
    with BodyDeadline({"gunicorn.socket": server}, 0.05) as deadline:
        assert server.recv(1) == b""  # the read side shut: the waiting read returns
    assert deadline.passed


def test_without_a_socket_or_seconds_there_is_no_deadline(connection):
    server, client = connection
    for environ, seconds in (({}, 0.05), ({"gunicorn.socket": server}, None)):
        with BodyDeadline(environ, seconds) as deadline:
            client.sendall(b"x")
            assert server.recv(1) == b"x"
        assert not deadline.passed


def test_the_body_timeout_is_a_setting_of_the_app_that_a_stalled_body_meets(make_bread, connection):
    server, _ = connection
    app = Flask(__name__)
    app.config["BREAD_SYNC_BODY_TIMEOUT_SECONDS"] = 0.05
    BreadSync(app, make_bread(transport="http-sse"))
    with server.makefile("rb") as body:  # the client promises 20 bytes and sends none
        handed_over = {"wsgi.input": body, "CONTENT_LENGTH": "20", "gunicorn.socket": server}
        stalled = app.test_client().post("/agents/echo/run", environ_overrides=handed_over)
    assert stalled.status_code == 408 and stalled.get_json()["error"]["code"] == "REQUEST_TIMEOUT"
    assert "0.05 s" in stalled.get_json()["error"]["message"]


def test_the_body_timeout_defaults_to_the_config(make_bread):
    app = Flask(__name__)
    BreadSync(app, make_bread(transport="http-sse", server={"body_timeout_seconds": 7.5}))
    assert app.config["BREAD_SYNC_BODY_TIMEOUT_SECONDS"] == 7.5
