"""The Flask extension and its routes, in process (the real-process tests are in integration/)."""

import gc
import json
import logging
import re
import subprocess
import sys

import pytest
from flask import Flask

from bread_sync import BreadError, Config
from bread_sync.demo import config as demo_config
from bread_sync.server import HTTP_ACTIONS, BreadSync, create_server, register_http_route
from bread_sync.server.guard import is_loopback_host, is_loopback_peer
from bread_sync.server.listen import LOOPBACK_WARNING, check_bind
from bread_sync.wire import NDJSONDecoder, SSEDecoder

from .test_listen_rules import COMBINATIONS


@pytest.fixture
def app(make_bread):
    return create_server(make_bread(transport="http-sse"))


@pytest.fixture
def client(app):
    return app.test_client()


def sse_events(response):
    return [e.json() for e in SSEDecoder().feed(response.data)]


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:3000", "127.0.0.1", "127.0.0.1:80", "::1", "[::1]", "[::1]:8080"]
)
def test_loopback_hosts(host):
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["localhost.", "127.1", "0.0.0.0", "::", "[::]", "example.com", "127.0.0.2", "", None,
                                  "localhost:", "localhost:99999x", "[::1]x"])  # fmt: skip
def test_non_loopback_hosts(host):
    assert not is_loopback_host(host)


class AuthPlugin:
    name = "auth"


@pytest.mark.parametrize(("auth", "authorize", "host", "outcome"), COMBINATIONS)
def test_the_listen_rules(auth, authorize, host, outcome):
    config = Config(plugins=[AuthPlugin()] if auth else [])
    config.server.authorize = (lambda identity, action, args: True) if authorize else None
    if outcome == "refuse":
        with pytest.raises(BreadError) as caught:
            check_bind(config, host)
        assert caught.value.code == "AUTH_NOT_CONFIGURED"
    else:
        assert check_bind(config, host) == (LOOPBACK_WARNING if outcome == "warn" else None)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "unix:/run/bread.sock"])
@pytest.mark.parametrize("names", [["BREAD_API_KEYS"], ["BREAD_SECRET"], ["BREAD_API_KEYS", "BREAD_SECRET"]])
def test_credentials_in_the_environment_without_the_auth_plugin_are_refused(monkeypatch, host, names):
    """Whoever set them means callers to need them: serving without would ignore them silently."""
    for name in names:
        monkeypatch.setenv(name, "k" * 32)
    with pytest.raises(BreadError) as caught:
        check_bind(Config(), host)
    assert caught.value.code == "AUTH_NOT_CONFIGURED"
    assert f"sets {' and '.join(names)}, but no auth plugin reads" in caught.value.message
    assert "auth_plugin()" in caught.value.message and "docs/security.md" in caught.value.message


def test_credentials_in_the_environment_with_the_auth_plugin_may_listen(monkeypatch):
    monkeypatch.setenv("BREAD_API_KEYS", "k" * 32)
    monkeypatch.setenv("BREAD_SECRET", "s" * 32)
    config = Config(plugins=[AuthPlugin()])
    config.server.authorize = lambda identity, action, args: True
    assert check_bind(config, "0.0.0.0") is None


def test_an_app_of_ones_own_serves_unread_credentials_but_warns_once(monkeypatch, make_bread, caplog):
    """Only bread's own launchers refuse them (listen.py); ``create_server`` in an app of the
    user's own serves, and says in the log that the keys are ignored."""
    monkeypatch.setenv("BREAD_API_KEYS", "k" * 32)
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        client = create_server(make_bread(transport="http-sse")).test_client()
        assert client.get("/agents").status_code == 200
    warned = [r.getMessage() for r in caplog.records if "but no auth plugin reads it" in r.getMessage()]
    assert len(warned) == 1 and "BREAD_API_KEYS" in warned[0], warned


def test_an_app_with_the_auth_plugin_does_not_warn_of_credentials(monkeypatch, make_bread, caplog):
    monkeypatch.setenv("BREAD_API_KEYS", "k" * 32)
    with caplog.at_level(logging.WARNING, logger="bread_sync.server"):
        create_server(make_bread(transport="http-sse", plugins=[AuthPlugin()]))
    assert not [r for r in caplog.records if "auth plugin reads" in r.getMessage()]


