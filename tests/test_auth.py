"""Auth in process: identities, the grant of every named action, stream tokens and CORS."""

import types

import pytest
from flask import jsonify

from bread_sync.server import AUTH_ACTIONS, HTTP_ACTIONS, auth_plugin, create_server, register_http_route
from bread_sync.server.cors import check_origins
from bread_sync.server.openapi import served_methods
from bread_sync.wire import SSEDecoder

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
SECRET = "s" * 32
HEADERS = {"Authorization": f"Bearer {ALICE}"}


class Recorder:
    """An authorizer that records each call and answers ``allow``."""

    def __init__(self, allow=True):
        self.calls, self.allow = [], allow

    def __call__(self, identity, action, args):
        self.calls.append((identity, action, args))
        return self.allow(identity, action, args) if callable(self.allow) else self.allow


@pytest.fixture
def serve(make_bread):
    """An app with the auth plugin (keys alice and bob) and the given authorize."""

    def make(authorize=None, plugins=(), transport="http-sse", **opts):
        opts.setdefault("api_keys", {"alice": ALICE, "bob": BOB})
        opts.setdefault("secret", SECRET)
        bread = make_bread(
            transport=transport, plugins=[auth_plugin(**opts), *plugins], server={"authorize": authorize}
        )
        return create_server(bread)

    return make


def sse(response):
    return [e.json() for e in SSEDecoder().feed(response.data) if e.data]


# -- identity ----------------------------------------------------------------------------------


