"""The cross-site rule, in process: a browser's request for a page of another site is refused
(403) on every bread route, auth on or off, before its body is read; clients that are not
browsers send no Origin and no Sec-Fetch-Site and are never refused by it. The real-server and
browser tests: integration/test_hostile_input.py, browser/test_cross_site_browser.py."""

import logging

import pytest
from flask import Flask

from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin, create_server
from bread_sync.server.cross_site import (
    FETCH_SITE_RULE,
    MAX_LOGGED_REFUSALS,
    ORIGIN_RULE,
    REFUSAL_LOG_PERIOD_SECONDS,
    Refusal,
    RefusalLog,
    refused_by,
)

KEY = "alice-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
LISTED = "https://app.example.com"
#: What a browser sends for a page of each kind of origin, besides the Host it addressed.
CROSS_SITE = [
    {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://localhost:9999", "Sec-Fetch-Site": "same-site"},  # another loopback port
    {"Origin": "null", "Sec-Fetch-Site": "cross-site"},  # a sandboxed frame, a data: page
    {"Origin": "https://evil.example"},  # a browser without Sec-Fetch-* headers
    {"Sec-Fetch-Site": "cross-site"},  # a write with no Origin at all
    {"Sec-Fetch-Site": "same-site"},
]
#: Every route that writes, the bridges' included: (method, path, body).
WRITES = [
    ("POST", "/agents/echo/run", b'{"input": "pwned", "session": "attacker"}'),
    ("POST", "/pipelines/draft-then-echo/run", b'{"input": {"topic": "t"}}'),
    ("POST", "/sessions/cleanup", b"{}"),
    ("DELETE", "/sessions/victim", b""),
    ("POST", "/resume/cp_missing", b'{"response": {"approved": true}}'),
    ("POST", "/runs/run-x/cancel", b""),
    ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}'),
    ("POST", "/a2a", b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}'),
    ("POST", "/ag-ui/run", b"{}"),
    (
        "POST",
        "/ai-sdk/echo",
        b'{"id": "attacker", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]}',
    ),
    ("POST", "/ai-sdk/slow/victim/stop", b""),
]


@pytest.fixture
def make_client(make_bread):
    def make(auth=False, origins=()):
        bridges = demo_config().plugins
        plugins = [auth_plugin(api_keys={"alice": KEY}, env_var=None), *bridges] if auth else bridges
        server = {"cors_origins": list(origins), "authorize": (lambda identity, action, args: True)}
        return create_server(make_bread(transport="http-sse", plugins=plugins, server=server)).test_client()

    return make


def with_a_session(client, headers=None):
    client.post("/agents/echo/run", json={"input": "mine", "session": "victim"}, headers=headers or {}).close()
    assert "victim" in sessions(client, headers)


def sessions(client, headers=None):
    return {s["id"] for s in client.get("/sessions", headers=headers or {}).get_json()}


@pytest.mark.parametrize("auth", [False, True], ids=["auth-off", "auth-on"])
@pytest.mark.parametrize("sent", CROSS_SITE)
@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_cross_site_write_is_403_and_does_nothing(make_client, auth, sent, method, path, body):
    client = make_client(auth=auth)
    credential = AUTH if auth else {}
    with_a_session(client, credential)
    headers = {"Host": "localhost:3000", "Content-Type": "text/plain", **credential, **sent}

    answer = client.open(path, method=method, data=body, headers=headers)

    assert answer.status_code == 403 and answer.get_json() == {"error": "Forbidden"}
    assert sessions(client, credential) == {"victim"}  # nothing deleted, no run of the attacker's


def test_the_body_of_a_refused_request_is_never_parsed(make_client):
    answer = make_client().post("/agents/echo/run", data=b"{not json", headers={"Origin": "https://evil.example"})
    assert answer.status_code == 403  # not the 400 a parsed body would give


@pytest.mark.parametrize("sent", CROSS_SITE[:4])
def test_a_cross_origin_read_is_403_too(make_client, sent):
    assert make_client().get("/sessions", headers=sent).status_code == 403


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_get_without_origin_is_left_to_the_route(make_client, site):
    """An <img> of a file, a link followed: no Origin; the route's own rules decide."""
    assert make_client().get("/agents", headers={"Sec-Fetch-Site": site}).status_code == 200


