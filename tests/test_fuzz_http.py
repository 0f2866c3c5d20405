"""Bad input over every route of the app, in process: requests made up by hypothesis (methods,
paths with odd ids, queries, headers, bodies) and by schemathesis from the OpenAPI document.

Whatever comes in, no answer is a 5xx, no body shows a stack trace or a path on the server,
every error answer is ``{"error": {"code", "message"}}`` with a documented code (or exactly
``{"error": "Forbidden"}`` for 403), and every stream decodes. A stream is read for a bounded
time (heartbeats keep it moving), so a case that tails a run which never ends cannot hang.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    status_code_conformance,
)

from bread_sync import ServerSettings
from bread_sync.errors import ALL_CODES
from bread_sync.protocols.ai_sdk import EMITTED_CHUNK_TYPES
from bread_sync.server import create_server
from bread_sync.transports import http_sse
from bread_sync.wire import SSEDecoder

from .ag_ui_rules import check_event

ROOT = Path(__file__).resolve().parent.parent
#: What no body may show: a stack trace, a source file, a path on this machine.
LEAKS = ("Traceback", 'File "', '.py"', "site-packages", "/work/", str(ROOT))
LIMIT = 4096
#: The demo's MCP endpoint, and the JSON-RPC codes of its 400 and 404 (docs/http.md, MCP).
MCP_PATH = "/mcp"
MCP_CODES = (-32700, -32600)
#: The demo's OpenAI-compatible routes, which answer in OpenAI's shapes (docs/http.md).
OPENAI_PREFIX = "/v1/"
READ_SECONDS = 2.0
METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"]
HOSTS = ["localhost", "127.0.0.1:3000", "[::1]:8080", "::1", "LOCALHOST", "evil.example", "localhost.", "127.1",
         "0.0.0.0", "::", "[::]", "localhost:3000:3000", "127.0.0.1.evil.example"]  # fmt: skip
TRICKY_IDS = ["echo", "writer", "slow", "draft-then-echo", "word-count", "..", "../..", "%2F", "..%2F..%2Fbread.db",
              "%2e%2e%2f", "\x00", "%00", "a" * 3000, "ü", "🍞", "", " ", "-1", "9" * 30, "run_x?after=1",
              "cp_", "/files/../../etc/passwd"]  # fmt: skip
SEQS = ["0", "1", "-1", "2", str(2**63 - 1), str(2**63), str(2**64), "1e3", " 7 ", "0x10", "", "NaN", "１"]
QUERY_KEYS = ["after", "tag", "status", "limit", "agent", "session", "task", "token", "olderThanDays"]
EXTREMES = [1e308, -1e308, 2**64, -(2**63), 1e20, 0.5, "", "0"]
CONTENT_TYPES = [
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
]
BODY_KEYS = ["input", "session", "runId", "skill", "sessionPolicy", "response", "olderThanDays", "tags", "approved"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from bread_sync import create_bread
    from bread_sync.demo import config

    bread = create_bread(config().model_copy(update={
        "store": "memory", "blob_store": "memory", "instance_path": tmp_path_factory.mktemp("fuzz"),
        "transport": http_sse.transport(heartbeat=0.1),
        "server": ServerSettings(max_body_bytes=LIMIT, run_timeout_seconds=3.0),
    }))  # fmt: skip
    made = create_server(bread)
    made.config["finished_run"] = bread.run("echo", "a finished run", mode="sync").run_id
    made.config["file_url"] = bread.blob_store.put(b"\x89PNG", "image/png", "dot.png")["url"]
    yield made
    bread.close()


# -- what every answer must be ---------------------------------------------------------------------


def read_bounded(response) -> bytes:
    """The body, or as much of it as arrives within READ_SECONDS."""
    chunks, deadline = [], time.monotonic() + READ_SECONDS
    try:
        for chunk in response.response:
            chunks.append(chunk if isinstance(chunk, bytes) else chunk.encode())
            if time.monotonic() > deadline:
                break
    finally:
        response.close()
    return b"".join(chunks)


def check_answer(method: str, status: int, content_type: str, body: bytes, path: str = "") -> None:
    text = body.decode(errors="replace")
    assert status < 500, (status, text[:300])
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} in a {status} answer: {text[:300]}"
    if status == 204 or method == "HEAD":
        return
    if path == MCP_PATH and status in (400, 404):
        check_json_rpc_error(text)
    elif path.startswith(OPENAI_PREFIX) and status >= 400:
        check_openai_error(status, text)
    elif status >= 400:
        check_error_body(status, text)
    elif content_type.startswith("text/event-stream") and path.startswith("/ag-ui/"):
        check_ag_ui_events(body)
    elif content_type.startswith("text/event-stream") and path.startswith(OPENAI_PREFIX):
        check_openai_events(body)
    elif content_type.startswith("text/event-stream") and path.startswith("/ai-sdk/"):
        check_ai_sdk_chunks(body)
    elif content_type.startswith("text/event-stream"):
        check_events(body)


def strict_json(text: str | bytes) -> object:
    """JSON as a browser reads it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda constant: pytest.fail(f"{constant} in an answer"))


