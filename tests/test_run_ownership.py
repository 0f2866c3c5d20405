"""Per-run ownership: one hook of the config, asked by every route that reads or acts on a run by
id; a client runId never reaches another caller's run."""

import json

import pytest
from flask import Flask

from bread_sync import ServerSettings
from bread_sync.config import apply_environment
from bread_sync.demo import config as demo_config
from bread_sync.server import BreadSync, auth_plugin, create_server
from bread_sync.transports import http_chunked, http_sse
from bread_sync.wire import SSEDecoder

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
AS_ALICE = {"Authorization": f"Bearer {ALICE}"}
AS_BOB = {"Authorization": f"Bearer {BOB}"}


def owns(identity, run_id):
    """Each caller owns the runs whose id starts with its name (a real app keeps a table)."""
    return run_id.startswith(f"{identity['sub']}-")


@pytest.fixture
def app_with(make_bread):
    def make(transport="http-sse", **server):
        server.setdefault("authorize", lambda identity, action, args: True)
        plugin = auth_plugin(api_keys={"alice": ALICE, "bob": BOB}, secret="s" * 32)
        return create_server(make_bread(transport=transport, plugins=[plugin], server=server)).test_client()

    return make


def events(response):
    return [json.loads(e.data) for e in SSEDecoder().feed(response.data) if e.data]


def paused_writer(client, run_id="alice-1"):
    response = client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": run_id}, headers=AS_ALICE)
    return events(response)[-1]["payload"]


def test_every_route_on_a_run_asks_the_config_hook(app_with):
    client = app_with(authorize_run=owns)
    pause = paused_writer(client)
    assert pause["type"] == "human:required"
    refused = [
        client.get("/runs/alice-1/stream", headers=AS_BOB),
        client.get("/runs/alice-1", headers=AS_BOB),
        client.post("/runs/alice-1/cancel", headers=AS_BOB),
        client.post("/auth/stream-token", json={"runId": "alice-1"}, headers=AS_BOB),
    ]
    assert [(r.status_code, r.get_json()) for r in refused] == [(403, {"error": "Forbidden"})] * 4
    # A checkpoint's id does not name its run: Bob's resume is answered as of an unknown one.
    bobs = client.post(f"/resume/{pause['checkpointId']}", json={"response": {"approved": True}}, headers=AS_BOB)
    assert [e["payload"]["code"] for e in events(bobs)] == ["CHECKPOINT_NOT_FOUND"]
    assert client.get("/runs/alice-1", headers=AS_ALICE).get_json()["status"] == "paused"
    resumed = client.post(f"/resume/{pause['checkpointId']}", json={"response": {"approved": True}}, headers=AS_ALICE)
    assert events(resumed)[-1]["payload"]["output"] == "Published."


def answered(response, given_id):
    """What a caller learns from an answer: its status, the headers that could differ, and its
    body with the id it was asked about taken out (an unknown one's message names its id)."""
    headers = {name: response.headers.get(name) for name in ("Content-Type", "Bread-Run-Id", "Location")}
    return response.status_code, headers, response.get_data(as_text=True).replace(given_id, "<id>")


def test_another_callers_loop_or_task_run_is_answered_exactly_as_an_unknown_one(app_with):
    client = app_with(authorize_run=owns)
    client.post("/agents/counter/run", json={"input": {"until": 2}, "runId": "alice-c"}, headers=AS_ALICE).get_data()
    client.post("/agents/manager/run", json={"input": "go", "runId": "alice-m"}, headers=AS_ALICE).get_data()
    loop_id = client.get("/loops", headers=AS_ALICE).get_json()[0]["id"]
    task_id = client.get("/tasks", headers=AS_ALICE).get_json()[0]["id"]
    for kind, known in (("loops", loop_id), ("tasks", task_id)):
        unknown = f"{known[:-4]}0000"
        theirs, none = client.get(f"/{kind}/{known}", headers=AS_BOB), client.get(f"/{kind}/{unknown}", headers=AS_BOB)
        assert theirs.status_code == 404
        assert answered(theirs, known) == answered(none, unknown)
        assert client.get(f"/{kind}/{known}", headers=AS_ALICE).status_code == 200


