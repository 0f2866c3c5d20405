"""Bad input is answered in the documented shape, leaks nothing, and the server keeps serving."""

from __future__ import annotations

import json
import uuid

import pytest

from .client import assert_error_body, failure_of, fetch, run
from .servers import MAIN

#: What a body must never show: a stack trace or a path on the server.
LEAKS = ("Traceback", 'File "', str(MAIN), "site-packages", "/tmp/")

#: Requests that cannot be read: 400 INVALID_REQUEST before any stream starts.
UNREADABLE = {
    "not JSON": ("/agents/echo/run", b'{"input":'),
    "a JSON array": ("/agents/echo/run", b"[1, 2]"),
    "a JSON string": ("/agents/echo/run", b'"run please"'),
    "not UTF-8": ("/agents/echo/run", b"\xff\xfe\xfd"),
    "runId not a string": ("/agents/echo/run", b'{"input": "x", "runId": 5}'),
    "skill not a string": ("/agents/echo/run", b'{"input": "x", "skill": ["a"]}'),
    "resume without a response": ("/resume/cp_whatever", b'{"approved": true}'),
    "resume not JSON": ("/resume/cp_whatever", b"{{"),
    "a run without a body": ("/agents/echo/run", b""),
    "a run without input": ("/agents/echo/run", b'{"session": {"id": "s1"}}'),
    "a pipeline without input": ("/pipelines/draft-then-echo/run", b"{}"),
    "a lone surrogate in the input": ("/agents/echo/run", b'{"input": "\\ud800"}'),
    "a lone surrogate in a session id": ("/agents/echo/run", b'{"input": "ok", "session": {"id": "s\\udfff"}}'),
    "a lone surrogate in a session tag": ("/agents/echo/run", b'{"input": "", "session": {"tags": {"k": "\\uDC00"}}}'),
    "a lone surrogate in a key": ("/agents/echo/run", b'{"input": {"\\ud800": 1}}'),
    "a surrogate in CESU-8 bytes": ("/agents/echo/run", b'{"input": "\xed\xa0\x80"}'),
    "a lone surrogate on the pipeline route": ("/pipelines/draft-then-echo/run", b'{"input": {"topic": "\\ud800"}}'),
    "a lone surrogate in a resume": ("/resume/cp_whatever", b'{"response": "\\udfff"}'),
    "a lone surrogate in UTF-16": ("/agents/echo/run", '{"input": "\\ud800"}'.encode("utf-16-le")),
    "a session id in UTF-32": ("/agents/echo/run", '{"input": "ok", "session": {"id": "s\\udfff"}}'.encode("utf-32")),
    "a lone surrogate nested deep": ("/agents/echo/run", b'{"input": ' + b"[" * 900 + b'"\\ud800"' + b"]" * 900 + b"}"),
}


def assert_no_leak(body: bytes | bytearray) -> None:
    text = bytes(body).decode(errors="replace")
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} in a response body: {text[:500]}"


@pytest.mark.parametrize("case", UNREADABLE)
def test_an_unreadable_request_is_400(http, server, wire, case):
    path, content = UNREADABLE[case]

    answer = fetch(http, "POST", f"{server.url}{path}", wire, content=content)

    assert_error_body(answer, 400, "INVALID_REQUEST")
    assert_no_leak(answer.raw)


def test_a_lone_surrogate_starts_no_run(http, server, wire):
    run_id = f"run-bad-{uuid.uuid4().hex}"
    content = b'{"input": "\\ud800", "runId": "%s"}' % run_id.encode()
    refused = fetch(http, "POST", f"{server.url}/agents/echo/run", wire, content=content)

    assert_error_body(refused, 400, "INVALID_REQUEST")
    assert_nothing_logged(http, server.url, run_id, wire)
    paired = run(http, server.url, "echo", {"input": "\U0001f35e"}, wire)  # sent as a surrogate pair
    assert paired.last_crumb.data["output"] == "\U0001f35e"


def test_a_session_that_is_not_an_object_is_400(http, server, wire):
    answer = fetch(http, "POST", f"{server.url}/agents/echo/run", wire, body={"input": "x", "session": 5})

    assert_error_body(answer, 400, "INVALID_REQUEST")


def assert_nothing_logged(http, base: str, run_id: str, wire: str) -> None:
    assert_error_body(http.get(f"{base}/runs/{run_id}"), 404, "RUN_NOT_FOUND")
    assert_error_body(fetch(http, "GET", f"{base}/runs/{run_id}/stream", wire), 404, "RUN_NOT_FOUND")


def test_an_unknown_agent_fails_in_the_stream(http, server, wire):
    run_id = f"run-bad-{uuid.uuid4().hex}"

    stream = run(http, server.url, "no-such-agent", {"input": "x", "runId": run_id}, wire)

    error = failure_of(stream, wire)
    assert error["code"] == "AGENT_NOT_FOUND"
    if wire == "ndjson":
        assert stream.events[0].data["runId"] == run_id
    assert_no_leak(stream.raw)
    assert_nothing_logged(http, server.url, run_id, wire)


@pytest.mark.parametrize(
    "bad_input",
    [{"count": "many", "delayMs": 1}, {"count": -1, "delayMs": 1}, {"delayMs": 1}, "ticks", None],
)
def test_input_failing_the_schema_fails_in_the_stream(http, server, wire, bad_input):
    run_id = f"run-bad-{uuid.uuid4().hex}"

    stream = run(http, server.url, "slow", {"input": bad_input, "runId": run_id}, wire)

    assert failure_of(stream, wire)["code"] == "INPUT_INVALID"
    assert_no_leak(stream.raw)
    assert_nothing_logged(http, server.url, run_id, wire)


def test_the_server_keeps_serving_after_bad_input(http, server, wire):
    log_before = len(server.log(limit=10**9))
    for path, content in UNREADABLE.values():
        assert fetch(http, "POST", f"{server.url}{path}", wire, content=content).status == 400
    for agent, body in [("no-such-agent", {"input": "x"}), ("slow", {"input": {"count": "many"}})]:
        assert fetch(http, "POST", f"{server.url}/agents/{agent}/run", wire, content=json.dumps(body)).status == 200

    agents = http.get(f"{server.url}/agents")
    assert agents.status_code == 200
    assert {a["id"] for a in agents.json()} >= {"echo", "writer", "interviewer", "slow"}
    stream = run(http, server.url, "echo", {"input": "still here"}, wire)
    assert stream.last_crumb.data["output"] == "still here"
    assert "Traceback" not in server.log(limit=10**9)[log_before:], "bad input made the server log a crash"
