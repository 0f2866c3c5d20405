"""A run ended by another process than its owner (engine/recovery.py): interrupted by a sweep or
``Bread.interrupt``, or cancelled after its owner died. The process claims the run first (one
wins), then logs its terminal crumb with the record's end in that crumb's transaction: no record
says the run ended before its log does, and a claim whose process died before the crumb is ended
by the next sweep."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bread_sync.clock import now_iso
from bread_sync.crumbs import TERMINAL, Frame
from bread_sync.errors import STORE_BUSY, BreadError
from bread_sync.loading import resolve
from bread_sync.stores import STORES

from .contract import test_store as contract_store
from .dying import Died, failing_at_the_end
from .waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
#: The claimer's lease: long enough to see that nobody ends its claim while it runs.
CLAIM_LEASE_SECONDS = 3.0
#: Bounds on waits, not paces.
SWEEP_WITHIN_SECONDS = 10
CHILD_SECONDS = 60

#: How a process ends a run whose owner is gone, and what the run then says.
ENDS = {
    "interrupt": (lambda bread, run_id: bread.interrupt(bread.store.get_run(run_id)), "interrupted", "RUN_INTERRUPTED"),
    "sweep": (lambda bread, run_id: bread.sweep_interrupted(), "interrupted", "RUN_INTERRUPTED"),
    "cancel": (lambda bread, run_id: bread.cancel(run_id), "cancelled", "RUN_CANCELLED"),
}


store = contract_store.store  # every store implementation, closed after


def orphan(store, run_id: str = "orphan") -> None:
    """A running run and its start crumb, as an owner whose lease lapsed left them."""
    now = now_iso()
    store.create_run({
        "id": run_id, "agentId": "echo", "sessionId": "s", "status": "running", "checkpointId": None,
        "owner": "a-process-that-died", "leaseUntil": 0.0, "cancelRequested": False, "usage": None,
        "createdAt": now, "updatedAt": now,
    })  # fmt: skip
    start = {"type": "agent:run:start", "runId": run_id, "agentId": "echo", "input": "hi"}
    store.append_crumbs(run_id, [Frame(run_id, 1, start)])


def ending(make_bread, store, **config):
    """A process that ends runs whose owner is gone rather than carrying them on."""
    return make_bread(store=store, max_continuations=0, **config)


#: What stops a process writing a terminal crumb: its death, or its store refusing the write.
FAILURES = {"died": Died, "refused": lambda: BreadError(STORE_BUSY, "the store is busy")}


def failed_ending(make_bread, store, end: str, monkeypatch, failure: str = "died"):
    """A process that claimed the orphan to end it and failed writing its terminal crumb."""
    claimer = ending(make_bread, store, lease_seconds=CLAIM_LEASE_SECONDS)
    failing_at_the_end(store, monkeypatch, FAILURES[failure])
    with pytest.raises((Died, BreadError)):
        ENDS[end][0](claimer, "orphan")
    monkeypatch.undo()
    return claimer


def assert_ended_once(store, end: str, run_id: str = "orphan") -> list[str]:
    _, status, code = ENDS[end]
    log = store.get_crumbs(run_id)
    types = [frame.type for frame in log]
    assert [t in TERMINAL for t in types].count(True) == 1 and log[-1].type == "agent:error", types
    assert log[-1].crumb["error"]["code"] == code
    assert [frame.seq for frame in log] == list(range(1, len(log) + 1))
    record = store.get_run(run_id)
    assert (record["status"], record["owner"]) == (status, None)
    return types


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("end", ENDS)
def test_a_run_ended_by_another_process_is_never_recorded_ended_without_its_terminal_crumb(
    make_bread, store, end, failure, monkeypatch
):
    # A tail learns of a run's end from its log (Postgres' listener hears appends only): a record
    # marked ended before the process died writing the crumb left it waiting, its log unended.
    orphan(store)

    claimer = failed_ending(make_bread, store, end, monkeypatch, failure)

    assert [frame.type for frame in store.get_crumbs("orphan")] == ["agent:run:start"]  # the crumb died with it
    record = store.get_run("orphan")
    assert (record["status"], record["owner"]) == ("running", claimer.owner)  # claimed, not ended


@pytest.mark.parametrize("end", ENDS)
def test_a_claim_whose_process_died_before_the_crumb_is_ended_by_the_next_sweep(make_bread, store, end, monkeypatch):
    orphan(store)
    failed_ending(make_bread, store, end, monkeypatch)
    survivor = ending(make_bread, store)

    assert survivor.sweep_interrupted() == 0  # the claim's lease runs: nobody ends it twice meanwhile
    # Its lease lapses (its owner string names a live process): a sweep then ends the run.
    wait_for(survivor.sweep_interrupted, SWEEP_WITHIN_SECONDS, "a sweep that ends the run", interval=0.02)

    assert assert_ended_once(store, end) == ["agent:run:start", "agent:error"]


@pytest.mark.parametrize("end", ["interrupt", "cancel"])  # the sweep's end is the interrupt's
def test_a_writer_taking_the_final_seq_meanwhile_is_followed_by_the_end(make_bread, store, end, monkeypatch):
    # An owner thought gone was still writing: the end goes after its crumb, not in place of it.
    orphan(store)
    bread = ending(make_bread, store)
    last_seq = store.last_seq

    def a_late_writer_appends_after_the_read(run_id):
        seq = last_seq(run_id)
        if seq == 1:
            store.append_crumbs(run_id, [Frame(run_id, 2, {"type": "text:delta", "runId": run_id, "delta": "late"})])
        return seq

    monkeypatch.setattr(store, "last_seq", a_late_writer_appends_after_the_read)
    assert ENDS[end][0](bread, "orphan")
    monkeypatch.undo()

    assert assert_ended_once(store, end) == ["agent:run:start", "text:delta", "agent:error"]


@pytest.mark.parametrize("end", ["interrupt", "cancel"])
def test_a_claim_lost_before_the_end_commits_undoes_the_terminal_crumb(make_bread, store, end, monkeypatch):
    # This process was slow: its claim's lease lapsed and another process claimed the run, which
    # that one now ends or carries on. Its record write fails, and the crumb goes with it.
    orphan(store)
    bread = ending(make_bread, store)
    last_seq = store.last_seq

    def another_process_claims_it_meanwhile(run_id):
        store.update_run(run_id, owner="another-process", leaseUntil=time.time() + 30)
        return last_seq(run_id)

    monkeypatch.setattr(store, "last_seq", another_process_claims_it_meanwhile)
    ENDS[end][0](bread, "orphan")
    monkeypatch.undo()

    assert [frame.type for frame in store.get_crumbs("orphan")] == ["agent:run:start"]
    record = store.get_run("orphan")
    assert (record["status"], record["owner"]) == ("running", "another-process")
    assert record["cancelRequested"] is (end == "cancel")  # the cancel holds for whoever ends it


KILLED_ENDING = """
import os, signal, sys
from bread_sync.crumbs import TERMINAL
from bread_sync.demo import config
from bread_sync.runtime import Bread
from bread_sync.stores.sqlite import store