def test_no_credential_is_401_with_a_bearer_challenge(serve):
    answer = serve(Recorder()).test_client().get("/agents")
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="bread_sync"'
    assert answer.get_json()["error"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("header", [f"Bearer {ALICE}x", "Bearer ", f"Basic {ALICE}", f"Token {ALICE}"])
def test_a_bad_credential_is_401_invalid_token(serve, header):
    answer = serve(Recorder()).test_client().get("/agents", headers={"Authorization": header})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="bread_sync", error="invalid_token"'
    assert set(answer.get_json()["error"]) == {"code", "message"}


def test_keys_from_config_name_the_identity(serve):
    authorize = Recorder()
    client = serve(authorize).test_client()
    assert client.get("/agents", headers={"Authorization": f"bearer  {BOB} "}).status_code == 200
    assert authorize.calls[-1][0] == {"sub": "bob", "kind": "api_key"}


def test_keys_from_the_environment_and_a_list(serve, monkeypatch):
    monkeypatch.setenv("BREAD_API_KEYS", " env-key-1 ,, env-key-2 ")
    authorize = Recorder()
    client = serve(authorize, api_keys=["listed-key"]).test_client()
    for key in ("env-key-1", "env-key-2", "listed-key"):
        assert client.get("/agents", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    subs = [identity["sub"] for identity, _, _ in authorize.calls]
    assert len(set(subs)) == 3 and all(s.startswith("key-") and "key-1" not in s for s in subs)


def test_env_var_none_reads_no_environment(serve, monkeypatch):
    monkeypatch.setenv("BREAD_API_KEYS", "env-key")
    client = serve(Recorder(), api_keys="a,b", env_var=None).test_client()
    assert client.get("/agents", headers={"Authorization": "Bearer env-key"}).status_code == 401
    assert client.get("/agents", headers={"Authorization": "Bearer b"}).status_code == 200


def test_a_custom_resolver_identifies_callers(serve):
    def resolve(request):  # e.g. a JWT check; None when the request carries nothing it accepts
        header = request.headers.get("Authorization", "")
        return (
            {"sub": header.removeprefix("Bearer jwt:"), "scope": "runs"} if header.startswith("Bearer jwt:") else None
        )

    authorize = Recorder()
    client = serve(authorize, api_keys=None, resolve=resolve).test_client()
    assert client.get("/agents", headers={"Authorization": "Bearer jwt:carol"}).status_code == 200
    assert authorize.calls == [({"sub": "carol", "scope": "runs"}, HTTP_ACTIONS.agent_list, {})]
    assert client.get("/agents", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_health_needs_no_credential_and_the_host_rule_is_off(serve):
    client = serve(Recorder()).test_client()
    assert client.get("/health", headers={"Host": "api.example.com"}).get_json() == {"ok": True}
    assert client.get("/agents", headers={"Host": "api.example.com", **HEADERS}).status_code == 200


def test_the_body_limit_comes_before_the_credential_check(make_bread):
    bread = make_bread(transport="http-sse", plugins=[auth_plugin(api_keys=[ALICE])], server={"max_body_bytes": 10})
    answer = create_server(bread).test_client().post("/agents/echo/run", data=b"x" * 11)
    assert answer.status_code == 413


# -- the grant ---------------------------------------------------------------------------------


def test_authorize_receives_identity_action_and_args_a_path_param_winning(serve):
    authorize = Recorder()
    client = serve(authorize).test_client()
    client.get("/agents/echo?id=writer&verbose=1&verbose=2", headers=HEADERS)
    client.get("/sessions?tag=user:1", headers=HEADERS)
    client.get("/runs/run-9/stream?runId=other&after=0", headers=HEADERS)
    assert authorize.calls == [
        ({"sub": "alice", "kind": "api_key"}, "agent.read", {"id": "echo", "verbose": "1"}),
        ({"sub": "alice", "kind": "api_key"}, "session.list", {"tag": "user:1"}),
        ({"sub": "alice", "kind": "api_key"}, "run.stream", {"runId": "run-9", "after": "0"}),
    ]


@pytest.mark.parametrize("answer", [False, None, "yes", 1])
def test_anything_but_true_is_403_and_the_handler_never_runs(serve, answer):
    app = serve(Recorder(allow=answer))
    client = app.test_client()
    denied = client.post("/agents/echo/run", json={"input": "hi", "runId": "run-denied"}, headers=HEADERS)
    assert denied.status_code == 403 and denied.get_json() == {"error": "Forbidden"}
    assert app.extensions["bread_sync"].bread.store.get_run("run-denied") is None


def test_a_denied_delete_deletes_nothing(serve):
    app = serve(Recorder(allow=lambda identity, action, args: action != HTTP_ACTIONS.session_delete))
    client = app.test_client()
    client.post("/agents/echo/run", json={"input": "hi", "session": {"id": "s1"}}, headers=HEADERS).get_data()
    assert client.delete("/sessions/s1", headers=HEADERS).status_code == 403
    assert client.get("/sessions/s1", headers=HEADERS).status_code == 200


def test_no_authorize_function_is_403_for_every_route(serve):
    client = serve(authorize=None).test_client()
    for method, path in [("GET", "/agents"), ("POST", "/agents/echo/run"), ("GET", "/openapi.json")]:
        answer = client.open(path, method=method, json={"input": "x"}, headers=HEADERS)
        assert (answer.status_code, answer.get_json()) == (403, {"error": "Forbidden"})


class ExtrasPlugin:
    name = "extras"

    def __init__(self):
        self.hits = []

    def routes(self, blueprint, bread):
        blueprint.add_url_rule("/raw", endpoint="raw", view_func=self.hit)  # unnamed
        register_http_route(blueprint, "*", "/any/:thing", "extras.any", self.hit)

    def hit(self, thing=None):
        from flask import request

        self.hits.append((request.method, thing))
        return jsonify(method=request.method)


def test_an_unnamed_route_is_403_with_auth_and_served_without(serve, make_bread):
    extras = ExtrasPlugin()
    with_auth = serve(Recorder(), plugins=[extras]).test_client()
    assert with_auth.get("/raw", headers=HEADERS).get_json() == {"error": "Forbidden"}
    assert extras.hits == []
    without = create_server(make_bread(transport="http-sse", plugins=[ExtrasPlugin()])).test_client()
    assert without.get("/raw").get_json() == {"method": "GET"}


def test_a_star_route_takes_every_method_under_its_action(serve):
    extras, authorize = ExtrasPlugin(), Recorder()
    client = serve(authorize, plugins=[extras]).test_client()
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        assert client.open("/any/x", method=method, headers=HEADERS).get_json() == {"method": method}
    assert {action for _, action, _ in authorize.calls} == {"extras.any"}
    assert [m for m, _ in extras.hits] == ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


#: Every route and its action; http-api.md's constants (agentList ...) are HTTP_ACTIONS.agent_list ...
ROUTE_ACTIONS = {
    ("GET", "/agents"): "agent.list",
    ("GET", "/agents/<id>"): "agent.read",
    ("POST", "/agents/<id>/run"): "run.start",
    ("GET", "/pipelines"): "pipeline.list",
    ("POST", "/pipelines/<id>/run"): "pipeline.start",
    ("POST", "/resume/<checkpointId>"): "run.resume",
    ("GET", "/runs/<runId>/stream"): "run.stream",
    ("POST", "/runs/<runId>/cancel"): "run.cancel",
    ("GET", "/sessions"): "session.list",
    ("GET", "/sessions/<id>"): "session.read",
    ("DELETE", "/sessions/<id>"): "session.delete",
    ("POST", "/sessions/cleanup"): "session.cleanup",
    ("GET", "/loops"): "loop.list",
    ("GET", "/loops/<id>"): "loop.read",
    ("GET", "/tasks"): "task.list",
    ("GET", "/tasks/<id>"): "task.read",
    ("GET", "/runs"): "run.list",
    ("GET", "/runs/<runId>"): "run.read",
    ("GET", "/runs/<runId>/wait"): "run.read",  # waiting for a run reads it (issue 27)
    ("GET", "/files/<id>"): "file.read",
    ("POST", "/files"): "file.write",  # issue 31: files as input
    ("GET", "/openapi.json"): "openapi.read",
    ("POST", "/auth/stream-token"): "auth.stream_token",
    ("GET", "/health"): None,
}

#: http-api.md's Core actions table, as it lists them.
REFERENCE = {
    "agentList": ("GET", "/agents"), "agentRead": ("GET", "/agents/<id>"), "runStart": ("POST", "/agents/<id>/run"),
    "pipelineStart": ("POST", "/pipelines/<id>/run"), "runResume": ("POST", "/resume/<checkpointId>"),
    "runStream": ("GET", "/runs/<runId>/stream"), "runCancel": ("POST", "/runs/<runId>/cancel"),
    "sessionList": ("GET", "/sessions"), "sessionRead": ("GET", "/sessions/<id>"),
    "sessionDelete": ("DELETE", "/sessions/<id>"), "sessionCleanup": ("POST", "/sessions/cleanup"),
    "loopList": ("GET", "/loops"), "loopRead": ("GET", "/loops/<id>"), "taskList": ("GET", "/tasks"),
    "taskRead": ("GET", "/tasks/<id>"),
}  # fmt: skip


@pytest.mark.parametrize("transport", ["http-sse", "http-chunked"])
def test_every_route_has_its_pinned_action(serve, transport):
    app = serve(Recorder(), transport=transport)
    served = {
        (method, rule.rule): app.http_actions.get(rule.endpoint)
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static"
        for method in served_methods(rule)
    }
    assert served == ROUTE_ACTIONS


def test_every_reference_action_names_its_route():
    snake = {name: "".join(f"_{c.lower()}" if c.isupper() else c for c in name) for name in REFERENCE}
    assert {name: ROUTE_ACTIONS[route] for name, route in REFERENCE.items()} == {
        name: getattr(HTTP_ACTIONS, snake[name]) for name in REFERENCE
    }


# -- stream tokens -----------------------------------------------------------------------------


def finished_run(client, run_id="run-t1"):
    client.post("/agents/echo/run", json={"input": "hi", "runId": run_id}, headers=HEADERS).get_data()
    return run_id


def mint(client, run_id, headers=HEADERS):
    return client.post("/auth/stream-token", json={"runId": run_id}, headers=headers)


def test_a_stream_token_opens_that_runs_stream_as_its_minter(serve):
    authorize = Recorder()
    client = serve(authorize).test_client()
    run_id = finished_run(client)
    minted = mint(client, run_id).get_json()
    assert minted["runId"] == run_id and minted["expiresIn"] == 300
    authorize.calls.clear()
    stream = client.get(f"/runs/{run_id}/stream?token={minted['token']}&after=0")
    assert stream.status_code == 200 and sse(stream)[-1]["type"] == "agent:run:end"
    assert authorize.calls == [({"sub": "alice", "kind": "api_key"}, "run.stream", {"runId": run_id, "after": "0"})]


def test_a_stream_token_is_refused_for_another_run_tampered_or_elsewhere(serve):
    client = serve(Recorder()).test_client()
    run_id = finished_run(client)
    token = mint(client, run_id).get_json()["token"]
    forged = serve(Recorder(), secret="f" * 32).test_client()
    forged_token = mint(forged, run_id).get_json()["token"]
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    for path in (
        f"/runs/{finished_run(client, 'run-t2')}/stream?token={token}",
        f"/runs/{run_id}/stream?token={tampered}",
        f"/runs/{run_id}/stream?token={forged_token}",
        f"/runs/{run_id}/stream?token=garbage",
        f"/runs/{run_id}?token={token}",
        f"/runs/{run_id}/cancel?token={token}",
    ):
        answer = client.open(path, method="POST" if path.endswith(f"cancel?token={token}") else "GET")
        assert answer.status_code == 401, path
        assert answer.get_json()["error"]["code"] == "UNAUTHENTICATED"


def test_an_expired_stream_token_is_refused(serve, monkeypatch):
    import time

    import itsdangerous.timed

    client = serve(Recorder(), stream_token_seconds=60).test_client()
    run_id = finished_run(client)
    token = mint(client, run_id).get_json()["token"]
    assert client.get(f"/runs/{run_id}/stream?token={token}").status_code == 200
    later = time.time() + 61
    monkeypatch.setattr(itsdangerous.timed, "time", types.SimpleNamespace(time=lambda: later))
    expired = client.get(f"/runs/{run_id}/stream?token={token}")
    assert expired.status_code == 401 and "expired" in expired.get_json()["error"]["message"]


def test_a_token_is_minted_only_with_a_secret_for_a_run_its_minter_may_stream(serve, monkeypatch):
    monkeypatch.delenv("BREAD_SECRET", raising=False)
    unsigned = serve(Recorder(), secret=None).test_client()
    refused = mint(unsigned, "run-x")
    assert refused.status_code == 500 and refused.get_json()["error"]["code"] == "AUTH_NOT_CONFIGURED"
    assert mint(unsigned, "run-x", headers={}).status_code == 401
    only_mine = Recorder(allow=lambda identity, action, args: args.get("runId", "mine") == "mine")
    client = serve(only_mine).test_client()
    assert mint(client, "mine").status_code == 200
    assert mint(client, "yours").get_json() == {"error": "Forbidden"}
    assert mint(client, "../x").status_code == 400


def test_the_secret_comes_from_the_environment_and_must_be_long(serve, monkeypatch):
    monkeypatch.setenv("BREAD_SECRET", "e" * 32)
    assert mint(serve(Recorder(), secret=None).test_client(), "run-x").status_code == 200
    monkeypatch.setenv("BREAD_SECRET", "short")
    assert "32" in mint(serve(Recorder(), secret=None).test_client(), "run-x").get_json()["error"]["message"]
    with pytest.raises(ValueError, match="at least 32"):
        auth_plugin(secret="short")


def test_authorize_stream_still_runs_after_the_grant(make_bread):
    from bread_sync.transports import http_sse

    seen = []

    def only_alice(identity, run_id):
        seen.append((identity["sub"], run_id))
        return identity["sub"] == "alice"

    plugin = auth_plugin(api_keys={"alice": ALICE, "bob": BOB}, secret=SECRET)
    transport = http_sse.transport(authorize_stream=only_alice)
    bread = make_bread(transport=transport, plugins=[plugin], server={"authorize": Recorder()})
    client = create_server(bread).test_client()
    run_id = finished_run(client)
    bob = {"Authorization": f"Bearer {BOB}"}
    assert client.get(f"/runs/{run_id}/stream", headers=bob).get_json() == {"error": "Forbidden"}
    assert client.post(f"/runs/{run_id}/cancel", headers=bob).get_json() == {"error": "Forbidden"}
    assert client.get(f"/runs/{run_id}", headers=bob).get_json() == {"error": "Forbidden"}
    assert mint(client, run_id, headers=bob).get_json() == {"error": "Forbidden"}
    token = mint(client, run_id).get_json()["token"]
    assert client.get(f"/runs/{run_id}/stream?token={token}").status_code == 200
    # Alice's start with its runId is asked too, then Bob's four, then Alice's mint and stream.
    assert seen == [("alice", run_id)] + [("bob", run_id)] * 4 + [("alice", run_id)] * 2


def test_the_stream_token_action_is_the_plugins_own():
    assert AUTH_ACTIONS.stream_token == "auth.stream_token"


# -- CORS --------------------------------------------------------------------------------------

ORIGIN = "https://app.example.com"
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip


@pytest.fixture
def cors_client(make_bread):
    def make(origins, auth=True):
        plugins = [auth_plugin(api_keys={"alice": ALICE})] if auth else []
        server = {"authorize": Recorder(), "cors_origins": origins}
        return create_server(make_bread(transport="http-sse", plugins=plugins, server=server)).test_client()

    return make


def test_a_preflight_is_answered_without_credentials(cors_client):
    answer = cors_client([ORIGIN]).options("/agents/echo/run", headers=PREFLIGHT)
    assert answer.status_code == 200
    assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in answer.headers["Access-Control-Allow-Methods"]
    assert answer.headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type, Last-Event-ID, Prefer"
    assert "Origin" in answer.headers["Vary"] and "Access-Control-Allow-Credentials" not in answer.headers


def test_an_unlisted_origin_gets_no_cors_headers(cors_client):
    client = cors_client([ORIGIN])
    preflight = client.options("/agents/echo/run", headers={**PREFLIGHT, "Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in preflight.headers
    answer = client.get("/agents", headers={"Origin": "https://evil.example", **HEADERS})
    assert answer.status_code == 403 and "Access-Control-Allow-Origin" not in answer.headers  # the cross-site rule


def test_answers_to_a_listed_origin_expose_the_run_id_even_when_refused(cors_client):
    client = cors_client([ORIGIN])
    run = client.post("/agents/echo/run", json={"input": "hi"}, headers={"Origin": ORIGIN, **HEADERS})
    assert run.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert run.headers["Access-Control-Expose-Headers"] == "Bread-Run-Id, Location, Preference-Applied"
    refused = client.get("/agents", headers={"Origin": ORIGIN})
    assert refused.status_code == 401 and refused.headers["Access-Control-Allow-Origin"] == ORIGIN


def test_any_origin_is_allowed_only_with_auth(cors_client):
    """Without auth the cross-site rule is all that keeps a web page out: ``*`` is a config error."""
    with pytest.raises(ValueError, match="any web page"):
        cors_client(["*"], auth=False)
    client = cors_client(["*"])
    assert client.get("/agents", headers={"Origin": ORIGIN, **HEADERS}).headers["Access-Control-Allow-Origin"] == "*"


def test_no_cors_origins_no_cors(cors_client):
    answer = cors_client([]).options("/agents/echo/run", headers=PREFLIGHT)
    assert answer.status_code == 403 and "Access-Control-Allow-Origin" not in answer.headers  # cross-site


@pytest.mark.parametrize("origin", ["https://app.example.com/", "app.example.com", "https://x.com/path", ""])
def test_an_origin_a_browser_never_sends_is_a_config_error(origin):
    with pytest.raises(ValueError, match="no path"):
        check_origins([origin], auth=True)


# -- the example of docs/security.md -----------------------------------------------------------


def test_the_security_docs_example_config_works(make_bread, monkeypatch):
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    example = text.split("## Turning auth on", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("OPS_API_KEY", "ops-key-0123456789")
    monkeypatch.setenv("APP_API_KEY", "app-key-0123456789")
    monkeypatch.setenv("BREAD_SECRET", SECRET)
    namespace = {}
    exec(compile(example, "security.md", "exec"), namespace)
    config = namespace["config"]()
    client = create_server(make_bread(config, transport="http-sse")).test_client()
    ops, app = ({"Authorization": f"Bearer {k}-key-0123456789"} for k in ("ops", "app"))
    assert client.get("/agents").status_code == 401
    assert client.get("/health").status_code == 200
    run = client.post("/agents/echo/run", json={"input": "hi", "session": {"id": "s1"}}, headers=app)
    assert sse(run)[-1]["payload"]["output"] == "hi"
    assert client.post("/auth/stream-token", json={"runId": "r1"}, headers=app).status_code == 200
    assert client.delete("/sessions/s1", headers=app).get_json() == {"error": "Forbidden"}
    assert client.delete("/sessions/s1", headers=ops).get_json() == {"ok": True}
    preflight = client.options("/agents", headers={"Origin": "https://app.example.com", **PREFLIGHT})
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.com"


def test_the_server_package_exports():
    import bread_sync.server

    assert bread_sync.server.__all__ == [
        "AUTH_ACTIONS", "HTTP_ACTIONS", "BreadSync", "auth_plugin", "authorize_run", "client_tail", "create_server",
        "followed_run", "register_http_route", "shown_position", "start_run_detached", "start_run_stream",
        "stream_body", "stream_position", "stream_response",
    ]  # fmt: skip
