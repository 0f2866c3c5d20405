"""The store's purge (retention), over every implementation: what finished before the cutoff
goes, with everything it owns; a running or paused run, a pending checkpoint and anything newer stay."""

import pytest

from bread_sync.clock import iso_days_ago, now_iso
from bread_sync.stores import FINISHED, PURGED, can_purge

from .test_store import OLD, crumb, run_record, seqs, store  # noqa: F401 - the store fixture

BEFORE = "2025-01-01T00:00:00.000Z"
NOTHING = dict.fromkeys(PURGED, 0)


def add_run(store, run_id, status, updated_at=OLD, crumbs=3):  # noqa: F811
    store.create_run(run_record(run_id, status=status, owner=None, updatedAt=updated_at))
    store.append_crumbs(run_id, [crumb(run_id, seq) for seq in range(1, crumbs + 1)])


def add_checkpoint(store, checkpoint_id, run_id, status, created_at=OLD):  # noqa: F811
    store.save_checkpoint({"id": checkpoint_id, "runId": run_id, "status": status, "createdAt": created_at})


def add_loop(store, loop_id, run_id, status="completed"):  # noqa: F811
    store.save_loop({"id": loop_id, "agentId": "a", "sessionId": "s1", "runId": run_id, "status": status,
                     "iterations": 2, "maxIterations": 5, "createdAt": OLD, "updatedAt": OLD})  # fmt: skip
    for index in (1, 2):
        store.save_loop_iteration(loop_id, {"index": index, "status": "completed", "output": index,
                                            "startedAt": OLD, "endedAt": OLD})  # fmt: skip


def add_task_run(store, task_run_id, run_id, status="completed", created_at=OLD):  # noqa: F811
    store.save_task_run({
        "id": task_run_id, "taskId": "t", "sessionId": "s1", "agentId": "a", "runId": run_id, "status": status,
        "model": "script", "durationMs": 1, "usage": None, "error": None, "input": {}, "output": {},
        "createdAt": created_at, "updatedAt": created_at,
    })  # fmt: skip


@pytest.fixture
def world(store):  # noqa: F811
    """One old finished run ("done") owning a log, a used checkpoint, a loop and a task run; and
    what must survive: an old running run, an old paused run with its pending checkpoint, a
    recent finished run, task runs of no run that are running or recent."""
    add_run(store, "done", "completed")
    add_checkpoint(store, "cp-done", "done", "resumed")
    add_loop(store, "loop-done", "done")
    add_task_run(store, "task-done", "done")
    add_checkpoint(store, "cp-void", "gone-long-ago", "void")
    add_task_run(store, "task-orphan-old", None)
    store.create_mcp_session({"id": "mcp-old", "protocolVersion": "2025-11-25", "createdAt": OLD, "owner": "o",
                              "usedAt": OLD})  # fmt: skip

    add_run(store, "live", "running")
    add_loop(store, "loop-live", "live", status="running")
    add_task_run(store, "task-live", "live", status="running")
    add_run(store, "waiting", "paused")
    add_checkpoint(store, "cp-waiting", "waiting", "pending")
    add_run(store, "fresh", "completed", updated_at=now_iso())
    add_checkpoint(store, "cp-fresh", "fresh", "resumed", created_at=now_iso())
    add_task_run(store, "task-orphan-running", None, status="running")
    add_task_run(store, "task-orphan-new", None, created_at=now_iso())
    store.create_mcp_session({"id": "mcp-new", "protocolVersion": "2025-11-25", "createdAt": now_iso(), "owner": "o",
                              "usedAt": now_iso()})  # fmt: skip
    return store


DELETED_FROM_THE_WORLD = {"runs": 1, "crumbs": 3, "checkpoints": 2, "loops": 1, "taskRuns": 2, "mcpSessions": 1}


