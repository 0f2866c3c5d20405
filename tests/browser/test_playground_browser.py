"""The playground page in headless Chromium against real gunicorn servers: runs in either wire,
pauses answered, a cancel, a dropped connection, a tail by id, sessions, the auth flow, and the
text a continuation says was lost taken away.

What the page shows is checked against what the server logged, through the API."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.integration.servers import Server

from .auth_config import KEY

TICKS = 30


def completed(page, status: str = "completed") -> None:
    page.wait_for_selector(f'#status[data-status="{status}"]')


def open_page(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#target option", state="attached")


def choose(page, agent: str) -> None:
    page.select_option("#target", f"agent:{agent}")
    page.wait_for_function("id => document.getElementById('description').textContent !== ''", arg=agent)


def start(page, server, agent: str, **fields: str) -> None:
    """Open the page, pick ``agent``, fill its form (``text=`` is the text box) and run it."""
    open_page(page, f"{server.url}/_bread/")
    choose(page, agent)
    for name, value in fields.items():
        page.fill("#input" if name == "text" else f"#fields input[name={name}]", value)
    page.click("#run")


def run_id(page) -> str:
    page.wait_for_function("() => document.getElementById('run-id').textContent.startsWith('run_')")
    return page.inner_text("#run-id")


def log(base: str, run: str, headers=None) -> list[dict]:
    """The run's log as the SSE passive stream replays it: the crumbs, in order."""
    answer = httpx.get(f"{base}/runs/{run}/stream", headers={"Accept": "text/event-stream", **(headers or {})},
                       timeout=10)  # fmt: skip
    return [json.loads(line[6:])["payload"] for line in answer.text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("wire", ["sse", "ndjson"])
def test_echo_streams_into_the_page_from_either_wire(page, servers, wire):
    server = servers(wire)
    open_page(page, server.url)  # GET / sends the browser to /_bread/

    assert page.url == f"{server.url}/_bread/"
    page.fill("#input", "Hello from bread")
    page.click("#run")
    completed(page)

    assert page.inner_text("#transcript .text") == "Hello from bread"
    crumbs = log(server.url, run_id(page))
    assert crumbs[-1]["type"] == "agent:run:end"
    assert page.inner_text("#seq") == str(len([c for c in crumbs if c["type"] != "text:delta"]) + 1)


@pytest.mark.parametrize(("button", "approved", "said"), [("approve", True, "Published."),
                                                          ("deny", False, "Not published.")])  # fmt: skip
def test_the_writer_s_publish_is_approved_or_denied(page, servers, button, approved, said):
    server = servers("sse")
    start(page, server, "writer", topic="rye")

    page.wait_for_selector(f"#pause .{button}")
    assert page.inner_text("#pause p") == 'Approve publish({"title":"rye"})?'
    assert page.get_attribute("#status", "data-status") == "paused"
    page.click(f"#pause .{button}")
    completed(page)

    assert page.locator("#transcript .text").last.inner_text() == said
    resumed = [c for c in log(server.url, run_id(page)) if c["type"] == "human:resumed"]
    assert [c["response"] for c in resumed] == [{"approved": approved}]
    assert page.locator("#transcript .tool").count() == 1


def test_a_paused_run_is_cancelled(page, servers):
    server = servers("sse")
    start(page, server, "writer", topic="barley")
    page.wait_for_selector("#pause .approve")

    page.click("#cancel")  # no stream is open during a pause: the page tails the run to its end
    completed(page, "cancelled")

    assert page.is_hidden("#pause")
    assert httpx.get(f"{server.url}/runs/{run_id(page)}", timeout=10).json()["status"] == "cancelled"


def test_the_interviewer_is_answered(page, servers):
    server = servers("ndjson")
    start(page, server, "interviewer")

    page.wait_for_selector("#pause .answer")
    assert page.inner_text("#pause p") == "What is your name?"
    page.fill("#pause .answer", "Ada")
    page.click("#pause .send")
    completed(page)

    assert page.locator("#transcript .text").last.inner_text() == "Thanks, Ada."


def test_slow_is_cancelled(page, servers):
    server = servers("sse")
    start(page, server, "slow", text="200 ticks")
    page.wait_for_function("() => document.querySelector('#transcript .text')?.textContent.includes('tick 3 ')")

    page.click("#cancel")
    completed(page, "cancelled")

    assert "RUN_CANCELLED" in page.inner_text("#transcript .failure")
    assert "tick 200" not in page.inner_text("#transcript")
    record = httpx.get(f"{server.url}/runs/{run_id(page)}", timeout=10).json()
    assert record["status"] == "cancelled"


def test_a_dropped_connection_is_resumed_with_every_tick_once(page, servers, proxy):
    open_page(page, f"{proxy.url}/_bread/")
    choose(page, "slow")
    page.fill("#fields input[name=count]", str(TICKS))
    page.fill("#fields input[name=delayMs]", "100")
    page.click("#run")
    shows = "n => document.querySelector('#transcript .text')?.textContent.includes(`tick ${n} `)"

    page.wait_for_function(shows, arg=4)
    assert proxy.cut() >= 1  # the fetch that started the run: the page tails it instead
    page.wait_for_function(shows, arg=12)
    assert "/stream?after=1" in proxy.sent()  # an EventSource, from the last durable seq
    assert proxy.cut() >= 1  # now the EventSource: it reconnects by itself
    completed(page)

    assert "Last-Event-ID: 1" in proxy.sent()
    assert page.text_content("#transcript .text") == "".join(f"tick {n} " for n in range(1, TICKS + 1))
    assert page.locator("#transcript .text").count() == 1


def test_a_run_is_tailed_by_id_from_the_start_or_from_a_seq(page, servers):
    server = servers("ndjson")
    started = httpx.post(f"{server.url}/agents/echo/run", json={"input": "tail me"}, timeout=10)
    run = started.headers["bread-run-id"]
    open_page(page, f"{server.url}/_bread/")

    page.fill("#tail-run", run)
    page.click("#tail")
    completed(page)
    assert (page.inner_text("#run-id"), page.inner_text("#transcript .text")) == (run, "tail me")
    assert page.inner_text("#seq") == "3"

    page.fill("#tail-after", "2")  # after the text: only the end is left
    page.click("#tail")
    completed(page)
    assert page.locator("#transcript .text").count() == 0
    assert page.inner_text("#seq") == "3"


def test_a_paused_run_opened_by_id_is_answered_from_its_tail(page, servers):
    server = servers("ndjson")
    with httpx.stream("POST", f"{server.url}/agents/writer/run", json={"input": "spelt"}, timeout=10) as started:
        run = started.headers["bread-run-id"]
        started.read()
    open_page(page, f"{server.url}/_bread/")

    page.fill("#tail-run", run)
    page.click("#tail")
    page.wait_for_selector("#pause .approve")
    page.click("#pause .approve")
    completed(page)

    assert page.locator("#transcript .text").last.inner_text() == "Published."


def test_nested_work_is_shown_nested(page, servers):
    server = servers("sse")
    start(page, server, "manager")
    completed(page)

    assert page.inner_text("details.subagent > summary") == "subagent echo"
    assert page.inner_text("details.subagent .text") == "hello from the manager"
    assert page.inner_text("details.task > summary").startswith("task word-count")

    choose(page, "counter")
    page.fill("#fields input[name=until]", "3")
    page.click("#run")
    completed(page)
    assert page.locator("details.iteration").count() == 3
    assert page.inner_text("details.iteration >> nth=2").endswith("3")


def test_a_pipeline_runs_its_steps_nested(page, servers):
    server = servers("ndjson")
    open_page(page, f"{server.url}/_bread/")
    page.select_option("#target", "pipeline:draft-then-echo")
    page.fill("#input", "oats")
    page.click("#run")
    page.wait_for_selector("#pause .approve")
    page.click("#pause .approve")
    completed(page)

    assert page.locator("details.step").count() == 2
    assert page.inner_text("details.step >> nth=0 >> summary") == "step 1: writer"


def test_the_artist_s_image_is_shown_inline(page, servers):
    server = servers("sse")
    start(page, server, "artist")
    completed(page)

    image = page.wait_for_selector(".file img")
    assert image.get_attribute("src").startswith("blob:")
    assert page.evaluate("img => img.complete && img.naturalWidth", image) == 1


def test_a_session_s_history_is_listed_and_continued(page, servers):
    server = servers("sse")
    session = f"ses-browser-{uuid.uuid4().hex[:8]}"
    open_page(page, f"{server.url}/_bread/")
    page.fill("#input", "first words")
    page.fill("#session", session)
    page.click("#run")
    completed(page)
    page.fill("#session", "")

    page.click("#list-sessions")
    page.locator("#sessions li", has_text=session).locator("button").click()
    page.wait_for_selector("#history .message")
    assert page.locator("#history .message").all_inner_texts() == ["user: first words", "assistant: first words"]
    page.click("#history button")
    assert page.input_value("#session") == session
    page.fill("#input", "more words")
    page.click("#run")
    completed(page)

    messages = httpx.get(f"{server.url}/sessions/{session}", timeout=10).json()["messages"]
    assert [m["content"] for m in messages] == ["first words", "first words", "more words", "more words"]


def test_the_auth_flow(page, servers):
    server = servers("auth")
    assert httpx.get(f"{server.url}/agents", timeout=10).status_code == 401
    loaded = page.goto(server.url)  # the page loads without a credential

    assert loaded.status == 200 and page.url == f"{server.url}/_bread/"
    page.wait_for_selector("#key-form:not([hidden])")
    page.fill("#key", "not-the-key")
    page.click("#key-form button")
    page.wait_for_function("() => document.getElementById('problem').textContent.includes('refused')")
    page.fill("#key", KEY)
    page.click("#key-form button")
    page.wait_for_selector("#target option", state="attached")
    assert page.is_hidden("#key-form")

    choose(page, "artist")
    page.click("#run")
    completed(page)
    image = page.wait_for_selector(".file img")  # fetched with the bearer: anonymous, it is 401
    assert page.evaluate("img => img.naturalWidth", image) == 1
    uri = next(c["uri"] for c in log(server.url, run_id(page), {"Authorization": f"Bearer {KEY}"})
               if c["type"] == "file:generated")  # fmt: skip
    assert httpx.get(f"{server.url}{uri}", timeout=10).status_code == 401

    run = run_id(page)
    page.fill("#tail-run", run)
    page.click("#tail")  # an EventSource: it can only open the stream with a stream token
    completed(page)
    assert re.fullmatch(r"\d+", page.inner_text("#seq"))
    page.wait_for_selector(".file img")  # the tail's own download of the file, with the bearer
    assert page.locator(".file img").count() == 1


@pytest.mark.parametrize("uri", ["///127.0.0.1:9/x", "\\\\127.0.0.1:9/x", "https://127.0.0.1:9/x"])
def test_the_page_sends_its_key_to_no_uri_but_its_own_files(page, tmp_path, uri):
    """A ``file:generated`` crumb whose uri resolves to another origin is shown, never fetched:
    the page's key goes to its own server's ``/files/<id>`` only (its CSP would block the fetch
    too; a violation of it is what the page attempting one looks like)."""
    server = Server("hostile-files", tmp_path, tmp_path / "bread.db", "http-sse", env={
        "BREAD_CONFIG": "tests.browser.hostile_files_config:config", "BREAD_PLAYGROUND": "1",
        "HOSTILE_FILE_URI": uri}).start()  # fmt: skip
    try:
        page.add_init_script(VIOLATIONS_RECORDED)
        elsewhere: list[str] = []
        page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(server.url) else None)
        page.goto(server.url)
        page.fill("#key", KEY)
        page.click("#key-form button")
        page.wait_for_selector("#target option", state="attached")
        choose(page, "artist")
        page.click("#run")
        completed(page)

        shown = page.wait_for_selector(".file")
        assert "not a file of this server" in shown.inner_text()
        assert page.evaluate("() => window.violations") == []
        assert elsewhere == []
    finally:
        server.stop()


