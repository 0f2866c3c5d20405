"""The OpenAPI document is the API the app serves, and its models are what the routes answer."""

import json
import re

import pytest
from flask import Flask, jsonify

from bread_sync.errors import ALL_CODES
from bread_sync.server import BreadSync, auth_plugin, create_server, register_http_route
from bread_sync.server import schemas as s
from bread_sync.server.openapi import OPERATIONS

KEY = "openapi-test-key-0123"
HEADERS = {"Authorization": f"Bearer {KEY}"}


class ExtrasPlugin:
    name = "extras"

    def routes(self, blueprint, bread):
        blueprint.add_url_rule("/raw", endpoint="raw", view_func=lambda: jsonify(ok=True), methods=["GET", "PUT"])
        register_http_route(blueprint, "*", "/any/:thing", "extras.any", lambda thing: jsonify(ok=True))


def make_app(make_bread, transport="http-sse", auth=False, **updates):
    plugins = [ExtrasPlugin(), *([auth_plugin(api_keys=[KEY], secret="s" * 32)] if auth else [])]
    server = {"authorize": lambda identity, action, args: True}
    return create_server(make_bread(transport=transport, plugins=plugins, server=server, **updates))


def read_document(app):
    answer = app.test_client().get("/openapi.json", headers=HEADERS)
    assert answer.status_code == 200
    return answer.get_json()


def served(app):
    """(path, METHOD) of every bread route, straight from the url_map."""
    out = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        methods = set(rule.methods) - ({"HEAD"} if "GET" in rule.methods else set())
        if rule.provide_automatic_options:
            methods.discard("OPTIONS")
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        out |= {(path, m) for m in methods}
    return out


@pytest.mark.parametrize("transport", ["http-sse", "http-chunked"])
@pytest.mark.parametrize("auth", [False, True])
def test_the_document_lists_exactly_the_served_routes_and_methods(make_bread, transport, auth):
    app = make_app(make_bread, transport, auth)
    doc = read_document(app)
    documented = {(path, m.upper()) for path, ops in doc["paths"].items() for m in ops}
    assert documented == served(app)
    assert ("/any/{thing}", "PUT") in documented and ("/raw", "PUT") in documented


