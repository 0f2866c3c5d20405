"""A run started over HTTP is opened in its request (server/streams.py): its first crumb is
logged and published there, before the stream or the 202 hands out its id, and a new run's
record (and the claim of a session made for it) is written in that crumb's transaction; the
runner's thread drives the rest."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import replace

import pytest

from bread_sync import demo
from bread_sync.errors import SESSION_BUSY, STORE_BUSY, BreadError
from bread_sync.server import create_server
from bread_sync.stores.memory import MemoryStore
from bread_sync.stores.sqlite import store as sqlite_store
from bread_sync.wire import NDJSONDecoder

ASYNC = {"Prefer": "respond-async"}
TABLES = ("runs", "crumbs", "session_claims", "sessions")


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    """A store for the test's server: a run opens alike on each, its first commit whole or undone."""
    return sqlite_store(tmp_path / "bread.db") if request.param == "sqlite" else MemoryStore()


def serve(make_bread, store, config=None):
    bread = make_bread(config, store=store, transport="http-chunked")
    return bread, create_server(bread).test_client()


def rows(store) -> dict[str, int]:
    """How many of each the store holds: SQLite's tables, or the memory store's counterparts."""
    if isinstance(store, MemoryStore):
        crumbs = sum(len(log) for log in store._logs.values())
        return {"runs": len(store._runs), "crumbs": crumbs, "session_claims": len(store._claims),
                "sessions": len(store._sessions)}  # fmt: skip
    with sqlite3.connect(store.path) as conn:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}


def refusing(store, name: str):
    """``store.<name>`` that does its write, then fails as a busy store would: the write must
    not outlive its transaction."""
    real = getattr(store, name)

    def write(*args, **kwargs):
        real(*args, **kwargs)
        raise BreadError(STORE_BUSY, "the store is busy")

    return write


@pytest.mark.parametrize("write", ["append_crumbs", "claim_session", "create_run"])
def test_a_run_whose_opening_cannot_be_committed_leaves_nothing_behind(make_bread, store, write, monkeypatch):
    """The start crumb, the record and the new session's claim commit together or not at all:
    the failed start is the whole stream, and no run is left recorded, running, with no crumb."""
    bread, client = serve(make_bread, store)
    monkeypatch.setattr(bread.store, write, refusing(bread.store, write))
    (frame,) = NDJSONDecoder().feed(client.post("/agents/echo/run", json={"input": "a b"}).data)
    assert frame["seq"] == 0 and frame["crumb"]["error"].code == STORE_BUSY
    assert rows(store) == dict.fromkeys(TABLES, 0)
    answer = client.post("/agents/echo/run", json={"input": "a b"}, headers=ASYNC)
    assert answer.status_code == 503 and answer.get_json()["error"]["code"] == STORE_BUSY
    assert rows(store) == dict.fromkeys(TABLES, 0)
    monkeypatch.undo()  # the server kept serving
    frames = list(NDJSONDecoder().feed(client.post("/agents/echo/run", json={"input": "a b"}).data))
    assert (frames[0]["seq"], frames[-1]["seq"], frames[-1]["crumb"]["output"]) == (1, 3, "a b")
    assert rows(store) == {"runs": 1, "crumbs": 3, "session_claims": 0, "sessions": 1}


def with_echo_before_run(before_run):
    """The demo config, its echo agent given ``before_run``."""
    config = demo.config()
    echo = replace(demo.echo, before_run=before_run)
    return config.model_copy(update={"agents": [echo if a.id == "echo" else a for a in config.agents]})


def test_a_run_is_opened_in_its_request_and_driven_after_it(make_bread, store):
    """``before_run`` (and the start crumb after it) runs in the request's thread, here the test's."""
    threads = {}

    def before_run(value, ctx):
        threads["opening"] = threading.get_ident()

    _, client = serve(make_bread, store, with_echo_before_run(before_run))
    answer = client.post("/agents/echo/run", json={"input": "a b"})
    assert answer.get_data(as_text=True).count("agent:run:end") == 1
    assert threads["opening"] == threading.get_ident()


