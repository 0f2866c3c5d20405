"""A run dropped unfinished, unclosed: its finalizer runs wherever a garbage collection (or the
release of its last reference) happens, inside a locked section of the lease keeper or a use of
the store too, so it takes no lock and writes nothing, and the collector never closes the run's
generators; the run is still ended (its terminal crumb logged, its record and its session's
claim released) by the next let go, soon after."""

from __future__ import annotations

import gc

import pytest

from bread_sync.server.lifecycle import Lifecycle
from bread_sync.server.runner import Runner

from .dropping import outcome_of
from .waiting import wait_for

#: Drops a started (or never iterated) run inside the lock named, in a thread (a greenlet under gevent): in a cycle
#: that a collection made there frees ("collected"), or its last reference let go there
#: ("released"); then waits for the run to be ended. In a process of its own: a clean-up that
#: hangs holds that lock, and the garbage collector's, for good.
DROP = """
import sys
if sys.argv[1] == "gevent":
    from gevent import monkey; monkey.patch_all()
import gc, json, os, time
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.stores import sqlite
from tests.dropping import drop_inside

_, _, where, how, started, path = sys.argv
# One connection in the SQLite store's pool: the section holding it is every other use's wait.
store = sqlite.store(path, pool_size=1) if where == "store" else "memory"
bread = create_bread(config().model_copy(update={"store": store, "cancel_poll_seconds": 0.05}))
run = bread.run("slow", {"count": 1000, "delayMs": 0}, session="s1")
if started == "started":
    next(run)  # its start crumb logged: registered, watched, its session claimed
run_id = run.run_id
gc.disable()  # no collection but the test's
held = [run]
del run
lock = bread.leases._lock if where == "leases" else bread.store.connection()
dropped = drop_inside(lock, how, held)

def claimed():  # another run may take the session (the probe keeps it: each look answers alike)
    return bread.store.claim_session("s1", "probe") is not None

def ended():
    return bread.store.get_run(run_id)["status"] != "running" and not claimed()

if not dropped.wait(5):  # the store, or the lock, is held for good: the outcome is that
    print(json.dumps({"dropped": False}), flush=True)
    os._exit(0)
if started != "started":  # never watched, it keeps no keeper passing: the next run's start lets it go
    bread.run("echo", "hi", mode="sync")
deadline = time.monotonic() + 5
while time.monotonic() < deadline and not ended():
    time.sleep(0.005)
last = bread.store.get_crumbs(run_id)[-1].crumb
outcome = {
    "dropped": dropped.is_set(),
    "status": bread.store.get_run(run_id)["status"],
    "last": last.get("error", {}).get("code", last["type"]),
    "claimed": claimed(),
}
print(json.dumps(outcome), flush=True)
os._exit(0)  # a clean-up that hung holds locks an orderly exit could wait on
"""

CASES = [
    ("threads", "leases", "collected", "started"),
    ("threads", "leases", "released", "started"),
    ("threads", "store", "collected", "started"),
    ("gevent", "leases", "collected", "started"),
    ("gevent", "leases", "released", "started"),
    ("gevent", "store", "collected", "started"),
    ("threads", "leases", "collected", "never-iterated"),
    ("gevent", "store", "collected", "never-iterated"),
]


@pytest.mark.parametrize(("threads", "where", "how", "started"), CASES, ids=["-".join(case) for case in CASES])
def test_a_run_dropped_unfinished_inside_a_lock_its_clean_up_takes_takes_none_and_still_ends(
    tmp_path, threads, where, how, started
):
    outcome = outcome_of(DROP, threads, where, how, started, str(tmp_path / "bread.db"))
    assert outcome["dropped"], "the dropped run's clean-up waited on a lock its caller holds"
    assert outcome == {"dropped": True, "status": "interrupted", "last": "RUN_INTERRUPTED", "claimed": False}


#: A bound on the wait for a pass, not its pace (the passes come every 0.05 s here).
LET_GO_WITHIN_SECONDS = 10


def dropped_in_a_cycle(bread, session: str, started: bool = True) -> str:
    """A run of ``session`` started (or never iterated), then dropped in a cycle and collected: its id."""
    run = bread.run("slow", {"count": 1000, "delayMs": 0}, session=session)
    if started:
        next(run)
    run_id = run.run_id
    was_enabled = gc.isenabled()
    gc.disable()  # the run is collected here, below
    try:
        cycle = [run]
        cycle.append(cycle)
        del cycle, run
        gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    return run_id


def assert_left_to_a_let_go(bread, run_id: str, session: str) -> None:
    """The collection ended nothing: the run is still running, its session claimed."""
    assert bread.store.get_run(run_id)["status"] == "running"
    assert bread.store.claim_session(session, "another run") == run_id


