"""A retried run request with the same runId attaches to the run it started: one run, one log."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from .client import RUN_START, TEXT_DELTA, assert_error_body, assert_log, log_of, open_stream, replay, run, text_of


def test_the_same_run_id_twice_is_one_run(http, server, wire):
    body = {"input": "only once please", "runId": f"run-retry-{uuid.uuid4().hex}"}

    first = run(http, server.url, "echo", body, wire)
    second = run(http, server.url, "echo", body, wire)

    assert first.status == second.status == 200
    assert first.run_id == second.run_id == body["runId"]
    for stream in (first, second):
        assert (stream.last_crumb.type, stream.last_crumb.data["output"]) == ("agent:run:end", "only once please")
        assert text_of(stream.events) == "only once please"
        assert {e.data["runId"] for e in stream.crumbs} == {body["runId"]}
    log = log_of(http, server.url, body["runId"], wire)
    assert_log(log, body["runId"])
    assert [e.type for e in log].count(RUN_START) == 1


def test_a_retry_while_the_run_goes_on_follows_it(http, server, peer, wire):
    ticks = {"count": 15, "delayMs": 30}
    body = {"input": ticks, "runId": f"run-retry-{uuid.uuid4().hex}"}
    url = f"{server.url}/agents/slow/run"
    everything = "".join(f"tick {n} " for n in range(1, 16))

    with open_stream(http, "POST", url, wire, body=body) as first:
        first.until(lambda e: e.type == TEXT_DELTA, "the first tick")
        same_process = run(http, server.url, "slow", body, wire)
        other_process = run(http, peer.url, "slow", body, wire)
        first.rest()

    for stream in (first, same_process, other_process):
        assert stream.status == 200 and stream.run_id == body["runId"]
        assert stream.types.count(RUN_START) == 1 and stream.last_crumb.type == "agent:run:end", stream.types
        assert text_of(stream.events) == everything
        assert stream.last_crumb.data["output"] == everything
    log = log_of(http, server.url, body["runId"], wire)
    assert_log(log, body["runId"])
    assert [e.type for e in log].count(RUN_START) == 1


@pytest.mark.parametrize(
    "run_id",
    [
        "run with spaces & ?query#fragment",
        "run/with/slashes",
        "run-\u20ac",
    ],
)
def test_a_caller_chosen_run_id_is_refused_or_addressable(http, server, wire, run_id):
    stream = run(http, server.url, "echo", {"input": "address me", "runId": run_id}, wire)

    if stream.status == 400:
        assert_error_body(stream, 400, "INVALID_REQUEST")
        return
    assert stream.status == 200, (stream.status, stream.text[:300])
    assert stream.run_id == run_id and stream.last_crumb.data["runId"] == run_id
    path = quote(run_id, safe="")
    record = http.get(f"{server.url}/runs/{path}")
    assert record.status_code == 200 and record.json()["id"] == run_id, record.text
    replayed = replay(http, server.url, path, wire)
    assert replayed.status == 200 and replayed.run_id == run_id, (replayed.status, replayed.text[:300])
    assert_log(replayed.crumbs, run_id)