@pytest.mark.parametrize("transport", ["http-sse", "http-chunked"])
@pytest.mark.parametrize("prefer", [{}, {"Prefer": "respond-async"}])
def test_another_callers_checkpoint_is_answered_exactly_as_an_unknown_one(app_with, transport, prefer):
    client = app_with(transport=transport, authorize_run=owns)
    client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": "alice-1"}, headers=AS_ALICE).get_data()
    checkpoint_id = client.get("/runs/alice-1", headers=AS_ALICE).get_json()["checkpoint"]["id"]
    store = client.application.extensions["bread_sync"].bread.store
    assert store.get_checkpoint("progress_alice-1") is not None  # the run's progress: no oracle of it either

    def resume(checkpoint, headers=AS_BOB):
        response = client.post(
            f"/resume/{checkpoint}", json={"response": {"approved": True}}, headers={**headers, **prefer}
        )
        return answered(response, checkpoint)

    unknown = resume(f"cp_{'0' * 32}")
    assert unknown[0] == (404 if prefer else 200) and "CHECKPOINT_NOT_FOUND" in unknown[2]
    assert resume(checkpoint_id) == resume(f"cp_{'1' * 32}") == unknown
    assert resume("progress_alice-1") == resume("progress_alice-none") == unknown
    assert resume("progress_alice-1", AS_ALICE) == unknown  # a progress is no pause to answer, even its owner's
    assert store.get_checkpoint(checkpoint_id)["status"] == "pending"
    client.post(f"/resume/{checkpoint_id}", json={"response": {"approved": True}}, headers=AS_ALICE).get_data()
    assert client.get("/runs/alice-1", headers=AS_ALICE).get_json()["status"] == "completed"


def test_a_transport_authorize_stream_sets_the_same_hook(app_with):
    client = app_with(transport=http_sse.transport(authorize_stream=owns))
    paused_writer(client)
    assert client.get("/runs/alice-1", headers=AS_BOB).status_code == 403
    assert client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": "alice-1"},
                       headers=AS_BOB).status_code == 403  # fmt: skip
    assert client.get("/runs/alice-1", headers=AS_ALICE).status_code == 200


def test_with_both_hooks_each_must_allow(app_with):
    client = app_with(transport=http_sse.transport(authorize_stream=lambda identity, run_id: True), authorize_run=owns)
    paused_writer(client)
    assert client.get("/runs/alice-1", headers=AS_BOB).status_code == 403
    refuse_all = http_sse.transport(authorize_stream=lambda identity, run_id: False)
    assert app_with(transport=refuse_all, authorize_run=owns).get("/runs/alice-1", headers=AS_ALICE).status_code == 403


@pytest.mark.parametrize("transport", ["http-sse", "http-chunked"])
def test_reposting_another_callers_run_id_is_403_before_any_byte_of_it(app_with, transport):
    client = app_with(transport=transport, authorize_run=owns)
    client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": "alice-1"}, headers=AS_ALICE).get_data()
    again = client.post("/agents/writer/run", json={"input": {"topic": "y"}, "runId": "alice-1"}, headers=AS_BOB)
    assert (again.status_code, again.get_json()) == (403, {"error": "Forbidden"})
    other_agent = client.post("/agents/echo/run", json={"input": "y", "runId": "alice-1"}, headers=AS_BOB)
    assert (other_agent.status_code, other_agent.get_json()) == (403, {"error": "Forbidden"})
    pipeline = client.post("/pipelines/draft-then-echo/run", json={"input": {"topic": "y"}, "runId": "alice-1"},
                           headers=AS_BOB)  # fmt: skip
    assert pipeline.status_code == 403


SQUATS = [
    ("/agents/echo/run", {"input": "bob's"}, {}),
    ("/agents/echo/run", {"input": "bob's"}, {"Prefer": "respond-async"}),
    ("/pipelines/draft-then-echo/run", {"input": {"topic": "bob's"}}, {}),
]