def test_a_foreign_host_is_forbidden_and_health_is_not(client):
    assert client.get("/agents", headers={"Host": "evil.example"}).get_json() == {"error": "Forbidden"}
    forwarded = client.get("/agents", headers={"Host": "evil.example", "X-Forwarded-Host": "localhost"})
    assert forwarded.status_code == 403
    assert client.get("/health", headers={"Host": "evil.example"}).get_json() == {"ok": True}


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1", "", None, "/run/bread.sock"])
def test_loopback_peers(peer):
    assert is_loopback_peer(peer)


@pytest.mark.parametrize("peer", ["203.0.113.5", "10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1%eth0",
                                  "localhost", "unknown"])  # fmt: skip
def test_non_loopback_peers(peer):
    assert not is_loopback_peer(peer)


def test_without_auth_a_caller_off_this_machine_is_403_whatever_host_it_sends(make_bread):
    """However the app is served (another WSGI server, no gunicorn.conf.py, a public bind), a
    peer that is not loopback is refused while auth is off, a loopback Host or not."""
    client = create_server(make_bread(transport="http-sse")).test_client()
    remote = {"REMOTE_ADDR": "203.0.113.5"}
    for method, path in [("GET", "/agents"), ("POST", "/sessions/cleanup"), ("GET", "/no/such/path")]:
        answer = client.open(path, method=method, headers={"Host": "localhost"}, environ_base=remote)
        assert answer.status_code == 403 and answer.get_json() == {"error": "Forbidden"}, (method, path)
    assert client.get("/health", environ_base=remote).status_code == 200
    assert client.get("/agents", headers={"Host": "localhost"}).status_code == 200  # the test client is local


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [("GET", "/mcp", {}), ("GET", "/a2a", {}), ("GET", "/ag-ui/run", {}), ("GET", "/no/such/path", {}),
     ("DELETE", "/agents", {}), ("GET", "/", {"Accept": "text/html"})],
)  # fmt: skip
def test_a_foreign_host_is_403_before_any_404_or_405(make_bread, method, path, headers):
    client = create_server(make_bread(transport="http-sse", server={"playground": True})).test_client()
    local = client.open(path, method=method, headers=headers)
    assert local.status_code in (302, 404, 405), local.status_code  # what a local caller gets
    answer = client.open(path, method=method, headers={**headers, "Host": "evil.example"})
    assert answer.status_code == 403 and answer.get_json() == {"error": "Forbidden"}


def test_hooks_that_would_do_nothing_are_not_added(make_bread):
    """Flask calls every hook of every request: without auth, the grant; without CORS origins,
    the CORS headers."""
    app = create_server(make_bread(transport="http-sse"))
    assert [f.__name__ for f in app.before_request_funcs["bread_sync"]] == ["_guard"]
    assert "bread_sync" not in app.after_request_funcs
    app = create_server(make_bread(transport="http-sse", server={"cors_origins": ["https://app.example"]}))
    assert [f.__name__ for f in app.after_request_funcs["bread_sync"]] == ["_cors_headers"]


def test_the_body_limit_counts_raw_bytes(make_bread):
    app = create_server(make_bread(transport="http-sse", server={"max_body_bytes": 100}))
    client = app.test_client()
    exact = json.dumps({"input": "x"}).ljust(100).encode()
    assert client.post("/agents/echo/run", data=exact).status_code == 200
    over = client.post("/agents/echo/run", data=exact + b" ")
    assert over.status_code == 413 and over.get_json()["error"]["code"] == "BODY_TOO_LARGE"


@pytest.mark.parametrize("body", [b"{", b"[1]", b'"text"', b"\xff"])
def test_a_body_that_is_not_a_json_object_is_invalid(client, body):
    response = client.post("/agents/echo/run", data=body)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "INVALID_REQUEST"


def test_agents_are_listed_and_described(client):
    assert [a["id"] for a in client.get("/agents").get_json()] == [a.id for a in demo_config().agents]
    writer = client.get("/agents/writer").get_json()
    text, topic = writer["inputSchema"]["anyOf"]  # a plain text is the topic too
    assert text["type"] == "string" and topic["required"] == ["topic"] and writer["outputFormat"] == "text"
    text, until = client.get("/agents/counter").get_json()["inputSchema"]["anyOf"]
    assert text["type"] == "string" and until["required"] == ["until"]
    missing = client.get("/agents/nobody")
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_pipelines_are_listed_with_their_steps(client):
    assert client.get("/pipelines").get_json() == [{
        "id": "draft-then-echo",
        "description": "The writer drafts (and asks before publishing), then echo repeats its output.",
        "steps": ["writer", "echo"],
    }]  # fmt: skip