def check_error_body(status: int, text: str) -> None:
    answer = strict_json(text)
    if status == 403:
        assert answer == {"error": "Forbidden"}, answer
        return
    assert list(answer) == ["error"] and sorted(answer["error"]) == ["code", "message"], answer
    assert answer["error"]["code"] in ALL_CODES and isinstance(answer["error"]["message"], str), answer


def check_openai_error(status: int, text: str) -> None:
    """An OpenAI route refuses in OpenAI's shape with a documented code; what the server refuses
    before the route (401, 403, 413, ...) keeps bread's."""
    answer = strict_json(text)
    if not (isinstance(answer.get("error"), dict) and "type" in answer["error"]):
        check_error_body(status, text)
        return
    assert list(answer) == ["error"] and sorted(answer["error"]) == ["code", "message", "param", "type"], answer
    assert answer["error"]["code"] in ALL_CODES and isinstance(answer["error"]["message"], str), answer


def check_openai_events(body: bytes) -> None:
    """An OpenAI stream's frames are JSON objects (a chunk, an event or an error), or ``[DONE]``."""
    for event in SSEDecoder().feed(body):
        if event.data and event.data != "[DONE]":
            assert isinstance(strict_json(event.data), dict), event.data


def check_ai_sdk_chunks(body: bytes) -> None:
    """An AI SDK stream's frames are chunks of the pinned surface, then ``[DONE]``."""
    for event in SSEDecoder().feed(body):
        if event.data and event.data != "[DONE]":
            assert strict_json(event.data)["type"] in EMITTED_CHUNK_TYPES, event.data


def check_json_rpc_error(text: str) -> None:
    """The MCP endpoint refuses in its protocol's shape: a JSON-RPC error without an id."""
    answer = strict_json(text)
    assert list(answer) == ["jsonrpc", "id", "error"] and answer["id"] is None, answer
    assert answer["error"]["code"] in MCP_CODES and isinstance(answer["error"]["message"], str), answer


def check_ag_ui_events(body: bytes) -> None:
    """An AG-UI mount streams AG-UI events (its resumable stream, found by a run id): each one
    valid as the protocol's models read it."""
    for event in SSEDecoder().feed(body):
        if event.data:
            check_event(strict_json(event.data))


def check_events(body: bytes) -> None:
    for event in SSEDecoder().feed(body):
        if not event.data:
            continue  # the retry prelude
        envelope = strict_json(event.data)
        assert list(envelope) == ["type", "payload"], envelope
        if envelope["type"] == "error":
            assert sorted(envelope["payload"]) == ["code", "message"], envelope
            assert envelope["payload"]["code"] in ALL_CODES


# -- hypothesis: any request at all ----------------------------------------------------------------

