"""The store's batch, over every implementation: its writes are all there after it, and one that
fails leaves the store as it was when it began, whatever it wrote (SQLite and Postgres roll
back; the memory store, the others' test double, undoes each write)."""

import pytest

from bread_sync.clock import now_iso
from bread_sync.errors import BreadError
from bread_sync.stores.memory import MemoryStore

from .test_store import OLD, checkpoint, crumb, mcp_session, push, run_record, seqs, store  # noqa: F401 - the fixture

NOW = 10**10  # a push subscription saved now is due then


class Refused(Exception):
    """Raised inside a batch after its writes, as a run's end that the store refused."""


def loop(loop_id, **fields):
    return {"id": loop_id, "agentId": "a", "sessionId": "s1", "runId": "r1", "status": "running", "iterations": 1,
            "maxIterations": 5, "createdAt": OLD, "updatedAt": OLD, **fields}  # fmt: skip


def iteration(index, **fields):
    return {"index": index, "status": "completed", "output": index, "startedAt": OLD, "endedAt": OLD, **fields}


def task_run(task_run_id, run_id="r1", **fields):
    return {"id": task_run_id, "taskId": "t", "sessionId": "s1", "agentId": "a", "runId": run_id,
            "status": "completed", "model": "script", "durationMs": 1, "usage": None, "error": None, "input": {},
            "output": {}, "createdAt": OLD, "updatedAt": OLD, **fields}  # fmt: skip


RUNS = ("r0", "r1", "r2", "r3")
CHECKPOINTS = ("cp1", "cp2")
SESSIONS = ("s1", "s2", "s3")
LOOPS = ("l1", "l2", "l3")
MCP_SESSIONS = ("m1", "m2", "m3")


def fill(store):  # noqa: F811
    """One or two of each thing a store keeps: r0 finished long ago (what a purge takes), r1
    running on s1 (which it holds), r2 queued on s2; loop l2 has no iteration yet."""
    store.create_run(run_record("r0", status="completed", owner=None))
    store.append_crumbs("r0", [crumb("r0", 1)])
    store.save_task_run(task_run("tr0", "r0"))
    store.create_run(run_record("r1"))
    store.create_run(run_record("r2", status="queued", sessionId="s2", owner=None))
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 2)])
    store.save_checkpoint(checkpoint("cp1"))
    store.touch_session("s1", {"team": "a"}, state={"plan": [1]})
    store.append_messages("s1", [{"role": "user", "content": "hi"}])
    store.touch_session("s2", {"team": "b"})
    store.claim_session("s1", "r1")
    store.save_loop(loop("l1"))
    store.save_loop_iteration("l1", iteration(1))
    store.save_loop(loop("l2"))  # no iteration yet
    store.save_task_run(task_run("tr1"))
    store.create_mcp_session(mcp_session("m1"))
    store.create_mcp_session(mcp_session("m2", usedAt="2030-01-01T00:00:00.000Z"))
    store.save_push_config(push(config_id="c1"))
    store.save_push_config(push(config_id="c2"))
    store.claim_push("a", NOW, NOW + 30)  # c1, held by a


def holder(store, session_id):  # noqa: F811
    """The run holding the session, or None (asked by claiming it, let go at once)."""
    held = store.claim_session(session_id, "probe")
    if held is None:
        store.release_session(session_id, "probe")
    return held


def everything(store):  # noqa: F811
    """All that :func:`fill` and the writes below put in a store, read through its calls."""
    return {
        "runs": store.list_runs(),
        "logs": {run_id: store.get_crumbs(run_id) for run_id in RUNS},
        "lastSeqs": store.last_seqs(list(RUNS)),
        "checkpoints": {i: store.get_checkpoint(i) for i in CHECKPOINTS},
        "sessions": {i: store.get_session(i) for i in SESSIONS},
        "listedSessions": store.list_sessions(),
        "claims": {i: holder(store, i) for i in SESSIONS},
        "loops": store.list_loops(),
        "loopIterations": {i: store.get_loop(i) for i in LOOPS},
        "taskRuns": store.list_task_runs(),
        "mcpSessions": {i: store.get_mcp_session(i) for i in MCP_SESSIONS},
        "pushes": store.list_push_configs("t1"),
    }


