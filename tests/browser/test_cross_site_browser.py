"""A hostile web page, in headless Chromium, against a real server with auth off: a page of
another site that posts to the local server (``mode: "no-cors"``, ``text/plain``: no preflight)
reaches it, and is refused before anything happens. The page is served from
``http://localhost:<port>`` and the server addressed as ``127.0.0.1``: another site, both on
loopback, as a page in the user's browser would."""

from __future__ import annotations

import uuid

import httpx2 as httpx

HOSTILE_PAGE = """<!doctype html><title>loading</title><script>
const post = (path, body) => fetch("%(target)s" + path, {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body}).catch(() => null);
Promise.all([post("/sessions/cleanup", "{}"),
             post("/agents/echo/run", JSON.stringify({input: "pwned", session: {id: "%(session)s"}}))])
  .then(() => { document.title = "sent"; });
</script>"""


def session_ids(base: str) -> set[str]:
    return {s["id"] for s in httpx.get(f"{base}/sessions", timeout=10).json()}


def test_a_page_of_another_site_cannot_drive_the_local_server(page, servers, proxy, hostile_site):
    server = servers("sse")
    victim, attacker = f"victim-{uuid.uuid4().hex}", f"attacker-{uuid.uuid4().hex}"
    mine = httpx.post(f"{server.url}/agents/echo/run", json={"input": "mine", "session": {"id": victim}}, timeout=10)
    assert mine.status_code == 200 and victim in session_ids(server.url)

    page.goto(hostile_site(HOSTILE_PAGE % {"target": proxy.url, "session": attacker}))
    page.wait_for_function("() => document.title === 'sent'")

    sent = proxy.sent()  # the browser did send both, from the hostile page's origin
    assert "POST /sessions/cleanup" in sent and "POST /agents/echo/run" in sent, sent
    assert "Origin: http://localhost:" in sent
    held = session_ids(server.url)
    assert victim in held, "the hostile page deleted the sessions"
    assert attacker not in held, "the hostile page started a run"