latin1 = st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=30)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(EXTREMES),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
#: Bodies known to have broken JSON servers: nested past the recursion limit, cut short, not
#: UTF-8, just over the limit, not an object.
NASTY_BODIES = [
    b"[" * 4000, b'{"input":' * 450, b'{"input": ' + b"[" * 2000 + b"]" * 2000 + b"}", b"\xff\xfe",
    b"{}" + b" " * LIMIT, b"null", b"[]", b'"text"', b"1e999", b'{"input": NaN}', b'{"input": [1e999]}',
    b"{" + b" " * 100,
]  # fmt: skip
bodies = st.one_of(
    st.none(),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(BODY_KEYS), json_values, max_size=4).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=300),
    st.sampled_from(NASTY_BODIES),
    st.binary(min_size=LIMIT + 1, max_size=LIMIT + 50),
)


@st.composite
def requests(draw, rules: list[tuple[str, list[str]]], known: list[str]):
    template, methods = draw(st.sampled_from(rules))
    method = draw(st.sampled_from(methods) | st.sampled_from(METHODS))
    pieces = re.split(r"<[^>]+>", template)  # the template around its path params
    path = pieces[0]
    for piece in pieces[1:]:
        raw = draw(st.sampled_from(TRICKY_IDS + known) | st.text(max_size=30))
        path += (quote(raw, safe="") if draw(st.booleans()) else raw.replace("?", "%3F").replace("#", "%23")) + piece
    query = draw(st.dictionaries(st.sampled_from(QUERY_KEYS) | latin1, st.sampled_from(SEQS) | latin1, max_size=3))
    headers = {}
    if draw(st.booleans()):
        headers["Last-Event-ID"] = draw(st.sampled_from(SEQS) | latin1)
    if draw(st.booleans()):
        headers["Host"] = draw(st.sampled_from(HOSTS))
    if draw(st.booleans()):
        headers["Content-Type"] = draw(st.sampled_from(CONTENT_TYPES) | latin1)
    return method, path, urlencode(query), headers, draw(bodies)


def rules_of(app) -> list[tuple[str, list[str]]]:
    return sorted((r.rule, sorted(r.methods)) for r in app.url_map.iter_rules())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_request_gets_a_5xx_a_leak_or_an_undocumented_error(app, data):
    known = [app.config["finished_run"], app.config["file_url"].rsplit("/", 1)[1]]
    method, path, query, headers, body = data.draw(requests(rules_of(app), known))
    client = app.test_client()

    response = client.open(path, method=method, query_string=query, headers=headers, data=body, buffered=False)

    check_answer(method, response.status_code, response.content_type or "", read_bounded(response), path)


@pytest.mark.parametrize("body", NASTY_BODIES, ids=lambda b: b[:12].decode(errors="replace"))
def test_each_nasty_body_on_each_route_that_reads_one(app, body):
    client = app.test_client()
    for template, methods in rules_of(app):
        for method in sorted(set(methods) & {"POST", "DELETE"}):
            path = re.sub(r"<[^>]+>", "echo", template)  # a real agent: its run echoes the input
            response = client.open(path, method=method, data=body, buffered=False)
            check_answer(method, response.status_code, response.content_type or "", read_bounded(response), path)


def test_every_route_is_fuzzed(app):
    """The fuzz draws from the app's own routes: a route added later is fuzzed too."""
    templates = {rule for rule, _ in rules_of(app)}
    assert {"/agents/<id>/run", "/runs/<runId>/stream", "/resume/<checkpointId>", "/sessions/cleanup",
            "/files/<id>", "/openapi.json"} <= templates  # fmt: skip


# -- schemathesis: requests the OpenAPI document describes ----------------------------------------


#: The checks that hold; what the document does not satisfy yet is in docs/reliability.md.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance]
OPENAPI_EXAMPLES = 10


def test_the_openapi_document_holds_under_generated_requests(app):
    # Driven by hand rather than by schemathesis' pytest plugin, whose lazy fixtures do not run
    # on pytest 9; each operation is its own hypothesis run.
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(rules_of(app)) - 2  # every route but /health and Flask's /static
    for operation in operations:
        each_case(operation.as_strategy())()


def each_case(cases):
    @settings(max_examples=OPENAPI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases)
    def run(case):
        response = case.call()
        case.validate_response(response, checks=CHECKS)
        content_type = response.headers.get("Content-Type", [""])[0]
        check_answer(case.method.upper(), response.status_code, content_type, response.content, case.path)

    return run
