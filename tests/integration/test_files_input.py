"""Files as input on a real server (issue 31 items 4 and 6): an image uploaded with
``POST /files`` reaches the model of a run that references it, through the OpenAI SDK, as the
provider's own image part; another caller can neither read it nor reference it; an upload past
its own limit is 413, and an anonymous one is never read past ``max_body_bytes``."""

from __future__ import annotations

import pytest

from ..fake_provider import Stream
from ..files_input import PNG, b64
from ..test_openai_provider import text
from .client import run
from .files_config import KEYS

pytest.importorskip("openai")

ALICE = {"Authorization": f"Bearer {KEYS['alice']}"}
BOB = {"Authorization": f"Bearer {KEYS['bob']}"}
MAX_BODY_BYTES, MAX_FILE_BYTES = 16 * 1024, 64 * 1024
ASYNC = {"Prefer": "respond-async"}


@pytest.fixture
def files_server(start_server, provider_server):
    env = {
        "BREAD_CONFIG": "tests.integration.files_config:config",
        "BREAD_MAX_BODY_BYTES": str(MAX_BODY_BYTES),
        "BREAD_MAX_FILE_BYTES": str(MAX_FILE_BYTES),
        "OPENAI_BASE_URL": provider_server.url,
        "OPENAI_API_KEY": "sk-local",
    }
    return start_server("files", env=env)


def upload(http, server, data, headers, name="cat.png"):
    return http.post(f"{server.url}/files", params={"name": name}, content=data,
                     headers={"Content-Type": "image/png", **headers})  # fmt: skip


def run_crumbs(http, server, body, headers) -> list[dict]:
    """The crumbs of a run (its SSE stream read to the end, through the tests' client)."""
    stream = run(http, server.url, "looker", body, "sse", headers=headers)
    assert stream.status == 200
    return [event.data for event in stream.events]


def test_an_uploaded_image_reaches_the_model_of_the_run_that_references_it(http, files_server, provider_server):
    stored = upload(http, files_server, PNG, ALICE)
    assert stored.status_code == 201, stored.text
    ref = {"type": "file", "uri": stored.json()["uri"], "mimeType": "image/png"}
    provider_server.play(Stream(text("A cat ", "on a mat.")))

    events = run_crumbs(http, files_server, {"input": [{"type": "text", "text": "What is it?"}, ref]}, ALICE)

    assert events[-1]["type"] == "agent:run:end" and events[-1]["output"] == "A cat on a mat."
    assert events[0]["input"][1] == ref  # the log keeps the reference, never the bytes
    (sent,) = provider_server.requests
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}}
    assert sent["body"]["messages"] == [{"role": "user", "content": [image, {"type": "text", "text": "What is it?"}]}]
    session = http.get(f"{files_server.url}/sessions/{events[0]['sessionId']}", headers=ALICE).json()
    assert session["messages"][0]["files"] == [{"uri": ref["uri"], "mimeType": "image/png"}]


def test_another_caller_can_neither_read_nor_reference_an_upload(http, files_server, provider_server):
    uri = upload(http, files_server, PNG, ALICE).json()["uri"]

    assert http.get(files_server.url + uri, headers=BOB).json()["error"]["code"] == "FILE_NOT_FOUND"
    events = run_crumbs(http, files_server, {"input": {"type": "file", "uri": uri, "mimeType": "image/png"}}, BOB)
    assert [event["code"] for event in events] == ["FILE_NOT_FOUND"]  # the run's start refused: the stream's error
    by_url = {"input": {"type": "file", "uri": "https://example.com/cat.png", "mimeType": "image/png"}}
    answer = http.post(
        f"{files_server.url}/agents/looker/run", json=by_url, headers={**ALICE, "Prefer": "respond-async"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "INPUT_INVALID"
    assert provider_server.requests == []
    assert http.get(files_server.url + uri, headers=ALICE).content == PNG


def test_an_upload_has_its_own_limit_read_past_max_body_bytes_only_for_a_known_caller(http, files_server):
    big = b"x" * (MAX_FILE_BYTES - 1)  # past the server's max_body_bytes, under the route's own
    assert upload(http, files_server, big, ALICE).status_code == 201
    assert http.post(f"{files_server.url}/agents/looker/run", content=big, headers=ALICE).status_code == 413
    over = upload(http, files_server, b"x" * (MAX_FILE_BYTES + 1), ALICE)
    assert over.status_code == 413 and over.json()["error"]["code"] == "BODY_TOO_LARGE"
    assert upload(http, files_server, big, {}).status_code == 401
