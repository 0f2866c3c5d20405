"""Hostile ids, paths and Host headers, sent byte for byte to a real gunicorn server (the
rest of the hostile input is in test_hostile_input.py): path tricks get answers in the
documented shape, request lines HTTP does not allow never reach the app, ids in bodies are
checked before they reach a header, and each spelling of the Host header gets what
http-api.md says."""

from __future__ import annotations

import pytest

from ..waiting import wait_for
from .client import assert_error_body, fetch
from .test_bad_requests import assert_no_leak
from .test_hostile_input import raw_request, serves, sse  # noqa: F401 - the sse fixture

#: http-api.md's loopback spellings, and some that only look like one.
LOOPBACK = ["localhost", "LOCALHOST", "127.0.0.1", "127.0.0.1:3000", "::1", "[::1]", "[::1]:8080", "localhost:1"]
NOT_LOOPBACK = [
    "localhost.", "127.1", "0.0.0.0", "::", "[::]", "localhost:3000:3000", "127.0.0.1.evil.example",
    "localhost@evil.example", "evil.example#localhost", "127.0.0.2", "[::1]x", "localhost:", "",
]  # fmt: skip


# -- ids and paths ---------------------------------------------------------------------------------

#: Paths the app answers itself (404 in its shape, or the route's own answer).
APP_PATHS = [
    "/runs/..%2F..%2Fbread.db/stream", "/files/..%2F..%2Fbread.db", "/files/%2e%2e%2fbread.db", "/files/..",
    "/agents/%00", "/agents/%2e%2e", "/sessions/%F0%9F%8D%9E", "/sessions/%FF%FE", "/loops/%00%00",
    "/tasks/..%5C..%5Cwin.ini", "/runs/%0d%0aSet-Cookie:%20x=1", "/runs/" + "a" * 3000, "/../../etc/passwd",
    "/agents/echo/../../health", "/static/..%2F..%2Fserver%2Fguard.py", "//agents", "/agents/",
]  # fmt: skip
#: Paths gunicorn refuses before the app sees them (a request line HTTP does not allow).
REFUSED_PATHS = [b"/agents/\x00", "/sessions/ünï".encode(), b"/runs/\xff/stream", b"/agents/" + b"a" * 5000,
                 b"/agents/a b"]  # fmt: skip


@pytest.mark.parametrize("path", APP_PATHS)
def test_a_path_trick_gets_an_answer_in_the_documented_shape(sse, path):  # noqa: F811
    answer = raw_request(sse, f"GET {path} HTTP/1.1\r\nHost: localhost".encode())

    assert answer.status in (200, 204, 400, 404), (answer.status, answer.body[:200])
    assert_no_leak(answer.body)
    if answer.status >= 400:
        assert list(answer.json()) == ["error"] and sorted(answer.json()["error"]) == ["code", "message"]
    assert "Set-Cookie" not in answer.headers


def test_a_request_line_http_does_not_allow_is_refused_before_the_app(sse):  # noqa: F811
    for path in REFUSED_PATHS:
        answer = raw_request(sse, b"GET " + path + b" HTTP/1.1\r\nHost: localhost")
        assert answer.status in (400, 414), (path[:40], answer.status)
        assert_no_leak(answer.body)
    serves(sse)


def test_an_id_in_a_body_is_checked_before_it_reaches_a_header(http, sse):  # noqa: F811
    for run_id in ["a\r\nSet-Cookie: x=1", "ü", "a/b", "a" * 201, "", " ", "a\x00", "a?b", "a#b", "a%2Fb"]:
        answer = fetch(http, "POST", f"{sse.url}/agents/echo/run", "sse", body={"input": "x", "runId": run_id})
        assert_error_body(answer, 400, "INVALID_REQUEST")


# -- the Host header --------------------------------------------------------------------------------


@pytest.mark.parametrize("host", LOOPBACK)
def test_each_loopback_spelling_is_served(sse, host):  # noqa: F811
    answer = raw_request(sse, f"GET /agents HTTP/1.1\r\nHost: {host}".encode())
    assert answer.status == 200, (host, answer.body[:200])


@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_each_spelling_that_is_not_loopback_is_403(sse, host):  # noqa: F811
    answer = raw_request(sse, f"GET /agents HTTP/1.1\r\nHost: {host}".encode())
    assert (answer.status, answer.json()) == (403, {"error": "Forbidden"}), host


def test_no_host_or_two_hosts_is_refused(sse):  # noqa: F811
    no_host = raw_request(sse, b"GET /agents HTTP/1.0")
    two_hosts = raw_request(sse, b"GET /agents HTTP/1.1\r\nHost: evil.example\r\nHost: localhost")
    forwarded = raw_request(sse, b"GET /agents HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Host: localhost"
                                 b"\r\nForwarded: host=localhost\r\nX-Host: localhost")  # fmt: skip

    assert (no_host.status, no_host.json()) == (403, {"error": "Forbidden"})
    assert two_hosts.status == 400  # gunicorn refuses a repeated Host before the app sees it
    assert_no_leak(two_hosts.body)
    assert (forwarded.status, forwarded.json()) == (403, {"error": "Forbidden"})
    wait_for(lambda: serves(sse) is None, 2, "the server to serve again")


def test_a_run_id_of_dots_only_is_refused(http, sse):  # noqa: F811
    # A client resolves the dot segments of /runs/../stream to /stream, so such a run could
    # never be tailed or cancelled. The pattern is the OpenAPI owner's (bread_sync/server/schemas.py).
    for run_id in ["..", "."]:
        answer = fetch(http, "POST", f"{sse.url}/agents/echo/run", "sse", body={"input": "x", "runId": run_id})
        assert_error_body(answer, 400, "INVALID_REQUEST")