@pytest.mark.parametrize(("path", "body", "headers"), SQUATS)
def test_a_new_run_id_that_names_another_caller_is_403_and_starts_nothing(app_with, path, body, headers):
    client = app_with(authorize_run=owns)
    squat = client.post(path, json={**body, "runId": "alice-order-42"}, headers={**AS_BOB, **headers})
    assert (squat.status_code, squat.get_json()) == (403, {"error": "Forbidden"})
    assert client.get("/runs/alice-order-42", headers=AS_ALICE).get_json()["error"]["code"] == "RUN_NOT_FOUND"
    own = client.post("/agents/echo/run", json={"input": "alice's", "runId": "alice-order-42"}, headers=AS_ALICE)
    assert events(own)[-1]["payload"]["output"] == "alice's"


def test_under_a_hook_that_keeps_a_table_a_run_id_is_its_first_callers(app_with):
    owners = {}

    def first_caller_owns(identity, run_id):
        # A table of its own: a run id it does not know is allowed (a new run), and taken.
        return owners.setdefault(run_id, identity["sub"]) == identity["sub"]

    client = app_with(authorize_run=first_caller_owns)
    taken = client.post("/agents/echo/run", json={"input": "bob's", "runId": "order-42"}, headers=AS_BOB)
    assert events(taken)[-1]["payload"]["output"] == "bob's"
    retry = client.post("/agents/echo/run", json={"input": "alice's", "runId": "order-42"}, headers=AS_ALICE)
    assert (retry.status_code, retry.get_json()) == (403, {"error": "Forbidden"})  # never bob's run


def test_an_attach_to_a_run_of_another_agent_is_one_run_id_conflict_on_sse(app_with):
    client = app_with(authorize_run=owns)
    paused_writer(client)
    answer = client.post("/agents/echo/run", json={"input": "y", "runId": "alice-1"}, headers=AS_ALICE)
    decoded = list(SSEDecoder().feed(answer.data))
    assert answer.status_code == 200 and len(decoded) == 1 and decoded[0].id is None
    assert json.loads(decoded[0].data)["payload"]["code"] == "RUN_ID_CONFLICT"
    assert "Drafting" not in answer.get_data(as_text=True)


def test_an_attach_to_a_run_of_another_agent_is_one_run_id_conflict_on_ndjson(app_with):
    client = app_with(transport="http-chunked")
    client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": "alice-1"}, headers=AS_ALICE).get_data()
    answer = client.post("/pipelines/draft-then-echo/run", json={"input": {"topic": "x"}, "runId": "alice-1"},
                         headers=AS_ALICE)  # fmt: skip
    lines = [json.loads(line) for line in answer.get_data(as_text=True).splitlines()]
    assert answer.status_code == 200 and len(lines) == 1
    assert lines[0]["seq"] == 0 and lines[0]["crumb"]["type"] == "agent:error"
    assert lines[0]["crumb"]["error"]["code"] == "RUN_ID_CONFLICT"


def test_the_same_caller_retrying_its_run_id_still_attaches(app_with):
    client = app_with(authorize_run=owns)
    first = paused_writer(client)
    again = client.post("/agents/writer/run", json={"input": {"topic": "x"}, "runId": "alice-1"}, headers=AS_ALICE)
    assert events(again)[-1]["payload"]["checkpointId"] == first["checkpointId"]


# -- BREAD_TRANSPORT beside a configured transport ----------------------------------------------


def test_bread_transport_never_drops_a_configured_transport_object(monkeypatch):
    monkeypatch.setenv("BREAD_TRANSPORT", "http-sse")
    configured = demo_config().model_copy(update={"transport": http_chunked.transport(authorize_stream=owns)})
    with pytest.raises(ValueError, match=r"BREAD_TRANSPORT=http-sse .*HTTPTransport"):
        apply_environment(configured)


@pytest.mark.parametrize("configured", [None, "http-chunked"])
def test_bread_transport_picks_the_wire_when_the_config_names_one_or_none(monkeypatch, configured):
    monkeypatch.setenv("BREAD_TRANSPORT", "http-sse")
    assert apply_environment(demo_config().model_copy(update={"transport": configured})).transport == "http-sse"


# -- unknown routes with auth on -----------------------------------------------------------------