#: One write of each kind a store makes, each changing what :func:`fill` wrote.
WRITES = {
    "a new run": lambda s: s.create_run(run_record("r3")),
    "a run's record": lambda s: s.update_run("r1", status="completed", usage={"totalTokens": 3}, trace={"t": "x"}),
    "a queued run claimed": lambda s: s.claim_queued("r2", "host:2:b", 200.0, now=1.0),
    "crumbs": lambda s: s.append_crumbs("r1", [crumb("r1", 3), crumb("r1", 4)]),
    "a new log": lambda s: s.append_crumbs("r3", [crumb("r3", 1)]),
    "a new checkpoint": lambda s: s.save_checkpoint(checkpoint("cp2")),
    "a checkpoint saved again": lambda s: s.save_checkpoint(checkpoint("cp1", nextSeq=9)),
    "a checkpoint claimed": lambda s: s.claim_checkpoint("cp1"),
    "a new session": lambda s: s.touch_session("s3", {"team": "c"}, state={"fresh": True}),
    "a session touched": lambda s: s.touch_session("s1", {"team": "z", "user": "ann"}, state={"plan": [2]}),
    "a session's history": lambda s: s.append_messages("s1", [{"role": "assistant", "content": "hello"}]),
    "a session deleted": lambda s: s.delete_session("s1"),
    "sessions cleaned up": lambda s: s.cleanup_sessions(tags={"team": "a"}),
    "a session claimed": lambda s: s.claim_session("s2", "r2"),
    "a session's claim taken over": lambda s: s.claim_session("s1", "r9", take_from="r1"),
    "a session released": lambda s: s.release_session("s1", "r1"),
    "a new loop": lambda s: s.save_loop(loop("l3")),
    "a loop saved again": lambda s: s.save_loop(loop("l1", status="completed")),
    "a loop's first iteration": lambda s: s.save_loop_iteration("l2", iteration(1)),
    "a loop's next iteration": lambda s: s.save_loop_iteration("l1", iteration(2)),
    "a loop's iteration saved again": lambda s: s.save_loop_iteration("l1", iteration(1, output="again")),
    "a new task run": lambda s: s.save_task_run(task_run("tr2")),
    "a task run saved again": lambda s: s.save_task_run(task_run("tr1", status="failed")),
    "a new MCP session": lambda s: s.create_mcp_session(mcp_session("m3")),
    "an MCP session deleted": lambda s: s.delete_mcp_session("m1"),
    "an MCP session touched": lambda s: s.touch_mcp_session("m1", "2031-01-01T00:00:00.000Z"),
    "MCP sessions evicted": lambda s: s.evict_mcp_sessions("alice", 0),
    "MCP sessions expired": lambda s: s.expire_mcp_sessions("2025-01-01T00:00:00.000Z"),
    "a new push subscription": lambda s: s.save_push_config(push(config_id="c3")),
    "a push subscription saved again": lambda s: s.save_push_config(push(config_id="c2", url="https://b.example")),
    "a push subscription deleted": lambda s: s.delete_push_config("t1", "c1"),
    "a push claimed": lambda s: s.claim_push("b", NOW, NOW + 30),
    "a push settled": lambda s: s.settle_push("t1", "c1", "a", delivered=1, attempts=1, nextAttemptAt=NOW + 60),
    "pushes hastened": lambda s: s.hasten_push("t1", 0),
    "a purge": lambda s: s.purge(now_iso()),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_failed_batch_undoes_a_write_of_each_kind(store, write):  # noqa: F811
    fill(store)
    before = everything(store)
    with pytest.raises(Refused), store.batch():
        write(store)
        assert everything(store) != before, "the write changes the store"
        raise Refused
    assert everything(store) == before


def test_a_runs_end_refused_after_its_other_writes_leaves_none_of_them(store):  # noqa: F811
    # A run's end (or pause) is recorded only while its process owns the run (engine/execution.py):
    # the record's write refuses by raising, after the crumbs, the checkpoint, the session's
    # history and the claim's release written with it in its batch.
    fill(store)
    before = everything(store)
    with pytest.raises(Refused), store.batch():
        store.append_crumbs("r1", [crumb("r1", 3)])
        store.append_crumbs("r2", [crumb("r2", 1)])
        store.save_checkpoint(checkpoint("cp2"))
        store.touch_session("s1", state={"plan": [3]})
        store.append_messages("s1", [{"role": "assistant", "content": "bye"}])
        store.release_session("s1", "r1")
        if not store.update_run("r1", expect={"owner": "another-process"}, status="paused"):
            raise Refused
    assert everything(store) == before
    store.append_crumbs("r1", [crumb("r1", 3)])  # its seqs are free again
    assert seqs(store.get_crumbs("r1")) == [1, 2, 3]


def test_a_failed_batch_undoes_what_a_nested_batch_in_it_wrote(store):  # noqa: F811
    fill(store)
    before = everything(store)
    with pytest.raises(Refused), store.batch():
        store.append_crumbs("r1", [crumb("r1", 3)])
        with store.batch():  # joins the outer one: its end commits nothing
            store.update_run("r1", status="completed")
            store.save_checkpoint(checkpoint("cp2"))
        store.claim_session("s2", "r2")
        raise Refused
    assert everything(store) == before


def test_a_nested_batch_that_fails_inside_one_that_goes_on_undoes_nothing(store):  # noqa: F811
    # A nested batch joins the outer one: only the outer's end writes, or undoes, its writes.
    fill(store)
    with store.batch():
        store.append_crumbs("r1", [crumb("r1", 3)])
        with pytest.raises(Refused), store.batch():
            store.update_run("r1", status="completed")
            raise Refused
        store.claim_session("s2", "r2")
    assert seqs(store.get_crumbs("r1")) == [1, 2, 3]
    assert store.get_run("r1")["status"] == "completed"
    assert holder(store, "s2") == "r2"


def test_the_writes_of_a_batch_are_all_there_after_it(store):  # noqa: F811
    store.create_run(run_record("r1"))
    with store.batch():
        store.append_crumbs("r1", [crumb("r1", 1)])
        with store.batch():  # a nested batch joins the outer one
            store.update_run("r1", status="completed")
        store.touch_session("s1")
    assert seqs(store.get_crumbs("r1")) == [1]
    assert store.get_run("r1")["status"] == "completed"
    assert store.get_session("s1") is not None


def test_a_batch_whose_first_write_conflicts_writes_nothing_after_it(store):  # noqa: F811
    store.create_run(run_record("r1"))
    store.append_crumbs("r1", [crumb("r1", 1)])
    with pytest.raises(BreadError), store.batch():
        store.append_crumbs("r1", [crumb("r1", 1)])
        store.update_run("r1", status="completed")
    assert store.get_run("r1")["status"] == "running"
    assert seqs(store.get_crumbs("r1")) == [1]


# The memory store's own structures: what its calls do not show (an empty log, an order) too.


def kept(memory):
    """Every structure the memory store keeps, each dict as its list of items: its order counts."""
    return {name: _in_order(value) for name, value in vars(memory).items() if name != "_lock"}


def _in_order(value):
    if isinstance(value, dict):
        return [(key, _in_order(each)) for key, each in value.items()]
    return [_in_order(each) for each in value] if isinstance(value, list) else value


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_failed_batch_leaves_every_structure_of_the_memory_store_as_it_was(write):
    memory = MemoryStore()
    fill(memory)
    before = kept(memory)
    with pytest.raises(Refused), memory.batch():
        write(memory)
        raise Refused
    assert kept(memory) == before