@pytest.mark.parametrize(
    "sent",
    [
        {},  # curl, the SDK clients, any client that is not a browser
        {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-origin"},  # the playground
        {"Origin": "http://localhost:3000"},  # the server's own origin: its host is the Host sent
        {"Origin": "https://localhost:3000"},  # the same, behind a proxy that ends TLS
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # typed into the address bar
    ],
)
def test_the_servers_own_pages_and_other_clients_may_write(make_client, sent):
    client = make_client()
    answer = client.post("/agents/echo/run", json={"input": "hi"}, headers={"Host": "localhost:3000", **sent})
    assert answer.status_code == 200
    assert b'"output":"hi"' in answer.data


@pytest.mark.parametrize(("origins", "auth"), [([LISTED], False), ([LISTED], True), (["*"], True)])
def test_an_allow_listed_origin_may_write(make_client, origins, auth):
    client = make_client(auth=auth, origins=origins)
    headers = {"Origin": LISTED, "Sec-Fetch-Site": "cross-site", **(AUTH if auth else {})}
    answer = client.post("/agents/echo/run", json={"input": "hi"}, headers=headers)
    assert answer.status_code == 200 and answer.headers["Access-Control-Allow-Origin"] in (LISTED, "*")


def test_health_is_never_refused(make_client):
    assert make_client().get("/health", headers={"Origin": "https://evil.example"}).status_code == 200


def refusal_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("cross-site rule")]


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ({"Origin": "http://localhost:5173"}, ["(Origin)", "'http://localhost:5173'", "cors_origins"]),  # Vite's
        (
            {"Origin": "http://127.0.0.1:3000"},
            ["(Origin)", "'http://127.0.0.1:3000'", "'localhost:3000'", "cors_origins"],
        ),
        ({"Sec-Fetch-Site": "same-site"}, ["(Sec-Fetch-Site)", "'same-site'", "no Origin"]),
    ],
)
def test_a_refusal_is_logged_once_with_what_would_allow_it(make_client, caplog, sent, said):
    """The 403 says nothing (the spec fixes its body): the operator reads why in the log, once."""
    client = make_client()
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        for path in ("/agents/echo/run", "/sessions/cleanup", "/agents/echo/run"):
            answer = client.post(path, data=b"{}", headers={"Host": "localhost:3000", **sent})
            assert answer.status_code == 403 and answer.data == b'{"error":"Forbidden"}\n'
    [warning] = refusal_warnings(caplog)
    assert all(part in warning for part in said), warning


def test_an_origin_no_setting_allows_is_not_pointed_to_cors_origins(make_client, caplog):
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        make_client().post("/agents/echo/run", data=b"{}", headers={"Origin": "null"})
    [warning] = refusal_warnings(caplog)
    assert "no setting allows such an origin" in warning and "ServerSettings" not in warning


def test_a_flood_of_origins_logs_a_bounded_number_of_lines(make_client, caplog):
    client = make_client()
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        for n in range(MAX_LOGGED_REFUSALS + 20):
            answer = client.post("/agents/echo/run", data=b"{}", headers={"Origin": f"https://evil-{n}.example"})
            assert answer.status_code == 403
    warnings = refusal_warnings(caplog)
    assert len(warnings) == MAX_LOGGED_REFUSALS
    assert "further refusals are not" in warnings[-1]


def test_a_flood_silences_the_log_for_an_hour_at_most(make_client, caplog):
    """A scanner's origins use up the hour's budget; the operator's own misconfigured dev origin,
    refused after, is told once the hour is up."""
    client = make_client()
    now = [1000.0]
    client.application.extensions["bread_sync"].cross_site_refusals = RefusalLog(clock=lambda: now[0])
    own = {"Origin": "http://localhost:5173"}
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        for n in range(MAX_LOGGED_REFUSALS):
            client.post("/agents/echo/run", data=b"{}", headers={"Origin": f"https://scanner-{n}.example"})
        now[0] += REFUSAL_LOG_PERIOD_SECONDS - 1
        assert client.post("/agents/echo/run", data=b"{}", headers=own).status_code == 403
        assert len(refusal_warnings(caplog)) == MAX_LOGGED_REFUSALS
        now[0] += 1
        assert client.post("/agents/echo/run", data=b"{}", headers=own).status_code == 403
        client.post("/agents/echo/run", data=b"{}", headers=own)
    warnings = refusal_warnings(caplog)
    assert len(warnings) == MAX_LOGGED_REFUSALS + 1 and "'http://localhost:5173'" in warnings[-1]


@pytest.mark.parametrize(
    ("sent", "refusal"),
    [
        ({"Origin": "https://evil.example"}, Refusal(ORIGIN_RULE, "https://evil.example")),
        ({"Sec-Fetch-Site": "same-site"}, Refusal(FETCH_SITE_RULE, "same-site")),
        ({"Origin": "http://localhost:3000", "Sec-Fetch-Site": "cross-site"}, None),  # its own, by Host
    ],
)
def test_a_refusal_names_its_rule_and_the_header_it_read(sent, refusal):
    headers = {"Host": "localhost:3000", **sent}
    with Flask(__name__).test_request_context("/runs", method="POST", headers=headers):
        assert refused_by([]) == refusal


def test_a_method_is_quoted_in_the_log(caplog):
    """The method, like the path and the headers, is the client's to write: quoted, its
    terminal escapes never reach the terminal that shows the log."""
    refusal = Refusal(ORIGIN_RULE, "https://evil.example")
    with Flask(__name__).test_request_context("/runs", method="\x1b[2JPOST"):
        with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
            RefusalLog().tell(refusal)
    [warning] = refusal_warnings(caplog)
    assert "\x1b" not in warning and "'\\x1b[2JPOST'" in warning


def test_a_long_origin_is_quoted_short(make_client, caplog):
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        make_client().post("/agents/echo/run", data=b"{}", headers={"Origin": "https://" + "a" * 6000 + ".example"})
    [warning] = refusal_warnings(caplog)
    assert len(warning) < 1000


def test_an_allowed_request_logs_nothing(make_client, caplog):
    client = make_client(origins=[LISTED])
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        client.post("/agents/echo/run", json={"input": "hi"}, headers={"Origin": LISTED}).close()
        client.post("/agents/echo/run", json={"input": "hi"}, headers={"Sec-Fetch-Site": "same-origin"}).close()
    assert refusal_warnings(caplog) == []
