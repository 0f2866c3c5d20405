"""The passive stream's catch-up: Last-Event-ID and ?after=, 204, 404 and 400."""

from __future__ import annotations

import uuid

import pytest

from .client import (
    HUMAN_REQUIRED,
    TEXT_DELTA,
    Tail,
    assert_continuation,
    assert_error_body,
    fetch,
    logged_seqs,
    open_stream,
    passive_url,
    pause_writer,
    replay,
    resume,
    run,
    text_of,
)


@pytest.fixture
def finished_run(http, server, wire) -> str:
    """A finished echo run; its log is 1 start, 2 aggregated text, 3 end."""
    stream = run(http, server.url, "echo", {"input": "catch me up"}, wire)
    assert stream.last_crumb.type == "agent:run:end"
    return stream.run_id


@pytest.mark.parametrize(
    ("last_event_id", "after", "seqs"),
    [
        ("1", None, [2, 3]),
        (None, "2", [3]),
        ("2", "0", [3]),  # Last-Event-ID wins over ?after=
        ("0", "2", [1, 2, 3]),
        (None, None, [1, 2, 3]),
    ],
)
def test_catch_up_replays_after_the_position(http, server, wire, finished_run, last_event_id, after, seqs):
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}

    stream = replay(http, server.url, finished_run, wire, after=after, headers=headers)

    assert stream.status == 200
    assert logged_seqs(stream.events) == seqs
    assert stream.crumbs[-1].type == "agent:run:end"
    if wire == "sse":
        assert stream.raw.startswith(b"retry: 3000\n\n")
        assert stream.events[0].kind == "retry" and stream.events[0].data == {"retry": 3000}
        assert [e.kind for e in stream.events[1:]] == ["crumb"] * len(seqs)
    else:
        assert [e.kind for e in stream.events] == ["crumb"] * len(seqs)


@pytest.mark.parametrize(
    ("last_event_id", "after"),
    [("3", None), (None, "3"), ("3", "0"), (None, "99"), (str(2**63 - 1), None)],
)
def test_finished_run_with_nothing_after_the_position_is_204(http, server, wire, finished_run, last_event_id, after):
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}

    stream = replay(http, server.url, finished_run, wire, after=after, headers=headers)

    assert stream.status == 204
    assert bytes(stream.raw) == b""


def test_unknown_run_is_404(http, server, wire):
    stream = replay(http, server.url, f"run-missing-{uuid.uuid4().hex}", wire)

    assert_error_body(stream, 404, "RUN_NOT_FOUND")


MALFORMED = ["abc", "-1", "1" * 100, str(2**63), "1.5", "0x10"]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_last_event_id_is_400(http, server, wire, finished_run, value):
    stream = fetch(http, "GET", passive_url(server.url, finished_run), wire, headers={"Last-Event-ID": value})

    assert_error_body(stream, 400, "INVALID_REQUEST")


@pytest.mark.parametrize("value", ["abc", "-1", "1" * 100])
def test_malformed_after_is_400(http, server, wire, finished_run, value):
    stream = fetch(http, "GET", passive_url(server.url, finished_run, value), wire)

    assert_error_body(stream, 400, "INVALID_REQUEST")


def test_superscript_digit_last_event_id_is_400(http, server, wire, finished_run):
    stream = fetch(http, "GET", passive_url(server.url, finished_run), wire, headers={"Last-Event-ID": b"\xb2"})

    assert_error_body(stream, 400, "INVALID_REQUEST")


def test_superscript_digit_after_is_400(http, server, wire, finished_run):
    stream = fetch(http, "GET", passive_url(server.url, finished_run, "%C2%B2"), wire)

    assert_error_body(stream, 400, "INVALID_REQUEST")


def assert_tail_of_ticks(events, everything: str) -> None:
    crumbs = [e for e in events if e.kind == "crumb"]
    durable = [e.seq for e in crumbs if e.durable]
    assert durable == sorted(set(durable)), f"a durable seq twice or out of order: {durable}"
    assert [e.type for e in crumbs if e.durable] == ["agent:run:start", "agent:run:end"]
    assert text_of(events) == everything, "the tail lost or repeated text"
    assert crumbs[-1].type == "agent:run:end" and crumbs[-1].data["output"] == everything


def test_a_tail_opened_mid_run_shows_every_tick_once(http, server, peer, wire):
    body = {"input": {"count": 12, "delayMs": 40}}
    everything = "".join(f"tick {n} " for n in range(1, 13))

    with open_stream(http, "POST", f"{server.url}/agents/slow/run", wire, body=body) as started:
        started.until(lambda e: e.type == TEXT_DELTA, "the first tick")
        started.until(lambda e: e.type == TEXT_DELTA, "the second tick")
        here = Tail(passive_url(server.url, started.run_id), wire)  # live frames of this process
        there = Tail(passive_url(peer.url, started.run_id), wire)  # the store's log, polled
        here.start()
        there.start()
        here.wait_for(lambda e: e.type == "agent:run:start", 10, "the replayed start")
        there.wait_for(lambda e: e.type == "agent:run:start", 10, "the replayed start")
        started.rest()

    assert text_of(started.events) == everything
    assert_tail_of_ticks(here.finish(15), everything)
    assert_tail_of_ticks(there.finish(15), everything)
    assert logged_seqs([e for e in there.events if e.kind == "crumb"]) == [1, 2, 3]


def test_a_reconnect_to_a_paused_run_replays_the_gap_then_follows(http, server, peer, wire):
    run_id, checkpoint_id, _ = pause_writer(http, server.url, wire)

    tail = Tail(passive_url(peer.url, run_id, after=0), wire, headers={"Last-Event-ID": "5"})
    tail.start()
    tail.wait_for(lambda e: e.type == HUMAN_REQUIRED, 10, "the replayed pause")
    continuation = resume(http, server.url, checkpoint_id, {"approved": True}, wire)
    relayed = tail.finish(15)

    assert_continuation(continuation, run_id)
    assert logged_seqs([e for e in relayed if e.kind == "crumb"]) == [6, 7, 8, 9, 10, 11]
