"""What every bread route checks first: a loopback Host (no auth configured) and the body limit."""

from __future__ import annotations

import json
import uuid

import pytest

from .client import assert_error_body, fetch, run

FORBIDDEN_HOSTS = ["evil.example", "localhost.", "127.1", "0.0.0.0", "[::]", "::"]
LOOPBACK_HOSTS = ["localhost:3000", "127.0.0.1", "[::1]:8080", "localhost", "[::1]"]
LIMIT = 1000


def forbidden(response) -> None:
    assert response.status == 403, (response.status, response.text)
    assert response.json() == {"error": "Forbidden"}


@pytest.mark.parametrize("host", FORBIDDEN_HOSTS)
def test_a_host_that_is_not_loopback_is_403(http, server, wire, host):
    run_id = f"run-guard-{uuid.uuid4().hex}"
    headers = {"Host": host}

    forbidden(fetch(http, "GET", f"{server.url}/agents", wire, headers=headers))
    forbidden(fetch(http, "GET", f"{server.url}/agents/echo", wire, headers=headers))
    forbidden(fetch(http, "POST", f"{server.url}/agents/echo/run", wire, headers=headers, body={"runId": run_id}))
    forbidden(fetch(http, "GET", f"{server.url}/runs/{run_id}/stream", wire, headers=headers))
    forbidden(fetch(http, "POST", f"{server.url}/runs/{run_id}/cancel", wire, headers=headers))
    # The handler did not run: no run was created.
    assert_error_body(http.get(f"{server.url}/runs/{run_id}"), 404, "RUN_NOT_FOUND")


def test_x_forwarded_host_is_ignored(http, server, wire):
    spoofed = {"Host": "evil.example", "X-Forwarded-Host": "localhost"}
    forbidden(fetch(http, "GET", f"{server.url}/agents", wire, headers=spoofed))

    honest = {"Host": "localhost", "X-Forwarded-Host": "evil.example"}
    assert http.get(f"{server.url}/agents", headers=honest).status_code == 200


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_a_loopback_host_is_served(http, server, wire, host):
    listed = http.get(f"{server.url}/agents", headers={"Host": host})
    assert listed.status_code == 200, listed.text
    assert {a["id"] for a in listed.json()} >= {"echo", "writer", "interviewer", "slow"}

    stream = run(http, server.url, "echo", {"input": "hello"}, wire, headers={"Host": host})
    assert stream.status == 200
    assert (stream.last_crumb.type, stream.last_crumb.data["output"]) == ("agent:run:end", "hello")


@pytest.mark.parametrize("host", ["evil.example", "localhost.", "0.0.0.0"])
def test_health_is_served_for_any_host(http, server, wire, host):
    answer = http.get(f"{server.url}/health", headers={"Host": host})

    assert answer.status_code == 200
    assert answer.json() == {"ok": True}


def padded(size: int) -> bytes:
    """A run request of exactly ``size`` bytes: JSON padded with whitespace."""
    body = json.dumps({"input": "hi"}).encode()
    assert len(body) <= size
    return body + b" " * (size - len(body))


def chunks(data: bytes, size: int = 300):
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture
def limited(pool):
    """A server with ``BREAD_MAX_BODY_BYTES=1000`` (SSE)."""
    return pool.limited(LIMIT)


def test_a_body_of_exactly_the_limit_is_served(http, limited):
    stream = fetch(http, "POST", f"{limited.url}/agents/echo/run", "sse", content=padded(LIMIT))

    assert stream.status == 200, stream.text
    assert stream.request_headers["content-length"] == str(LIMIT)
    assert (stream.last_crumb.type, stream.last_crumb.data["output"]) == ("agent:run:end", "hi")


def test_a_body_over_the_limit_is_413(http, limited):
    stream = fetch(http, "POST", f"{limited.url}/agents/echo/run", "sse", content=padded(LIMIT + 1))

    assert stream.request_headers["content-length"] == str(LIMIT + 1)
    assert_error_body(stream, 413, "BODY_TOO_LARGE")
    # The limit is global: a non-streaming route is capped as well.
    cleanup = fetch(http, "POST", f"{limited.url}/sessions/cleanup", "sse", content=b"{}" + b" " * LIMIT)
    assert_error_body(cleanup, 413, "BODY_TOO_LARGE")


def test_a_chunked_upload_over_the_limit_is_413(http, limited):
    stream = fetch(http, "POST", f"{limited.url}/agents/echo/run", "sse", content=chunks(padded(LIMIT + 200)))

    assert "content-length" not in stream.request_headers
    assert stream.request_headers["transfer-encoding"] == "chunked"
    assert_error_body(stream, 413, "BODY_TOO_LARGE")
    assert http.get(f"{limited.url}/agents").status_code == 200


def test_a_chunked_upload_of_exactly_the_limit_is_served(http, limited):
    stream = fetch(http, "POST", f"{limited.url}/agents/echo/run", "sse", content=chunks(padded(LIMIT)))

    assert stream.request_headers["transfer-encoding"] == "chunked"
    assert stream.status == 200, stream.text
    assert stream.last_crumb.data["output"] == "hi"
