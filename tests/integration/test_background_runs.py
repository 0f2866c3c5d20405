"""Background runs (issue 27 item 3) on real servers, with either executor: inline (gunicorn
with gevent, two workers, each running a webhook sender) and huey (a web server and two
``bread-sync worker`` processes on one SQLite store, the fixtures of test_queued_runs.py).
``Prefer: respond-async`` answers 202 with the run's Location; ``wait`` answers its end, its
pause, or 202 when its timeout passes first; a webhook on 127.0.0.1 gets each report once,
signed, also when its first attempt answers 500; a private webhook is refused where the setting
does not allow it; the Python client's background send and wait, and ``invoke --background``."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import time
import uuid

import pytest

from tests.test_cli import cli
from tests.test_cli import env as cli_env
from tests.webhook_receiver import Receiver

from .servers import Server
from .test_faults import FAULT_ENV
from .test_queued_runs import place, web, workers  # noqa: F401 - the huey deployment's fixtures

env = cli_env  # the CLI tests' child environment, as this module's fixture
ASYNC = {"Prefer": "respond-async"}
#: Long enough to wait on, cancel or time out: 60 steps of 100 ms.
STEPPING = {"count": 60, "delayMs": 100}
WAIT_SECONDS = 30.0
DELIVERY_SECONDS = 30.0


@pytest.fixture(scope="module")
def inline(tmp_path_factory):
    """Two gevent workers (two webhook senders) running runs inline, webhooks to 127.0.0.1 allowed."""
    home = tmp_path_factory.mktemp("background")
    env = {**FAULT_ENV, "BREAD_ALLOW_PRIVATE_WEBHOOKS": "1"}
    server = Server("background", home, home / "bread.db", "http-sse", workers=2, env=env)
    yield server.start()
    server.stop()


@pytest.fixture(params=["inline", "huey"])
def deployment(request):
    """The web server to send to, and its store's file: inline, or huey with two workers."""
    if request.param == "inline":
        return request.getfixturevalue("inline")
    request.getfixturevalue("workers")
    return request.getfixturevalue("web")[0]


@pytest.fixture
def hook():
    receiver = Receiver()
    yield receiver
    receiver.close()


def started(http, server, path, body):
    answer = http.post(server.url + path, json=body, headers=ASYNC)
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["runId"]
    assert answer.json() == {"runId": run_id, "status": "queued"} and answer.headers["Location"] == f"/runs/{run_id}"
    assert answer.headers["Preference-Applied"] == "respond-async"
    return run_id


def waited(http, server, run_id, timeout=WAIT_SECONDS):
    answer = http.get(f"{server.url}/runs/{run_id}/wait", params={"timeout": timeout}, timeout=timeout + 30)
    return answer.status_code, answer.json()


def test_a_background_run_is_202_and_its_wait_answers_its_output(http, deployment):
    run_id = started(http, deployment, "/agents/echo/run", {"input": "in the background"})
    assert http.get(deployment.url + f"/runs/{run_id}").json()["id"] == run_id  # the Location
    status, report = waited(http, deployment, run_id)
    assert status == 200 and (report["status"], report["output"]) == ("completed", "in the background")


def test_a_wait_answers_the_pause_and_the_background_resume_goes_on(http, deployment):
    run_id = started(http, deployment, "/agents/writer/run", {"input": {"topic": "spelt"}})
    status, paused = waited(http, deployment, run_id)
    assert status == 200 and paused["status"] == "paused" and paused["checkpoint"]["toolName"] == "publish"
    resumed = started(
        http, deployment, f"/resume/{paused['checkpoint']['checkpointId']}", {"response": {"approved": True}}
    )
    status, ended = waited(http, deployment, resumed)
    assert resumed == run_id and status == 200 and (ended["status"], ended["output"]) == ("completed", "Published.")