def assert_ended(bread, run_id: str, session: str) -> None:
    assert bread.store.get_run(run_id)["status"] == "interrupted"
    assert bread.store.get_crumbs(run_id)[-1].crumb["error"]["code"] == "RUN_INTERRUPTED"
    assert bread.store.claim_session(session, "another run") is None  # its claim released


#: Settings under which the lease keeper passes only every 40 s: what lets go is the one tested.
QUIET_KEEPER = {"cancel_poll_seconds": 60.0, "lease_seconds": 120.0}


def test_a_run_dropped_unfinished_is_ended_by_the_lease_keepers_next_pass(make_bread):
    bread = make_bread(cancel_poll_seconds=0.05)
    run_id = dropped_in_a_cycle(bread, "s1")
    wait_for(lambda: bread.store.get_run(run_id)["status"] != "running", LET_GO_WITHIN_SECONDS, "its end")
    assert_ended(bread, run_id, "s1")


def test_a_run_dropped_unfinished_is_ended_when_the_next_run_starts(make_bread):
    bread = make_bread(**QUIET_KEEPER)
    run_id = dropped_in_a_cycle(bread, "s1")
    assert_left_to_a_let_go(bread, run_id, "s1")
    bread.run("echo", "hi", mode="sync")
    assert_ended(bread, run_id, "s1")


def test_a_run_dropped_never_iterated_is_ended_when_the_next_run_starts(make_bread):
    # Never driven, it is not left to a recovery sweep once its lease lapses: the let go drives
    # its end, as a close would (tests/test_run_ends.py).
    bread = make_bread(**QUIET_KEEPER)
    run_id = dropped_in_a_cycle(bread, "s1", started=False)
    assert_left_to_a_let_go(bread, run_id, "s1")
    bread.run("echo", "hi", mode="sync")
    assert_ended(bread, run_id, "s1")
    assert [frame.type for frame in bread.store.get_crumbs(run_id)] == ["agent:error"]  # none of it ran


def test_a_run_dropped_unfinished_is_ended_before_the_next_run_of_its_session_claims_it(make_bread):
    """The next run's start ends it before its opening, so the session is free: not SESSION_BUSY."""
    bread = make_bread(**QUIET_KEEPER)
    run_id = dropped_in_a_cycle(bread, "s1")
    assert_left_to_a_let_go(bread, run_id, "s1")
    assert bread.run("echo", "hi", session="s1", mode="sync").status == "completed"
    assert bread.store.get_run(run_id)["status"] == "interrupted"


def test_a_run_dropped_unfinished_is_ended_before_a_resume_in_its_session_claims_it(make_bread):
    bread = make_bread(**QUIET_KEEPER)
    paused = bread.run("writer", {"topic": "bread"}, session="s1", mode="sync")
    run_id = dropped_in_a_cycle(bread, "s1")
    assert_left_to_a_let_go(bread, run_id, "s1")
    assert bread.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync").status == "completed"
    assert bread.store.get_run(run_id)["status"] == "interrupted"


def test_a_run_dropped_unfinished_is_ended_by_the_workers_next_sweep(make_bread):
    bread = make_bread(sweep_seconds=0.05, **QUIET_KEEPER)
    run_id = dropped_in_a_cycle(bread, "s1")
    assert_left_to_a_let_go(bread, run_id, "s1")
    life = Lifecycle(bread, Runner(max_runs=1, timeout=None), graceful_timeout=1.0)
    life.sweep_later()
    try:
        wait_for(lambda: bread.store.get_run(run_id)["status"] != "running", LET_GO_WITHIN_SECONDS, "its end")
        assert_ended(bread, run_id, "s1")
    finally:
        life.stop(1.0)


def test_a_run_dropped_unfinished_is_ended_when_its_bread_closes(make_bread):
    bread = make_bread(**QUIET_KEEPER)
    run_id = dropped_in_a_cycle(bread, "s1")
    assert_left_to_a_let_go(bread, run_id, "s1")
    bread.close()
    assert_ended(bread, run_id, "s1")


def test_a_run_closed_ends_at_once_and_is_held_no_longer(bread):
    run = bread.run("slow", {"count": 1000, "delayMs": 0}, session="s1")
    next(run)
    run.close()
    assert_ended(bread, run.run_id, "s1")
    assert not bread.leases._held


def test_a_run_read_to_its_end_is_held_no_longer_once_dropped(bread, monkeypatch):
    bread.run("echo", "hi", mode="sync")
    run = bread.run("echo", "hi")
    for _ in run:
        pass
    closed = []
    monkeypatch.setattr(bread.leases, "close", lambda labels, crumbs: closed.append(labels.run_id))
    del run  # its finalizer drops it
    bread.let_go()
    assert not bread.leases._held
    assert closed == []  # nothing was left for a let go to close