def test_a_utf8_body_may_start_with_a_byte_order_mark(client):
    answer = client.post("/agents/echo/run", data=b"\xef\xbb\xbf" + b'{"input": "bom"}')
    assert answer.status_code == 200 and b'"output":"bom"' in answer.get_data()


def test_agents_name_their_model_as_provider_colon_name(client, make_bread):
    models = {a["id"]: a["model"] for a in client.get("/agents").get_json()}
    assert models["echo"] == "echo:echo" and models["writer"] == "script:writer"
    assert client.get("/agents/interviewer").get_json()["model"] == "script:interviewer"
    from bread_sync import Agent, Config
    from bread_sync.models import openai

    agents = [Agent(id="a", model="openai:gpt-4o-mini"), Agent(id="b", model=openai.provider(model="m1"))]
    served = create_server(make_bread(Config(agents=agents), transport="http-sse")).test_client()
    assert [a["model"] for a in served.get("/agents").get_json()] == ["openai:gpt-4o-mini", "openai:m1"]


def test_entrypoints_limit_what_is_served(make_bread):
    client = create_server(make_bread(transport="http-sse", entrypoints=["echo"])).test_client()
    assert [a["id"] for a in client.get("/agents").get_json()] == ["echo"]
    assert client.get("/agents/writer").status_code == 404


@pytest.mark.parametrize("prefer", [{}, {"Prefer": "respond-async"}])
def test_an_agent_left_out_of_the_entrypoints_cannot_be_run_over_http(make_bread, prefer):
    """It is answered as an agent that does not exist, streamed or started in the background."""
    bread = make_bread(transport="http-sse", entrypoints=["manager"])
    client = create_server(bread).test_client()
    for agent_id in ("echo", "nobody"):
        answer = client.post(f"/agents/{agent_id}/run", json={"input": "hi"}, headers=prefer)
        error = answer.get_json()["error"] if prefer else sse_events(answer)[-1]["payload"]
        assert error == {"code": "AGENT_NOT_FOUND", "message": f"no agent {agent_id!r}"}
    assert bread.store.list_runs() == []


def test_runs_are_resources_for_a_hitl_dashboard(client):
    run = client.post("/agents/writer/run", json={"input": {"topic": "bread"}})
    run.get_data()  # the stream ends at the pause
    run_id = run.headers["Bread-Run-Id"]
    paused = client.get("/runs?status=paused").get_json()
    assert [r["id"] for r in paused] == [run_id]
    record = client.get(f"/runs/{run_id}").get_json()
    assert record["status"] == "paused" and record["checkpoint"]["toolName"] == "publish"
    assert paused[0]["leaseUntil"] == record["leaseUntil"]
    for stamp in (record["leaseUntil"], record["createdAt"], record["checkpoint"]["createdAt"]):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp
    assert client.get("/runs?status=bogus").status_code == 400
    assert client.get("/runs/run_nope").get_json()["error"]["code"] == "RUN_NOT_FOUND"


def test_sessions_routes(client):
    for user in ("1", "2"):
        client.post(
            "/agents/echo/run", json={"input": "hi", "session": {"id": f"s{user}", "tags": {"user": user}}}
        ).get_data()
    assert [s["id"] for s in client.get("/sessions?tag=user:2").get_json()] == ["s2"]
    assert client.get("/sessions?tag=nocolon").status_code == 400
    assert [m["role"] for m in client.get("/sessions/s1").get_json()["messages"]] == ["user", "assistant"]
    assert client.delete("/sessions/s1").get_json() == {"ok": True}
    assert client.get("/sessions/s1").status_code == 404
    assert client.post("/sessions/cleanup", json={"olderThanDays": -1}).status_code == 400
    assert client.post("/sessions/cleanup", json={"tags": {"user": "2"}}).get_json() == {"deleted": 1}


def test_a_cancelled_paused_run_is_404_to_cancel_again(client):
    paused = client.post("/agents/writer/run", json={"input": {"topic": "x"}})
    paused.get_data()
    run_id = paused.headers["Bread-Run-Id"]
    assert client.post(f"/runs/{run_id}/cancel").get_json() == {"ok": True, "runId": run_id}
    assert client.post(f"/runs/{run_id}/cancel").status_code == 404
    assert client.get(f"/runs/{run_id}").get_json()["status"] == "cancelled"


