"""How ``GET /files/<id>`` serves bytes that a caller, a model or a remote agent chose, on a real
server: never as a page of the API's origin. Uploaded with ``POST /files``, whose
``Content-Type`` is the caller's word, as an A2A file part's ``mimeType`` is (the browser's view
of it: browser/test_files_browser.py)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from .test_a2a_raw import V1, call, error_of, message, message_v1

POLICY = "sandbox; default-src 'none'"
SCRIPTED = {
    "text/html": b"<script>document.title = 'ran'</script>",
    "text/html; charset=utf-8": b"<script>document.title = 'ran'</script>",
    "image/svg+xml": b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
    "application/xhtml+xml": b'<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>',
    "application/javascript": b"alert(1)",
    "application/pdf": b"%PDF-1.4",
}
INERT = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF89a",
         "image/webp": b"RIFF\0\0\0\0WEBP", "text/plain": b"plain words"}  # fmt: skip


def upload(http, server, data: bytes, mime_type: str, name: str = "f") -> str:
    """The stored file's url."""
    answer = http.post(f"{server.url}/files", params={"name": name}, content=data, headers={"Content-Type": mime_type})
    assert answer.status_code == 201, answer.text
    return answer.json()["uri"]


def assert_never_a_page(answer) -> None:
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Content-Security-Policy"] == POLICY


@pytest.mark.parametrize("mime_type", SCRIPTED)
def test_a_file_that_could_run_script_is_a_download(http, a2a, mime_type):
    answer = http.get(a2a.url + upload(http, a2a, SCRIPTED[mime_type], mime_type, "report.html"))
    assert answer.status_code == 200 and answer.content == SCRIPTED[mime_type]
    assert answer.headers["Content-Disposition"] == "attachment; filename*=UTF-8''report.html"
    assert answer.headers["Content-Type"] == mime_type
    assert_never_a_page(answer)


@pytest.mark.parametrize("mime_type", INERT)
def test_images_and_plain_text_are_shown_inline(http, a2a, mime_type):
    answer = http.get(a2a.url + upload(http, a2a, INERT[mime_type], mime_type, "a"))
    assert answer.content == INERT[mime_type]
    assert answer.headers["Content-Disposition"] == "inline; filename*=UTF-8''a"
    assert_never_a_page(answer)


@pytest.mark.parametrize("mime_type", ["text/html\r\nX-Injected: 1", "text/html\n", "text", "image/png; x"])
def test_a_mime_type_that_is_not_a_media_type_is_refused_when_stored(http, a2a, mime_type):
    if "\n" not in mime_type:  # no client sends a header with a line break in it
        answer = http.post(f"{a2a.url}/files", content=b"<p>hi</p>", headers={"Content-Type": mime_type})
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_REQUEST"
    data = base64.b64encode(b"<p>hi</p>").decode()
    part = {"kind": "file", "file": {"bytes": data, "mimeType": mime_type}}
    assert error_of(call(http, a2a, "/a2a", "message/send", {"message": message(part)})) == -32602
    v1 = message_v1({"raw": data, "mediaType": mime_type})
    assert error_of(call(http, a2a, "/a2a-v1", "SendMessage", {"message": v1}, V1)) == -32602
    assert http.get(a2a.url + "/health").status_code == 200


def test_a_stored_file_whose_type_is_not_a_media_type_is_served_opaque(http, a2a):
    """Stored before the rule (or by a blob store of another's): served, as bytes, not a 500."""
    key = uuid.uuid4().hex
    files = a2a.home / f"{a2a.name}-instance" / "files"
    (files / key).write_bytes(b"<script>alert(1)</script>")
    meta = {"url": f"/files/{key}", "mimeType": "text/html\r\nSet-Cookie: a=b", "name": None, "size": 25}
    (files / f"{key}.json").write_text(json.dumps(meta))

    answer = http.get(f"{a2a.url}/files/{key}")
    assert answer.status_code == 200 and answer.content == b"<script>alert(1)</script>"
    assert answer.headers["Content-Type"] == "application/octet-stream"
    assert answer.headers["Content-Disposition"] == "attachment" and "Set-Cookie" not in answer.headers
    assert_never_a_page(answer)
