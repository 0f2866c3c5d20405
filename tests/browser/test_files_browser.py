"""A file a caller uploaded, opened in headless Chromium from the API's own origin: it never runs
as a page of that origin. HTML and SVG are downloads; plain text is shown as text."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from playwright.sync_api import Error as PlaywrightError

SCRIPT = "<script>document.title = 'ran'</script><p>report</p>"
SCRIPT_FILE = "document.title = 'ran'"
INCLUDING_PAGE = """<!doctype html><title>loading</title><script src="%s"
    onload="document.title = 'loaded:' + document.title" onerror="document.title = 'refused'"></script>"""
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>document.title = "ran"</script></svg>'


def upload(base: str, data: str, mime_type: str) -> str:
    """The url of a file stored with ``POST /files``."""
    answer = httpx.post(f"{base}/files", content=data.encode(), headers={"Content-Type": mime_type}, timeout=10)
    assert answer.status_code == 201, answer.text
    return base + answer.json()["uri"]


@pytest.mark.parametrize(("data", "mime_type"), [(SCRIPT, "text/html"), (SVG, "image/svg+xml")])
def test_an_uploaded_page_is_downloaded_not_run(page, servers, data, mime_type):
    url = upload(servers("sse").url, data, mime_type)
    with page.expect_download() as download:
        try:
            page.goto(url)
        except PlaywrightError as error:  # a navigation that turns into a download
            assert "Download is starting" in str(error)
    assert download.value.url == url
    assert page.title() != "ran"


def test_plain_text_is_shown_as_text_whatever_it_holds(page, servers):
    url = upload(servers("sse").url, SCRIPT, "text/plain")
    page.goto(url)
    assert page.title() != "ran"
    assert SCRIPT in page.inner_text("body")  # the markup, as text


def test_an_uploaded_script_never_runs_in_a_page(page, servers, hostile_site):
    """Served as a script (``Sec-Fetch-Dest: script``), a file is opaque bytes, which the browser
    refuses under nosniff: a page's injected ``<script src="/files/...">`` runs nothing."""
    url = upload(servers("sse").url, SCRIPT_FILE, "text/javascript")
    page.goto(hostile_site(INCLUDING_PAGE % url))
    page.wait_for_function("document.title !== 'loading'")
    assert page.title() == "refused"