def test_ndjson_failure_before_a_run_is_one_synthetic_frame(make_bread):
    client = create_server(make_bread(transport="http-chunked")).test_client()
    response = client.post("/agents/nobody/run", json={"input": "x"})
    frames = list(NDJSONDecoder().feed(response.data))
    assert response.status_code == 200 and len(frames) == 1
    assert frames[0]["seq"] == 0 and frames[0]["crumb"]["error"].code == "AGENT_NOT_FOUND"


@pytest.mark.parametrize("path", ["/agents/nobody/run", "/pipelines/nobody/run"])
def test_a_failure_before_a_run_names_a_run_id_in_its_frame_and_header(make_bread, path):
    client = create_server(make_bread(transport="http-chunked")).test_client()
    response = client.post(path, json={"input": "x"})
    (frame,) = NDJSONDecoder().feed(response.data)
    assert frame["runId"].startswith("run_") and response.headers["Bread-Run-Id"] == frame["runId"]


@pytest.mark.parametrize("path", ["/agents/echo/run", "/pipelines/draft-then-echo/run"])
def test_a_run_without_a_run_id_is_started_and_streamed_without_reading_its_record(make_bread, path):
    """Only a client's own runId can name a run to retry; the stream of a run just made is not
    looked up either."""
    bread = make_bread(transport="http-chunked")
    looked_up = []
    get_run = bread.store.get_run
    bread.store.get_run = lambda run_id: looked_up.append(run_id) or get_run(run_id)
    response = create_server(bread).test_client().post(path, json={"input": "a b"})
    frames = list(NDJSONDecoder().feed(response.data))
    assert frames[0]["seq"] == 1 and frames[-1]["crumb"]["type"] in ("agent:run:end", "human:required")
    assert looked_up == []


def test_the_concurrent_run_cap_answers_too_many_runs(make_bread):
    app = create_server(make_bread(transport="http-sse", server={"max_concurrent_runs": 0}))
    events = sse_events(app.test_client().post("/agents/echo/run", json={"input": "x"}))
    assert events == [
        {"type": "error", "payload": {"code": "TOO_MANY_RUNS", "message": events[0]["payload"]["message"]}}
    ]


def test_a_run_over_its_time_limit_ends_with_run_timeout(make_bread):
    app = create_server(make_bread(transport="http-sse", server={"run_timeout_seconds": 0.05}))
    events = sse_events(app.test_client().post("/agents/slow/run", json={"input": {"count": 100, "delayMs": 1000}}))
    assert events[-2]["payload"]["error"]["code"] == "RUN_TIMEOUT"
    assert events[-1] == {
        "type": "error",
        "payload": {"code": "RUN_TIMEOUT", "message": "the run took longer than 0.05 s"},
    }


RUN_TIME_LIMITS_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, threading
from bread_sync.server.runner import Runner

timers = []
original = threading.Timer.__init__
threading.Timer.__init__ = lambda self, *a, **k: timers.append(1) or original(self, *a, **k)

class Run:
    attached = False

    def __init__(self, run_id, token, wait):
        self.run_id, self.token, self.wait = run_id, token, wait

    def drain(self):
        if self.wait:
            out["cancelled"] = self.token.wait(30)

runner, out = Runner(max_runs=4, timeout=0.05), {}
with runner.slot() as over:
    over.drive(Run("r1", over.token, wait=True))
with runner.slot() as within:
    within.drive(Run("r2", within.token, wait=False))
