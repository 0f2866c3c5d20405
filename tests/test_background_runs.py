"""Background runs in process (issue 27 item 3): ``Prefer: respond-async`` answers 202 with the
run's Location, ``GET /runs/<runId>/wait`` answers its report at its end or pause (202 when its
timeout passes first), and a run's webhook gets one signed POST at each pause and at its end,
once, also when its first attempt fails, with the ``traceparent`` of its span when traced; a
private or unreadable webhook url is refused before any run."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from bread_sync import crumbs as c
from bread_sync.crumbs import Frame
from bread_sync.demo import config as demo_config
from bread_sync.server import create_server
from bread_sync.webhooks import sender as sender_module
from bread_sync.webhooks.runs import RunWebhooks, sign, start_sender, subscribe

from .contract import test_store as contract_store
from .webhook_receiver import Receiver

ASYNC = {"Prefer": "respond-async"}
DELIVERY_SECONDS = 20.0


def serve(make_bread, **server):
    bread = make_bread(demo_config(), transport="http-sse", server=server)
    return bread, create_server(bread).test_client()


@pytest.fixture
def hook():
    receiver = Receiver()
    yield receiver
    receiver.close()


def started(client, path, body, headers=ASYNC):
    answer = client.post(path, json=body, headers=headers)
    assert answer.status_code == 202, answer.get_data(as_text=True)
    run_id = answer.get_json()["runId"]
    assert answer.get_json() == {"runId": run_id, "status": "queued"}
    assert answer.headers["Location"] == f"/runs/{run_id}" and answer.headers["Preference-Applied"] == "respond-async"
    return run_id


def test_a_background_run_answers_202_and_its_wait_answers_its_output(make_bread):
    _, client = serve(make_bread)
    run_id = started(client, "/agents/echo/run", {"input": "hello there"}, {"Prefer": "wait=5, Respond-Async"})
    report = client.get(f"/runs/{run_id}/wait?timeout=10")
    assert report.status_code == 200
    body = report.get_json()
    assert (body["id"], body["status"], body["output"], body["error"]) == (run_id, "completed", "hello there", None)
    assert client.get(f"/runs/{run_id}").get_json()["status"] == "completed"  # the Location


def test_respond_async_is_heard_in_any_of_several_prefer_headers(make_bread):
    # The WSGI server joins repeated headers into one, as the test client does.
    _, client = serve(make_bread)
    started(client, "/agents/echo/run", {"input": "hi"}, [("Prefer", "respond-async; x=1"), ("Prefer", "wait=5")])
    streamed = client.post("/agents/echo/run", json={"input": "hi"}, headers=[("Prefer", "wait=5"), ("Prefer", "x")])
    assert streamed.status_code == 200 and streamed.mimetype == "text/event-stream"


def test_a_wait_answers_a_pause_with_its_checkpoint_and_a_background_resume_goes_on(make_bread):
    _, client = serve(make_bread)
    run_id = started(client, "/agents/writer/run", {"input": {"topic": "bread"}})
    paused = client.get(f"/runs/{run_id}/wait?timeout=10").get_json()
    assert paused["status"] == "paused" and paused["checkpoint"]["kind"] == "approval"
    checkpoint_id = paused["checkpoint"]["checkpointId"]
    assert started(client, f"/resume/{checkpoint_id}", {"response": {"approved": True}}) == run_id
    ended = client.get(f"/runs/{run_id}/wait?timeout=10").get_json()
    assert ended["status"] == "completed" and ended["checkpoint"] is None


def test_a_wait_whose_timeout_passes_first_answers_202_with_the_record(make_bread):
    _, client = serve(make_bread)
    run_id = started(client, "/agents/slow/run", {"input": {"count": 200, "delayMs": 50}})
    answer = client.get(f"/runs/{run_id}/wait?timeout=0.05")
    assert answer.status_code == 202 and answer.get_json()["status"] in ("queued", "running")
    assert answer.get_json()["output"] is None
    assert client.post(f"/runs/{run_id}/cancel").status_code == 200
    cancelled = client.get(f"/runs/{run_id}/wait?timeout=10").get_json()
    assert cancelled["status"] == "cancelled" and set(cancelled["error"]) == {"code", "message"}  # as the wire's
    assert cancelled["error"]["code"] == "RUN_CANCELLED"


@pytest.mark.parametrize("timeout", ["-1", "61", "soon"])
def test_a_wait_timeout_past_the_bounds_is_invalid(make_bread, timeout):
    _, client = serve(make_bread)
    run_id = started(client, "/agents/echo/run", {"input": "x"})
    answer = client.get(f"/runs/{run_id}/wait?timeout={timeout}")
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "INVALID_REQUEST"


def test_a_wait_for_no_run_is_not_found(make_bread):
    _, client = serve(make_bread)
    assert client.get("/runs/nope/wait?timeout=0").get_json()["error"]["code"] == "RUN_NOT_FOUND"


def test_a_failure_to_start_a_background_run_is_a_json_error(make_bread):
    _, client = serve(make_bread)
    answer = client.post("/agents/nobody/run", json={"input": "x"}, headers=ASYNC)
    assert answer.status_code == 404 and answer.get_json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_the_webhook_gets_a_signed_report_at_the_pause_and_at_the_end_once_after_a_failed_attempt(make_bread, hook):
    bread, client = serve(make_bread, allow_private_webhooks=True)
    hook.fail = 1  # the first attempt answers 500: retried with back-off
    webhook = {"url": hook.url, "secret": "s3cret"}
    run_id = started(client, "/agents/writer/run", {"input": {"topic": "bread"}, "webhook": webhook})
    ((paused, headers, raw),) = hook.wait_for(1, DELIVERY_SECONDS)
    assert paused["id"] == run_id and paused["status"] == "paused" and paused["checkpoint"]["kind"] == "approval"
    expected = "sha256=" + hmac.new(b"s3cret", raw, hashlib.sha256).hexdigest()
    assert headers["Bread-Signature"] == expected == sign("s3cret", raw) and headers["Bread-Run-Id"] == run_id
    # The resume's stream, as a client reads it; the webhook of the run goes on.
    resumed = client.post(f"/resume/{paused['checkpoint']['checkpointId']}", json={"response": {"approved": True}})
    assert b"agent:run:end" in resumed.get_data()
    _, (ended, _, raw) = hook.wait_for(2, DELIVERY_SECONDS)
    assert ended["status"] == "completed" and ended["output"] == "Published." and ended["seq"] > paused["seq"]
    assert hook.refused == 1
    (config,) = _settled(bread, run_id)
    assert config["delivered"] == 2 and config["done"] and len(hook.received) == 2  # once each


def _settled(bread, run_id):
    """The run's subscription once its sender is done with it."""
    deadline = time.monotonic() + DELIVERY_SECONDS
    while time.monotonic() < deadline:
        configs = bread.store.list_push_configs(run_id)
        if configs and configs[0]["done"] and configs[0]["claimedBy"] is None:
            return configs
        time.sleep(0.02)
    raise AssertionError(f"the webhook of {run_id} was not settled: {bread.store.list_push_configs(run_id)}")