#: Collects the page's Content-Security-Policy violations in ``window.violations``.
VIOLATIONS_RECORDED = """window.violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.violations.push(e.blockedURI));"""


def test_a_run_whose_worker_is_killed_mid_text_ends_showing_the_log_s_text(page, servers):
    """The page reads "Lost", the worker is SIGKILLed, the page tails the run from its last seq
    and the respawned worker carries it on: the lost text's segment goes."""
    server = servers("lost-text")
    marker, seen = Path(server.env["KILL_MARKER"]), Path(server.env["TEXT_SEEN"])
    marker.write_text("")
    start(page, server, "teller", text="go")
    page.wait_for_function("() => document.getElementById('transcript').textContent.includes('Lost')")
    seen.write_text("")  # the worker may die now
    completed(page)
    assert not marker.exists(), "the worker was never killed"
    assert page.locator("#transcript .text").all_text_contents() == ["Hello. ", "Lost Found again."]
    assert "carried on after seq" in page.inner_text("#transcript")


def started_by_api(base: str, agent: str, body: dict) -> str:
    """A run started through the API, read to its end or pause; its id."""
    with httpx.stream("POST", f"{base}/agents/{agent}/run", json=body, timeout=10) as answer:
        answer.read()
        return answer.headers["Bread-Run-Id"]