def assert_survivors(store):  # noqa: F811
    for run_id in ("live", "waiting", "fresh"):
        assert store.get_run(run_id) is not None, run_id
        assert seqs(store.get_crumbs(run_id)) == [1, 2, 3], run_id
    assert store.get_checkpoint("cp-waiting")["status"] == "pending"
    assert store.get_checkpoint("cp-fresh") is not None
    assert len(store.get_loop("loop-live")["iterations"]) == 2
    for task_run_id in ("task-live", "task-orphan-running", "task-orphan-new"):
        assert store.get_task_run(task_run_id) is not None, task_run_id
    assert store.get_mcp_session("mcp-new") is not None


def test_it_can_purge(store):  # noqa: F811
    assert can_purge(store)


def test_a_finished_run_before_the_cutoff_goes_with_everything_it_owns(world):
    assert world.purge(BEFORE) == DELETED_FROM_THE_WORLD

    assert world.get_run("done") is None
    assert world.get_crumbs("done") == []
    assert world.last_seq("done") == 0
    assert world.get_checkpoint("cp-done") is None and world.get_checkpoint("cp-void") is None
    assert world.get_loop("loop-done") is None
    assert world.get_task_run("task-done") is None and world.get_task_run("task-orphan-old") is None
    assert world.get_mcp_session("mcp-old") is None
    assert [r["id"] for r in world.list_runs()] == ["live", "waiting", "fresh"]
    assert_survivors(world)


@pytest.mark.parametrize("status", sorted(FINISHED))
def test_every_finished_status_is_purged(store, status):  # noqa: F811
    add_run(store, "ended", status)

    assert store.purge(BEFORE) == {**NOTHING, "runs": 1, "crumbs": 3}
    assert store.get_run("ended") is None


def test_a_running_or_paused_run_stays_however_old(store):  # noqa: F811
    add_run(store, "live", "running", updated_at="2000-01-01T00:00:00.000Z")
    add_run(store, "waiting", "paused", updated_at="2000-01-01T00:00:00.000Z")

    assert store.purge(now_iso()) == NOTHING
    assert {r["id"] for r in store.list_runs()} == {"live", "waiting"}


def test_a_dry_run_counts_and_deletes_nothing(world):
    assert world.purge(BEFORE, dry_run=True) == DELETED_FROM_THE_WORLD

    assert world.get_run("done") is not None
    assert seqs(world.get_crumbs("done")) == [1, 2, 3]
    assert world.get_loop("loop-done") is not None
    assert world.get_mcp_session("mcp-old") is not None
    assert world.purge(BEFORE) == DELETED_FROM_THE_WORLD


def test_a_second_purge_finds_nothing(world):
    world.purge(BEFORE)

    assert world.purge(BEFORE) == NOTHING
    assert_survivors(world)


def test_a_purged_loop_loses_its_iterations(world):
    world.purge(BEFORE)

    world.save_loop({"id": "loop-done", "agentId": "a", "sessionId": "s1", "runId": "another", "status": "running",
                     "iterations": 7, "maxIterations": 9, "createdAt": OLD, "updatedAt": OLD})  # fmt: skip
    world.save_loop_iteration("loop-done", {"index": 7, "status": "running", "output": None, "startedAt": OLD})
    assert [i["index"] for i in world.get_loop("loop-done")["iterations"]] == [7]


def test_a_purged_run_id_can_be_used_again(world):
    world.purge(BEFORE)

    assert world.create_run(run_record("done"))
    world.append_crumbs("done", [crumb("done", 1)])
    assert seqs(world.get_crumbs("done")) == [1]


def test_many_runs_are_purged_in_batches(store):  # noqa: F811
    for n in range(450):
        add_run(store, f"old-{n}", "completed", crumbs=2)
    add_run(store, "live", "running")

    assert store.purge(BEFORE) == {**NOTHING, "runs": 450, "crumbs": 900}
    assert [r["id"] for r in store.list_runs()] == ["live"]


def test_a_cutoff_further_back_than_a_date_reaches_is_before_everything(store):  # noqa: F811
    add_run(store, "done", "completed")
    store.touch_session("s1")

    assert store.purge(iso_days_ago(1e20)) == NOTHING
    assert store.cleanup_sessions(older_than_days=1e20) == 0
    assert store.cleanup_sessions(older_than_days=float("inf")) == 0