def test_a_webhook_without_a_secret_is_not_signed(make_bread, hook):
    _, client = serve(make_bread, allow_private_webhooks=True)
    run_id = started(client, "/agents/echo/run", {"input": "hi", "webhook": {"url": hook.url}})
    ((ended, headers, _),) = hook.wait_for(1, DELIVERY_SECONDS)
    assert ended["id"] == run_id and ended["output"] == "hi" and "Bread-Signature" not in headers
    assert "traceparent" not in {name.lower() for name in headers}  # not traced


def test_a_traced_runs_webhook_posts_carry_the_traceparent_of_its_latest_drivings_span(make_bread, hook):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread, client = serve(make_bread, allow_private_webhooks=True)
    bread.tracer = otel.tracer(spans)
    run_id = started(client, "/agents/writer/run", {"input": {"topic": "bread"}, "webhook": {"url": hook.url}})
    ((paused, paused_headers, _),) = hook.wait_for(1, DELIVERY_SECONDS)
    client.post(f"/resume/{paused['checkpoint']['checkpointId']}", json={"response": {"approved": True}}).get_data()
    _, (ended, ended_headers, _) = hook.wait_for(2, DELIVERY_SECONDS)

    runs = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "invoke_agent writer"), key=lambda s: s.start_time
    )
    assert [span.attributes["bread.run.id"] for span in runs] == [run_id, run_id]
    names = [f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-{s.context.trace_flags:02x}" for s in runs]
    assert [paused_headers["traceparent"], ended_headers["traceparent"]] == names


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://localhost/x", "http://10.0.0.1/", "http://[::1]/"])
def test_a_private_webhook_is_refused_before_any_run_without_the_setting(make_bread, url):
    bread, client = serve(make_bread)
    for headers in (ASYNC, {}):
        answer = client.post("/agents/echo/run", json={"input": "x", "webhook": {"url": url}}, headers=headers)
        assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "INVALID_REQUEST"
        assert "private" in answer.get_json()["error"]["message"]
    assert bread.store.list_runs() == []


@pytest.mark.parametrize("url", ["ftp://example.com/x", "/relative", "http://exa mple.com/", "http://example.com:0/"])
def test_an_unreadable_webhook_url_is_refused_before_any_run(make_bread, url):
    bread, client = serve(make_bread, allow_private_webhooks=True)
    answer = client.post("/pipelines/x/run", json={"input": "x", "webhook": {"url": url}}, headers=ASYNC)
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "INVALID_REQUEST"
    assert bread.store.list_runs() == []


def test_the_in_process_client_sends_in_the_background_and_waits(make_bread):
    from bread_sync.client import create_agent_client, local

    bread = make_bread()
    with create_agent_client(local.transport(bread)) as client:
        thread = client.thread()
        run = thread.send("writer", {"topic": "rye"}, background=True)
        paused = run.wait(timeout=10)
        assert (paused.run_id, paused.status, paused.pause["kind"]) == (run.run_id, "paused", "approval")
        client.respond(paused.pause["checkpointId"], {"approved": True}).wait_until_idle()
        assert run.wait().output == "Published."
        slow = thread.send("slow", {"count": 200, "delayMs": 50}, background=True)
        assert slow.wait(timeout=0.05).status in ("queued", "running")
        assert slow.cancel() and slow.wait(timeout=10).status == "cancelled"


# -- what the sender reads, and when it looks ------------------------------------------------------


def _running(bread, run_id, steps):
    """A running run whose log holds ``steps`` tool calls."""
    bread.store.create_run(contract_store.run_record(run_id, status="running", checkpointId=None))
    bread.store.append_crumbs(
        run_id, [Frame(run_id, seq, {"type": "tool:call", "runId": run_id}) for seq in range(1, steps + 1)]
    )


def _end(bread, run_id, seq):
    """End the run as its driver would here: the crumb in the log, the record, then the publish."""
    end = Frame(run_id, seq, {"type": c.AGENT_RUN_END, "runId": run_id, "output": "done"})
    bread.store.append_crumbs(run_id, [end])
    bread.store.update_run(run_id, status="completed")
    bread.publish(end)


def test_rechecks_of_a_running_run_read_only_the_crumbs_appended_since(make_bread, monkeypatch):
    bread = make_bread()
    _running(bread, "r1", 500)
    rows, get_crumbs = [], bread.store.get_crumbs

    def counted(*args, **kwargs):
        frames = get_crumbs(*args, **kwargs)
        rows.extend(frames)
        return frames

    monkeypatch.setattr(bread.store, "get_crumbs", counted)
    mount = RunWebhooks(allow_private_webhooks=True)
    for _ in range(5):
        assert mount.events(bread, bread.store.get_run("r1")) == []
    _end(bread, "r1", 501)
    (report,) = mount.events(bread, bread.store.get_run("r1"))
    assert report["status"] == "completed" and report["output"] == "done" and report["seq"] == 501
    assert len(rows) == 501  # each crumb read once, not the whole log at each look


def test_a_run_that_ends_here_wakes_the_sender_before_its_recheck(make_bread, hook, monkeypatch):
    monkeypatch.setattr(sender_module, "RECHECK_SECONDS", 60.0)  # no recheck within the test
    bread = make_bread(server={"allow_private_webhooks": True})
    _running(bread, "r1", 3)
    subscribe(bread.store, "r1", hook.url, None)
    assert start_sender(bread, allow_private_webhooks=True)
    deadline = time.monotonic() + DELIVERY_SECONDS
    while bread.store.list_push_configs("r1")[0]["nextAttemptAt"] < time.time() + 30 and time.monotonic() < deadline:
        time.sleep(0.01)  # until the sender looked, found nothing new, and parked it for a minute
    _end(bread, "r1", 4)
    ((ended, _, _),) = hook.wait_for(1, DELIVERY_SECONDS)
    assert ended["id"] == "r1" and ended["status"] == "completed"
