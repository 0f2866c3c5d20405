"""``useChat`` (npm's ``@ai-sdk/react``, unchanged) in headless Chromium against a real gunicorn
server's AI SDK route: one full chat with the writer, its approval answered by a click. The page
(tests/node/ai_sdk_page.jsx) is bundled with esbuild from tests/node and served at the server's
own origin by Playwright's routing, so its requests to ``/ai-sdk/writer`` are the server's."""

from __future__ import annotations

import subprocess

import httpx2 as httpx
import pytest

from tests.integration.conftest import node_clients  # noqa: F401 - the npm packages, installed once

PAGE = '<!doctype html><html><body><div id="root"></div><script type="module" src="app.js"></script></body></html>'


@pytest.fixture(scope="module")
def chat_page(node_clients):  # noqa: F811 - the fixture imported above
    done = subprocess.run(["node", "build_ai_sdk_page.mjs"], cwd=node_clients, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def serve_page(page, base: str, script: str) -> str:
    """The chat page at ``base``'s origin (nothing of it on the server); its url."""
    page.route(f"{base}/test-chat/", lambda route: route.fulfill(body=PAGE, content_type="text/html"))
    page.route(f"{base}/test-chat/app.js", lambda route: route.fulfill(body=script, content_type="text/javascript"))
    return f"{base}/test-chat/"


def test_use_chat_runs_the_writer_through_its_approval(page, servers, chat_page):
    server = servers("sse")
    page.goto(serve_page(page, server.url, chat_page))
    page.fill("#input", "rye")
    page.click("#send")
    approve = page.wait_for_selector("#approve")
    assert approve.inner_text() == "Approve publishing rye"
    assert page.inner_text("li.assistant .text") == "Drafting a post about rye."
    page.wait_for_selector('#status:text-is("ready")')
    approve.click()
    page.wait_for_selector('.tool[data-state="output-available"]')
    page.wait_for_function("() => document.querySelector('li.assistant').textContent.includes('Published.')")
    page.wait_for_selector('#status:text-is("ready")')
    assert page.locator("li.assistant").count() == 1  # the continuation joined the paused message
    assert page.inner_text(".tool .output") == '{"published":true,"title":"rye"}'
    assert page.locator("#error").count() == 0
    sessions = httpx.get(f"{server.url}/runs", params={"agent": "writer"}, timeout=10).json()
    assert any(run["status"] == "completed" for run in sessions)