def test_an_anonymous_caller_cannot_map_the_routes(app_with):
    client = app_with()
    for method, path in [("GET", "/nope"), ("GET", "/agents/echo/run"), ("DELETE", "/agents"), ("GET", "/health/x")]:
        answer = client.open(path, method=method)
        assert answer.status_code == 401, (method, path)
        assert answer.get_json()["error"]["code"] == "UNAUTHENTICATED"
    assert client.get("/nope", headers=AS_ALICE).status_code == 404
    assert client.get("/agents/echo/run", headers=AS_ALICE).status_code == 405
    assert client.get("/health").status_code == 200


def test_embedded_at_the_root_the_host_apps_paths_stay_its_own(make_bread):
    app = Flask("host")
    app.add_url_rule("/docs/", "docs", lambda: "docs")
    app.add_url_rule("/login", "login", lambda: "login", methods=["GET"])
    plugin = auth_plugin(api_keys={"alice": ALICE})
    BreadSync(app, make_bread(transport="http-sse", plugins=[plugin], server=ServerSettings(authorize=lambda *a: True)))
    client = app.test_client()
    assert client.get("/docs").status_code == 308
    assert client.post("/login").status_code == 405
    assert client.get("/nowhere").status_code == 404
    assert client.get("/agents").status_code == 401


def test_only_paths_under_the_prefix_are_bread_sync_s(make_bread):
    app = Flask("host")
    app.add_url_rule("/mine", "mine", lambda: "mine")
    plugin = auth_plugin(api_keys={"alice": ALICE})
    bread = make_bread(transport="http-sse", plugins=[plugin], server=ServerSettings(authorize=lambda *a: True))
    BreadSync(app, bread, url_prefix="/bread")
    client = app.test_client()
    assert client.get("/bread/nope").status_code == 401
    assert client.get("/breadcrumbs").status_code == 404
    assert client.get("/elsewhere").status_code == 404
    assert client.get("/mine").get_data() == b"mine"
    assert client.get("/bread/nope", headers=AS_ALICE).status_code == 404


def test_without_auth_unknown_routes_stay_404(make_bread):
    client = create_server(make_bread(transport="http-sse")).test_client()
    assert client.get("/nope").status_code == 404


def alice_holding_the_shared_session(client):
    """Alice's run ``alice-slow``, streaming in session ``shared`` (its response, to close)."""
    slow = {"input": {"count": 10_000, "delayMs": 5}, "session": {"id": "shared"}, "runId": "alice-slow"}
    return client.post("/agents/slow/run", json=slow, headers=AS_ALICE)


def test_a_busy_session_names_its_run_only_to_a_caller_who_may_reach_it(app_with):
    client = app_with(authorize_run=owns)
    held = alice_holding_the_shared_session(client)
    rejecting = {"input": "hi", "session": {"id": "shared"}, "sessionPolicy": "reject"}
    to_bob = events(client.post("/agents/echo/run", json=rejecting, headers=AS_BOB))
    to_alice = events(client.post("/agents/echo/run", json={**rejecting, "runId": "alice-2"}, headers=AS_ALICE))
    assert to_bob[-1]["payload"] == {"code": "SESSION_BUSY", "message": "session shared is busy with another run"}
    assert to_alice[-1]["payload"] == {"code": "SESSION_BUSY", "message": "session shared is busy with run alice-slow"}
    assert client.post("/runs/alice-slow/cancel", headers=AS_ALICE).status_code == 200
    held.close()


def test_the_interrupt_policy_cancels_only_a_run_the_caller_may_reach(app_with):
    client = app_with(authorize_run=owns)
    held = alice_holding_the_shared_session(client)
    interrupting = {"input": "hi", "session": {"id": "shared"}, "sessionPolicy": "interrupt"}
    refused = events(client.post("/agents/echo/run", json=interrupting, headers=AS_BOB))
    assert [e["payload"]["code"] for e in refused] == ["SESSION_BUSY"]
    assert client.get("/runs/alice-slow", headers=AS_ALICE).get_json()["status"] == "running"
    taken = events(client.post("/agents/echo/run", json={**interrupting, "runId": "alice-2"}, headers=AS_ALICE))
    assert taken[-1]["payload"]["output"] == "hi"
    assert events(held)[-2]["payload"]["error"]["code"] == "RUN_CANCELLED"