path, end = sys.argv[1], sys.argv[2]
bread = Bread(config().model_copy(update={"store": store(path), "max_continuations": 0}))
append_crumbs = bread.store.append_crumbs

def killed_at_the_end(run_id, frames):
    if any(frame.type in TERMINAL for frame in frames):
        os.kill(os.getpid(), signal.SIGKILL)
    return append_crumbs(run_id, frames)

bread.store.append_crumbs = killed_at_the_end
if end == "interrupt":
    bread.interrupt(bread.store.get_run("orphan"))
elif end == "sweep":
    bread.sweep_interrupted()
else:
    bread.cancel("orphan")
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a dead owner of this host is told through /proc")
@pytest.mark.parametrize("end", ENDS)
def test_a_process_killed_between_its_claim_and_the_end_leaves_the_run_to_the_next_sweep(make_bread, tmp_path, end):
    store = resolve("sqlite", STORES, "store", path=tmp_path / "bread.db")
    orphan(store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", KILLED_ENDING, str(tmp_path / "bread.db"), end]
    child = subprocess.Popen(args, env=env, cwd=ROOT, stderr=subprocess.PIPE)
    _, stderr = child.communicate(timeout=CHILD_SECONDS)
    assert child.returncode == -9, stderr.decode()[-2000:]
    record = store.get_run("orphan")
    assert record["status"] == "running" and record["owner"].split(":")[1] == str(child.pid)
    assert [frame.type for frame in store.get_crumbs("orphan")] == ["agent:run:start"]

    survivor = ending(make_bread, store)  # its lease runs, but its owner is a dead process of this host

    assert survivor.sweep_interrupted() == 1
    assert assert_ended_once(store, end) == ["agent:run:start", "agent:error"]