def test_each_operation_names_its_action(make_bread):
    app = make_app(make_bread, auth=True)
    doc = read_document(app)
    endpoint = {
        (re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", r.rule), m.lower()): r.endpoint
        for r in app.url_map.iter_rules()
        for m in r.methods
    }
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert op["x-bread-action"] == app.http_actions.get(endpoint[path, method])
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert doc["paths"]["/raw"]["get"]["x-bread-action"] is None


@pytest.mark.parametrize(("transport", "media"), [("http-sse", "text/event-stream"),
                                                   ("http-chunked", "application/x-ndjson")])  # fmt: skip
def test_streaming_routes_carry_their_wires_media_type(make_bread, transport, media):
    paths = read_document(make_app(make_bread, transport))["paths"]
    for path, method in [("/agents/{id}/run", "post"), ("/pipelines/{id}/run", "post"),
                         ("/resume/{checkpointId}", "post"), ("/runs/{runId}/stream", "get")]:  # fmt: skip
        ok = paths[path][method]["responses"]["200"]
        # The passive stream answers an EventSource's Accept in SSE whatever the wire.
        served = sorted({media, "text/event-stream"}) if path.endswith("/stream") else [media]
        assert sorted(ok["content"]) == served and "Bread-Run-Id" in ok["headers"]
    params = {p["name"] for p in paths["/runs/{runId}/stream"]["get"]["parameters"]}
    assert params == {"runId", "after", "Last-Event-ID"}


def test_bodies_and_queries_come_from_the_models_the_routes_validate_with(make_bread):
    doc = read_document(make_app(make_bread))
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    body = paths["/agents/{id}/run"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RunBody"}
    run_id = schemas["RunBody"]["properties"]["runId"]["anyOf"][0]
    assert run_id["pattern"] == "^[A-Za-z0-9._:-]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*$" and run_id["maxLength"] == 200
    assert schemas["RunBody"]["properties"]["sessionPolicy"]["anyOf"][0]["enum"] == ["reject", "enqueue", "interrupt"]
    limit = next(p for p in paths["/tasks"]["get"]["parameters"] if p["name"] == "limit")
    assert limit["schema"] == {"type": "integer", "minimum": 0, "maximum": 10000}
    tag = next(p for p in paths["/sessions"]["get"]["parameters"] if p["name"] == "tag")
    assert tag["schema"]["type"] == "array"


def test_errors_are_documented_in_their_shapes(make_bread):
    doc = read_document(make_app(make_bread))
    schemas = doc["components"]["schemas"]
    assert set(schemas["ErrorDetail"]["properties"]["code"]["enum"]) == set(ALL_CODES)
    assert schemas["ForbiddenBody"]["properties"]["error"]["const"] == "Forbidden"
    cleanup = doc["paths"]["/sessions/cleanup"]["post"]["responses"]
    assert {"200", "400", "403", "413", "500"} <= set(cleanup)
    assert cleanup["413"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert "401" not in cleanup and "securitySchemes" not in doc["components"]


def test_the_security_schemes_when_auth_is_on(make_bread):
    doc = read_document(make_app(make_bread, auth=True))
    assert doc["security"] == [{"bearer": []}]
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["bearer"]["description"]
    }  # fmt: skip
    assert doc["components"]["securitySchemes"]["streamToken"] == {"type": "apiKey", "in": "query", "name": "token"}
    paths = doc["paths"]
    assert paths["/health"]["get"]["security"] == []
    assert paths["/runs/{runId}/stream"]["get"]["security"] == [{"bearer": []}, {"streamToken": []}]
    assert "WWW-Authenticate" in paths["/agents"]["get"]["responses"]["401"]["headers"]
    assert "/auth/stream-token" in paths


def test_every_reference_resolves_and_the_document_is_plain_json(make_bread):
    doc = read_document(make_app(make_bread, auth=True))
    text = json.dumps(doc)
    assert doc["openapi"] == "3.1.0"
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', text))
    assert refs and refs <= set(doc["components"]["schemas"])


def test_an_embedded_api_is_documented_under_its_prefix(make_bread):
    app = Flask("host")
    app.get("/mine")(lambda: "mine")
    BreadSync(app, make_bread(transport="http-sse"), url_prefix="/bread")
    doc = app.test_client().get("/bread/openapi.json").get_json()
    assert "/bread/agents/{id}/run" in doc["paths"] and "/mine" not in doc["paths"]


def test_every_core_action_has_its_operation():
    from bread_sync.server import AUTH_ACTIONS, HTTP_ACTIONS

    actions = {v for k, v in vars(HTTP_ACTIONS).items() if not k.startswith("_")} | {AUTH_ACTIONS.stream_token}
    assert set(OPERATIONS) == actions


# -- the response models are what the routes answer --------------------------------------------


def check(model, answer):
    """``answer`` is a ``model`` with exactly its fields."""
    assert answer.status_code == 200, answer.get_data(as_text=True)
    data = answer.get_json()
    items = data if isinstance(data, list) else [data]
    assert items, "nothing to check"
    for item in items:
        model.model_validate(item)
        assert set(item) == set(model.model_fields), model.__name__


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_json_routes_answer_their_response_models(make_bread, store, tmp_path):
    app = make_app(make_bread, auth=True, store=store)
    client = app.test_client()
    post = lambda path, body: client.post(path, json=body, headers=HEADERS).get_data()  # noqa: E731
    get = lambda path: client.get(path, headers=HEADERS)  # noqa: E731
    post("/agents/writer/run", {"input": {"topic": "x"}, "runId": "run-w", "session": {"id": "s1", "tags": {"a": "b"}}})
    post("/agents/counter/run", {"input": {"until": 2}})
    post("/agents/manager/run", {"input": "go", "runId": "run-m"})
    loop_id = get("/loops").get_json()[0]["id"]
    task_id = get("/tasks").get_json()[0]["id"]
    for model, path in [
        (s.AgentSummary, "/agents"), (s.AgentDetail, "/agents/writer"), (s.RunRecord, "/runs"),
        (s.RunDetail, "/runs/run-w"), (s.RunDetail, "/runs/run-m"), (s.SessionSummary, "/sessions"),
        (s.Session, "/sessions/s1"), (s.LoopRecord, "/loops"), (s.LoopDetail, f"/loops/{loop_id}"),
        (s.TaskRunRecord, "/tasks"), (s.TaskRunRecord, f"/tasks/{task_id}"), (s.Ok, "/health"),
    ]:  # fmt: skip
        check(model, get(path))
    check(s.StreamToken, client.post("/auth/stream-token", json={"runId": "run-w"}, headers=HEADERS))
    check(s.Cancelled, client.post("/runs/run-w/cancel", headers=HEADERS))
    check(s.Deleted, client.post("/sessions/cleanup", json={"tags": {"a": "b"}}, headers=HEADERS))
    check(s.Ok, client.delete("/sessions/s1", headers=HEADERS))
    assert get("/runs/run-w").get_json()["checkpoint"] is None


# -- validation through the models -------------------------------------------------------------

INVALID = [
    ("POST", "/agents/echo/run", {"input": "x", "runId": "a/b"}, "runId: String should match pattern"),
    ("POST", "/agents/echo/run", {"input": "x", "runId": 5}, "runId: Input should be a valid string"),
    ("POST", "/agents/echo/run", {"input": "x", "sessionPolicy": "never"}, "sessionPolicy: Input should be"),
    ("POST", "/agents/echo/run", {"input": "x", "session": {"tags": {"a": 1}}}, "session.tags.a: Input should be"),
    ("POST", "/agents/echo/run", {"input": "x", "session": 5}, "session: Input should be"),
    ("POST", "/agents/echo/run", {"input": "x", "skill": ["a"]}, "skill: Input should be a valid string"),
    ("POST", "/pipelines/draft-then-echo/run", {"input": "x", "runId": ""}, "runId: String should have at least 1"),
    ("POST", "/agents/echo/run", {"input": "x", "runId": ".."}, "runId: String should match pattern"),
    ("POST", "/resume/cp_x", {"approved": True}, "response: Field required"),
    ("POST", "/sessions/cleanup", {"olderThanDays": True}, "olderThanDays: Input should be a valid number"),
    ("POST", "/sessions/cleanup", {"olderThanDays": -1}, "olderThanDays: Input should be greater than or equal to 0"),
    ("POST", "/sessions/cleanup", {"tags": {"a": 1}}, "tags.a: Input should be a valid string"),
    ("POST", "/auth/stream-token", {}, "runId: Field required"),
    ("GET", "/runs?status=bogus", None, "status: Input should be 'running'"),
    ("GET", "/tasks?limit=10001", None, "limit: Input should be less than or equal to 10000"),
    ("GET", "/tasks?limit=x", None, "limit: Input should be a valid integer"),
    ("GET", "/sessions?tag=nocolon", None, "tag.0: String should match pattern"),
    ("GET", "/sessions?tag=user:1&tag=user:2", None, "tag: the key 'user' is given twice"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "message"), INVALID)
def test_a_request_failing_its_model_is_400_invalid_request(make_bread, method, path, body, message):
    client = make_app(make_bread, auth=True).test_client()
    answer = client.open(path, method=method, json=body, headers=HEADERS)
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error["code"] == "INVALID_REQUEST" and error["message"].startswith(message), error["message"]


def test_a_validation_message_never_echoes_the_input(make_bread):
    client = make_app(make_bread).test_client()
    secret = "sk-" + "z" * 300
    answer = client.post("/agents/echo/run", json={"input": "x", "runId": secret})
    assert answer.status_code == 400 and "zzz" not in answer.get_data(as_text=True)


def test_a_session_may_be_its_id_alone(make_bread):
    client = make_app(make_bread).test_client()
    client.post("/agents/echo/run", json={"input": "hi", "session": "by-id"}).get_data()
    assert [m["role"] for m in client.get("/sessions/by-id").get_json()["messages"]] == ["user", "assistant"]