out["idle"] = runner.wait_idle(30)
out["code"] = over.token.reason.code
out["a run that ended was cancelled later"] = within.token.wait(0.2)  # past its limit
out["timers"] = len(timers)
print(json.dumps(out))
"""


def test_under_gevent_a_runs_time_limit_is_a_timer_of_the_loop_not_a_thread():
    # A patched threading.Timer is a greenlet made and started for every run (220 us of CPU).
    done = subprocess.run([sys.executable, "-c", RUN_TIME_LIMITS_UNDER_GEVENT], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {
        "cancelled": True, "idle": True, "code": "RUN_TIMEOUT", "a run that ended was cancelled later": False,
        "timers": 0,
    }  # fmt: skip


class RoutesPlugin:
    name = "extras"

    def __init__(self):
        self.frames, self.middleware_ran = [], False

    def middleware(self, blueprint, bread):
        self.middleware_ran = True

    def routes(self, blueprint, bread):
        register_http_route(blueprint, "GET", "/extras/:name", "extras.read", lambda name: {"name": name})
        register_http_route(blueprint, "GET", "/extras-fail", "extras.fail", self.fail)

    def fail(self):
        raise RuntimeError("/srv/secret/path went wrong")

    def on_crumb(self, frame):
        self.frames.append(frame.type)


def test_plugins_add_named_routes_middleware_and_crumb_hooks(make_bread):
    plugin = RoutesPlugin()
    app = create_server(make_bread(transport="http-sse", plugins=[plugin]))
    client = app.test_client()
    assert client.get("/extras/bob").get_json() == {"name": "bob"}
    failed = client.get("/extras-fail")
    assert failed.status_code == 500 and failed.get_json() == {
        "error": {"code": "INTERNAL", "message": "internal error: the server's log has the details"}
    }
    client.post("/agents/echo/run", json={"input": "hi"}).get_data()
    assert plugin.middleware_ran and plugin.frames[0] == "agent:run:start" and plugin.frames[-1] == "agent:run:end"
    assert set(app.http_actions.values()) >= {"extras.read", HTTP_ACTIONS.run_start, HTTP_ACTIONS.session_cleanup}


def test_embedding_leaves_the_host_app_alone(make_bread):
    app = Flask("host")
    app.get("/")(lambda: "mine")
    BreadSync(app, make_bread(transport="http-sse"), url_prefix="/bread")
    client = app.test_client()
    assert client.get("/", headers={"Host": "example.com"}).data == b"mine"
    assert client.get("/bread/agents", headers={"Host": "example.com"}).status_code == 403
    assert client.get("/bread/agents").status_code == 200
    events = sse_events(client.post("/bread/agents/echo/run", json={"input": "hi"}))
    assert events[-1]["payload"]["output"] == "hi"


def test_init_app_twice_is_a_clear_error(make_bread):
    app = Flask("host")
    BreadSync(app, make_bread(transport="http-sse"))
    with pytest.raises(RuntimeError, match="already registered"):
        BreadSync(app, make_bread(transport="http-sse"))


def test_a_transport_that_cannot_mount_is_a_clear_error(make_bread):
    with pytest.raises(TypeError, match="http_chunked or http_sse"):
        create_server(make_bread())


def test_unknown_routes_and_methods_keep_the_error_shape(client):
    assert client.get("/nope").get_json() == {"error": {"code": "ROUTE_NOT_FOUND", "message": "Not Found"}}
    assert client.delete("/agents").status_code == 405


def test_the_demo_config_is_fresh_each_time():
    assert demo_config() is not demo_config()


DRAIN_CHECK = """
from gevent import monkey; monkey.patch_all()
import gevent
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.transports import stream

bread = create_bread(config().model_copy(update={"store": "memory", "transport": stream.transport()}))
run = bread.run("echo", "one two three")
seen = []

def watch():
    while not seen or seen[-1] < 3:
        seen.append(bread.store.last_seq(run.run_id))
        gevent.sleep(0)

watcher = gevent.spawn(watch)
gevent.spawn(run.drain).join()
watcher.join()
print(sorted(set(seen)))
"""


def test_draining_a_run_lets_other_greenlets_run_after_each_durable_crumb():
    # The echo model never blocks, so without those turns the whole run would pass in one go.
    done = subprocess.run([sys.executable, "-c", DRAIN_CHECK], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[0, 1, 3]", done.stderr[-2000:]


def test_a_gunicorn_worker_collects_its_youngest_garbage_less_often(monkeypatch):
    from bread_sync.server import gunicorn_conf, lifecycle

    monkeypatch.setattr(lifecycle, "started", lambda worker: None)
    before = gc.get_threshold()
    try:
        gunicorn_conf.post_worker_init(object())
        assert gc.get_threshold() == (gunicorn_conf.GC_YOUNG_OBJECTS, *before[1:])
        assert gc.get_freeze_count() > 0  # what the worker made to start is frozen
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_slow_takes_a_count_alone_its_ticks_100_ms_apart(client):
    ticks = client.get("/agents/slow").get_json()["inputSchema"]["anyOf"][1]  # [0] is the plain text
    assert ticks["required"] == ["count"] and ticks["properties"]["delayMs"]["default"] == 100
    answer = client.post("/agents/slow/run", json={"input": {"count": 2}})
    assert answer.status_code == 200
    assert '"output":"tick 1 tick 2 "' in answer.get_data(as_text=True).replace(": ", ":")