def test_the_runs_view_lists_recent_runs_filters_them_by_status_and_opens_one(page, servers):
    server = servers("sse")
    echoed = started_by_api(server.url, "echo", {"input": "listed words"})
    paused = started_by_api(server.url, "writer", {"input": {"topic": "spelt"}})
    open_page(page, f"{server.url}/_bread/")

    page.click("#list-runs")
    row = page.locator(f'#runs tr[data-run-id="{echoed}"]')
    row.wait_for()  # the list comes from a fetch: reading its cells does not wait for them
    agent, status, _, took, tokens = row.locator("td").all_inner_texts()
    record = httpx.get(f"{server.url}/runs/{echoed}", timeout=10).json()
    assert (agent, status, tokens) == ("echo", "completed", str((record["usage"] or {}).get("totalTokens", "")))
    assert re.fullmatch(r"\d+\.\d s", took), took
    ids = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    assert ids[:2] == [paused, echoed]  # the most recent first

    page.select_option("#runs-status", "paused")
    page.click("#list-runs")
    page.wait_for_selector(f'#runs tr[data-run-id="{echoed}"]', state="detached")
    statuses = page.locator("#runs tbody tr td:nth-child(2)").all_inner_texts()
    assert statuses and set(statuses) == {"paused"}
    page.locator(f'#runs tr[data-run-id="{paused}"] button').click()

    page.wait_for_selector("#pause .approve")
    assert page.inner_text("#run-id") == paused
