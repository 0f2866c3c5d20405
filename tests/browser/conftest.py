"""Fixtures of the browser tests: headless Chromium (Debian's ``chromium``, driven by Playwright
for Python) against real gunicorn servers with the playground on.

One browser for all of them, a fresh context (no storage, no cache) per test. Where
Playwright or ``/usr/bin/chromium`` is missing, every test here skips and says why (``.ci/run``
installs chromium with apt-get where it can)."""

from __future__ import annotations

import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.integration.servers import Server

from .proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]

CHROMIUM = "/usr/bin/chromium"
#: How long a page may take for any one thing it is waited for.
PAGE_SECONDS = 15


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: pip install -e '.[test]'"
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        return "no chromium here: apt-get install -y chromium (.ci/run does it where apt-get exists)"
    return None


# Package scope, not session: Playwright's sync API runs an asyncio loop in this thread while it
# is open, and later tests call asyncio.run (the MCP client tests), which a running loop refuses.
@pytest.fixture(scope="package")
def browser():
    reason = missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM, args=args)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A page of its own context; a script error on it fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(PAGE_SECONDS * 1000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], errors


@pytest.fixture(scope="package")
def servers(tmp_path_factory):
    """Gunicorn servers with the playground on, started on first use and kept for these tests:
    ``servers("sse")``, ``servers("ndjson")``, ``servers("auth")`` (auth on, SSE),
    ``servers("lost-text")`` (tests/integration/lost_text_config.py)."""
    root = tmp_path_factory.mktemp("playground-servers")
    started: dict[str, Server] = {}
    settings = {
        "sse": ("http-sse", {}),
        "ndjson": ("http-chunked", {}),
        "auth": ("http-chunked", {"BREAD_CONFIG": "tests.browser.auth_config:config"}),
        # Its worker is killed once while it streams text: the test makes KILL_MARKER first.
        "lost-text": ("http-sse", {"BREAD_CONFIG": "tests.integration.lost_text_config:config",
                                   "BREAD_LEASE_SECONDS": "2", "KILL_MARKER": str(root / "kill-once"),
                                   "TEXT_SEEN": str(root / "text-seen")}),
    }  # fmt: skip

    def get(name: str) -> Server:
        if name not in started:
            transport, env = settings[name]
            server = Server(f"playground-{name}", root, root / f"{name}.db", transport,
                            env={"BREAD_PLAYGROUND": "1", **env})  # fmt: skip
            started[name] = server.start()
        return started[name]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture
def proxy(servers):
    """A proxy of this test's own in front of the SSE server."""
    made = Proxy(servers("sse").port)
    yield made
    made.close()


@pytest.fixture
def hostile_site():
    """A site of its own on loopback that serves one page; its url, given the page's text."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's spelling
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()

    def serve(text: str) -> str:
        pages["/"] = text.encode()
        return f"http://localhost:{site.server_address[1]}/"

    yield serve
    site.shutdown()
    site.server_close()
