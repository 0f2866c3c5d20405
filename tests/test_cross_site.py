"""The cross-site rule, in process: a browser's request for a page of another site is refused
(403) on every bread route, auth on or off, before its body is read; clients that are not
browsers send no Origin and no Sec-Fetch-Site and are never refused by it. The real-server and
browser tests: integration/test_cross_site_http.py, browser/test_cross_site_browser.py."""

import pytest

from bread_sync.demo import config as demo_config
from bread_sync.server import auth_plugin, create_server

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
