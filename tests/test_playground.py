"""The playground switch in process: when the page is served, what loads without a credential,
the browser's redirect from /, and the files a non-editable install carries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bread_sync import ServerSettings
from bread_sync.config import apply_environment
from bread_sync.demo import config as demo_config
from bread_sync.server import HTTP_ACTIONS, BreadSync, auth_plugin, create_server, playground
from bread_sync.server.openapi import document

ROOT = Path(__file__).resolve().parent.parent
KEY = "playground-key-0123456789"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
FILES = ["/_bread/", "/_bread/playground.css", "/_bread/playground.js"]


def allow_all(identity, action, args):
    return True


@pytest.fixture
def app(make_bread):
    def make(on=True, auth=False, **server):
        plugins = [auth_plugin(api_keys={"me": KEY}, env_var=None)] if auth else []
        settings = {"playground": on, "authorize": allow_all if auth else None, **server}
        return create_server(make_bread(transport="http-sse", plugins=plugins, server=settings))

    return make


@pytest.mark.parametrize("path", FILES)
def test_the_page_is_served_when_on(app, path):
    answer = app().test_client().get(path)

    assert answer.status_code == 200
    media = {"": "text/html", "playground.css": "text/css", "playground.js": "text/javascript"}
    assert answer.content_type.split(";")[0] == media[path.rpartition("/")[2]]
    assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("on", [None, False])
def test_the_page_is_not_served_unless_on(app, on):
    client = app(on=on).test_client()

    assert client.get("/_bread/").status_code == 404
    assert client.get("/", headers=BROWSER).status_code == 404


def test_the_page_references_only_its_own_files(app):
    html = app().test_client().get("/_bread/").get_data(as_text=True)
    assert "http:" not in html and "https:" not in html and '="//' not in html
    assert 'src="playground.js"' in html and 'href="playground.css"' in html


def test_a_browser_is_sent_from_the_root_to_the_page(app):
    client = app().test_client()

    answer = client.get("/", headers=BROWSER)
    assert (answer.status_code, answer.location) == (302, "/_bread/")
    # curl's */*, or no Accept at all, is not a browser: the root stays what it was.
    for headers in ({"Accept": "*/*"}, {}, {"Accept": "application/json"}):
        assert client.get("/", headers=headers).status_code == 404
    assert client.post("/", headers=BROWSER).status_code == 404


def test_the_root_of_a_prefixed_mount_sends_a_browser_to_its_page(make_bread):
    from flask import Flask

    flask_app = Flask("host")
    flask_app.config["BREAD_SYNC_PLAYGROUND"] = True
    BreadSync(flask_app, make_bread(transport="http-sse"), url_prefix="/bread")
    client = flask_app.test_client()

    assert client.get("/bread/_bread/").status_code == 200
    for root in ("/bread", "/bread/"):
        answer = client.get(root, headers=BROWSER)
        assert (answer.status_code, answer.location) == (302, "/bread/_bread/")
    assert client.get("/", headers=BROWSER).status_code == 404  # the app's own root is the app's


def test_the_host_rule_still_applies_without_auth(app):
    client = app().test_client()

    assert client.get("/_bread/", headers={"Host": "evil.example"}).status_code == 403
    assert client.get("/", headers={**BROWSER, "Host": "evil.example"}).status_code == 403  # before the redirect


def test_with_auth_on_the_page_loads_without_a_credential_and_nothing_else_does(app):
    client = app(auth=True).test_client()

    for path in FILES:
        assert client.get(path).status_code == 200, path
    assert client.get("/", headers=BROWSER).location == "/_bread/"
    # Every other path, unknown ones under /_bread/ included, still asks for a credential.
    for path in ("/agents", "/_bread/other.js", "/_bread/index.html", "/_bread/static/playground.js", "/",
                 "/openapi.json"):  # fmt: skip
        assert client.get(path).status_code == 401, path
    assert client.post("/_bread/").status_code == 401
    assert client.get("/_bread/other.js", headers={"Authorization": f"Bearer {KEY}"}).status_code == 404


def test_authorize_is_not_asked_for_the_page(app, make_bread):
    asked = []

    def authorize(identity, action, args):
        asked.append(action)
        return False

    bread = make_bread(transport="http-sse", plugins=[auth_plugin(api_keys={"me": KEY}, env_var=None)],
                       server={"playground": True, "authorize": authorize})  # fmt: skip
    client = create_server(bread).test_client()

    assert client.get("/_bread/", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert client.get("/agents", headers={"Authorization": f"Bearer {KEY}"}).status_code == 403
    assert asked == [HTTP_ACTIONS.agent_list]


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("TRUE", True), ("0", False),
                                           ("false", False)])  # fmt: skip
def test_bread_playground_sets_the_setting(monkeypatch, value, on):
    monkeypatch.setenv("BREAD_PLAYGROUND", value)
    assert apply_environment(demo_config()).server.playground is on


def test_any_other_bread_playground_is_a_config_error(monkeypatch):
    monkeypatch.setenv("BREAD_PLAYGROUND", "yes")
    with pytest.raises(ValueError, match="BREAD_PLAYGROUND must be 1, true, 0 or false, not 'yes'"):
        apply_environment(demo_config())


def _with(**server):
    return demo_config().model_copy(update={"server": ServerSettings(**server)})


@pytest.mark.parametrize(
    ("config", "host", "dev", "on"),
    [
        (_with(), "127.0.0.1", False, True),  # bread-sync start on loopback
        (_with(), "::1", False, True),
        (_with(), "localhost", True, True),  # bread-sync dev
        (_with(), "0.0.0.0", False, None),  # a public bind: off
        (_with(playground=False), "127.0.0.1", True, False),  # the config decides
        (_with(playground=True), "0.0.0.0", False, True),
        (demo_config().model_copy(update={"plugins": [auth_plugin(api_keys=[KEY], env_var=None)]}),
         "127.0.0.1", True, None),  # auth on: off unless set
    ],
)  # fmt: skip
def test_the_servers_turn_the_page_on_by_default(monkeypatch, config, host, dev, on):
    monkeypatch.delenv("BREAD_PLAYGROUND", raising=False)
    chosen = playground.default_on(config, host, dev)

    assert chosen.server.playground is on
    # The workers and the reloader's child load the config again, from the environment.
    assert os.environ.get("BREAD_PLAYGROUND") == ("1" if on and config.server.playground is None else None)


def test_plain_gunicorn_leaves_the_page_off(make_bread):
    # wsgi.py builds create_server(create_bread()): nothing turns it on but the setting.
    assert create_server(make_bread(transport="http-sse")).extensions["bread_sync"].playground is False


def test_the_page_is_in_the_openapi_document_without_security(app):
    flask_app = app(auth=True)
    with flask_app.app_context():
        doc = document(flask_app)
    ops = [doc["paths"][path]["get"] for path in FILES]

    assert {op["x-bread-action"] for op in ops} == {"playground.read"}
    assert len({op["operationId"] for op in ops}) == 3
    assert all(op["security"] == [] and "401" not in op["responses"] for op in ops)
    assert "text/event-stream" in doc["paths"]["/runs/{runId}/stream"]["get"]["responses"]["200"]["content"]


def test_a_non_editable_install_carries_the_page(monkeypatch):
    # What setuptools' build_py copies into a wheel beside the modules: every file of the page.
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)
    dist = Distribution()
    dist.parse_config_files(["setup.cfg"])
    build = dist.get_command_obj("build_py")
    build.ensure_finalized()
    carried = {(package, name) for package, _, _, names in build.data_files for name in names}
    assert {("bread_sync.server", f"static/{name}") for name, _ in playground.FILES.values()} <= carried