def test_the_time_limit_counts_the_opening_in_its_request(make_bread, tmp_path):
    """``run_timeout_seconds`` starts with the request, not when the runner takes the run: a
    ``before_run`` that outlasts it sees the run cancelled there, and the run ends
    ``RUN_TIMEOUT`` (without the limit on the opening it would wait out its 10 s and complete)."""
    seen = {}

    def before_run(value, ctx):
        seen["cancelled in the opening"] = ctx.signal.wait(10)

    config = with_echo_before_run(before_run)
    bread = make_bread(
        config, store=sqlite_store(tmp_path / "bread.db"), transport="http-chunked", server={"run_timeout_seconds": 0.2}
    )
    frames = list(
        NDJSONDecoder().feed(create_server(bread).test_client().post("/agents/echo/run", json={"input": "a"}).data)
    )
    assert seen == {"cancelled in the opening": True}
    ended = frames[-1]["crumb"]
    assert (ended["type"], ended["error"].code) == ("agent:error", "RUN_TIMEOUT")


def test_a_run_on_a_known_session_holds_it_with_its_record_while_it_opens(make_bread, tmp_path):
    """A session another run may name is claimed before the run opens, and the run's record is
    written with that claim, not with its first crumb: a claim whose run has no record would
    look stale, and a second run of the session (here started from inside the first one's
    ``before_run``) would take it over instead of being refused."""
    outcome = {}

    def before_run(value, ctx):
        if value == "first":
            try:
                bread.run("echo", "second", session="ses_known", session_policy="reject", mode="sync")
            except BreadError as exc:
                outcome["second"] = exc.code

    bread, client = serve(make_bread, sqlite_store(tmp_path / "bread.db"), with_echo_before_run(before_run))
    answer = client.post("/agents/echo/run", json={"input": "first", "session": {"id": "ses_known"}})
    assert answer.get_data(as_text=True).count("agent:run:end") == 1
    assert outcome == {"second": SESSION_BUSY}


def test_a_record_written_with_the_first_crumb_is_leased_from_then(make_bread, store):
    """A slow ``before_run`` does not leave the run's record born with a lease that has run out."""
    opened = {}

    def before_run(value, ctx):
        time.sleep(0.2)  # a hook that takes its time (not a wait for anything)
        opened["at"] = time.time()

    bread, client = serve(make_bread, store, with_echo_before_run(before_run))
    answer = client.post("/agents/echo/run", json={"input": "a b"}, headers=ASYNC)
    record = bread.store.get_run(answer.get_json()["runId"])
    assert record["leaseUntil"] >= opened["at"] + bread.config.lease_seconds - 0.01


def test_a_failure_of_ours_before_the_first_crumb_is_the_whole_stream_not_a_500(make_bread, store, monkeypatch):
    bread, client = serve(make_bread, store)

    def broken(*args, **kwargs):
        raise RuntimeError("a defect")

    monkeypatch.setattr(bread.store, "create_run", broken)
    answer = client.post("/agents/echo/run", json={"input": "a b"})
    (frame,) = NDJSONDecoder().feed(answer.data)
    assert answer.status_code == 200 and frame["crumb"]["error"].code == "INTERNAL"
    assert "a defect" not in answer.get_data(as_text=True)  # no detail of ours to the client
    assert rows(store) == dict.fromkeys(TABLES, 0)


def test_a_background_run_has_its_record_and_start_crumb_when_its_202_answers(make_bread, store):
    """What writing the record with the first crumb must keep: a 202's Location names a run
    that is there."""
    bread, client = serve(make_bread, store)
    answer = client.post("/agents/echo/run", json={"input": "a b"}, headers=ASYNC)
    run_id = answer.get_json()["runId"]
    assert bread.store.get_run(run_id)["agentId"] == "echo"
    assert bread.store.get_crumbs(run_id, after=0, limit=1)[0].crumb["type"] == "agent:run:start"


def test_a_new_session_is_claimed_with_the_start_crumb_and_held_while_the_run_runs(make_bread, store):
    """What writing the claim with the first crumb must keep: the session is held while the run runs."""
    bread, client = serve(make_bread, store)
    response = client.post("/agents/slow/run", json={"input": {"count": 50, "delayMs": 20}}, buffered=False)
    body, decoder = iter(response.response), NDJSONDecoder()
    start = list(decoder.feed(next(body)))[0]
    session_id = start["crumb"]["sessionId"]
    assert bread.store.claim_session(session_id, "run_other") == start["runId"]
    assert bread.store.get_run(start["runId"])["status"] == "running"
    bread.cancel(start["runId"])
    ends = [f for chunk in body for f in decoder.feed(chunk)]
    assert ends[-1]["crumb"]["error"].code == "RUN_CANCELLED"
    response.close()