def test_a_wait_whose_timeout_passes_first_is_202(http, deployment):
    run_id = started(http, deployment, "/agents/stepper/run", {"input": STEPPING})
    status, report = waited(http, deployment, run_id, timeout=0.2)
    assert status == 202 and report["status"] in ("queued", "running") and report["output"] is None
    assert http.post(f"{deployment.url}/runs/{run_id}/cancel").status_code == 200
    status, report = waited(http, deployment, run_id)
    assert status == 200 and report["status"] == "cancelled" and report["error"]["code"] == "RUN_CANCELLED"


def test_the_webhook_gets_each_report_once_signed_also_after_a_500(http, deployment, hook):
    hook.fail = 1
    webhook = {"url": hook.url, "secret": "shh-" + uuid.uuid4().hex}
    run_id = started(http, deployment, "/agents/writer/run", {"input": {"topic": "emmer"}, "webhook": webhook})
    ((paused, headers, raw),) = hook.wait_for(1, DELIVERY_SECONDS)
    assert (paused["id"], paused["status"], headers["Bread-Run-Id"]) == (run_id, "paused", run_id)
    assert (
        headers["Bread-Signature"] == "sha256=" + hmac.new(webhook["secret"].encode(), raw, hashlib.sha256).hexdigest()
    )
    checkpoint_id = paused["checkpoint"]["checkpointId"]
    assert started(http, deployment, f"/resume/{checkpoint_id}", {"response": {"approved": True}}) == run_id
    _, (ended, headers, raw) = hook.wait_for(2, DELIVERY_SECONDS)
    assert (ended["status"], ended["output"]) == ("completed", "Published.")
    assert (
        headers["Bread-Signature"] == "sha256=" + hmac.new(webhook["secret"].encode(), raw, hashlib.sha256).hexdigest()
    )
    assert _settled(deployment.db, run_id) == (2, 1) and hook.refused == 1
    assert len(hook.received) == 2  # once each, whichever of the senders took it


def _signature(secret, raw):
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def _settled(db, run_id):
    """(delivered, done) of the run's webhook once no sender holds it and it is done."""
    deadline = time.monotonic() + DELIVERY_SECONDS
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as connection:
            row = connection.execute(
                "SELECT delivered, done, claimed_by FROM push_configs WHERE task_id = ?", (run_id,)
            ).fetchone()
        if row is not None and row[1] and row[2] is None:
            return row[:2]
        time.sleep(0.05)
    raise AssertionError(f"the webhook of {run_id} was not settled within {DELIVERY_SECONDS} s")


def test_a_private_webhook_is_refused_before_any_run_without_the_setting(http, pool, hook):
    strict = pool.primary("http-sse")
    session = f"ses_{uuid.uuid4().hex}"
    body = {"input": "x", "session": {"id": session}, "webhook": {"url": hook.url}}
    for headers in (ASYNC, {}):
        answer = http.post(f"{strict.url}/agents/echo/run", json=body, headers=headers)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_REQUEST"
    assert http.get(f"{strict.url}/runs", params={"session": session}).json() == [] and hook.received == []


def test_the_clients_background_send_and_wait(deployment):
    from bread_sync.client import create_agent_client, http

    with create_agent_client(http.transport(deployment.url)) as client:
        thread = client.thread()
        run = thread.send("writer", {"topic": "einkorn"}, background=True)
        paused = run.wait(timeout=WAIT_SECONDS)
        assert (paused.run_id, paused.status, paused.pause["kind"]) == (run.run_id, "paused", "approval")
        client.respond(paused.pause["checkpointId"], {"approved": True}).wait_until_idle()
        assert run.wait().output == "Published."
        stepping = thread.send("stepper", STEPPING, background=True)
        assert stepping.wait(timeout=0.2).status in ("queued", "running")
        assert stepping.cancel() and stepping.wait().status == "cancelled"


def test_invoke_background_prints_the_run_id(http, env, deployment):
    result = cli(env, "invoke", "--background", "--url", deployment.url, "echo", "later")
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    assert waited(http, deployment, run_id)[1]["output"] == "later"
    refused = cli(env, "invoke", "--background", "echo", "later")  # in-process: it would die with the CLI
    assert refused.returncode == 2 and "--background needs --url" in refused.stderr
