"""The log follower of a process without Redis, on the Postgres store: it wakes when another
process appends (LISTEN/NOTIFY) and reads only the logs that grew, instead of polling them."""

import time

import pytest

from bread_sync.cancel import CancelRegistry
from bread_sync.crumbs import TEXT_DELTA, Frame
from bread_sync.transports import stream

pytest.importorskip("psycopg", reason='the Postgres tests need psycopg: pip install "bread-sync[test]"')

from bread_sync.stores import append_listener, postgres  # noqa: E402 - after the skip

DEADLINE = 10.0


@pytest.fixture
def two_processes(make_bread, postgres_url):
    """Two Breads, each with a store of its own on one database and no shared transport: what
    two replicas on two hosts without Redis are. Each has its own registry of live runs, as two
    processes do: with the process's one, a follower would take the other's run for one it
    executes (which its own transport carries) and skip the appends heard while it runs."""
    breads = [make_bread(store=postgres.store(url=postgres_url), transport=stream.transport()) for _ in range(2)]
    for bread in breads:
        bread.cancels = CancelRegistry()
    return breads


def watched_tail(bread, run_id):
    """A tail that has replayed the log to the pause and is watched by the follower."""
    frames = bread.tail(run_id, heartbeat=0.05)
    replayed = []
    while (frame := next(frames)) is not None:
        replayed.append(frame)
    assert replayed[-1].type == "human:required"
    return frames, replayed[-1].seq


def test_a_tail_wakes_when_another_process_appends_not_at_its_next_poll(two_processes):
    here, there = two_processes
    here.follower.interval = 30.0  # a poll would come too late for the deadline below
    paused = there.run("writer", {"topic": "bread"}, mode="sync")
    frames, paused_at = watched_tail(here, paused.run_id)

    there.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    began = time.monotonic()  # the run has ended there: from now on only the follower brings it here
    got = []
    for frame in frames:
        if frame is not None:
            got.append(frame)
        assert time.monotonic() - began < DEADLINE
    assert got[-1].type == "agent:run:end"
    resumed = there.store.get_crumbs(paused.run_id, after=paused_at)
    assert [(f.seq, f.type) for f in got if f.type != TEXT_DELTA] == [
        (f.seq, f.type) for f in resumed if f.type != TEXT_DELTA
    ]


def test_an_idle_watched_tail_reads_nothing_until_the_safety_net(two_processes):
    here, there = two_processes
    here.follower.interval = 0.01
    paused = there.run("writer", {"topic": "bread"}, mode="sync")
    frames, _ = watched_tail(here, paused.run_id)
    looks = []
    last_seqs = here.store.last_seqs
    here.store.last_seqs = lambda run_ids: looks.append(list(run_ids)) or last_seqs(run_ids)

    time.sleep(0.5)  # 50 follower intervals: a polling follower would look 50 times

    assert len(looks) <= 1, looks  # at most the look of the pass under way when counting began
    frames.close()


def test_the_listener_hears_the_runs_appended_by_another_connection(postgres_url):
    writer, reader = postgres.store(url=postgres_url), postgres.store(url=postgres_url)
    listener = append_listener(reader)
    try:
        assert listener.wait(0.01) is None  # it had to connect: appends before may have gone unheard
        assert listener.wait(0.01) == set()
        writer.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1"})])
        writer.append_crumbs("r2", [Frame("r2", 1, {"type": "tool:call", "runId": "r2"})])
        writer.append_crumbs("r1", [Frame("r1", 2, {"type": "tool:call", "runId": "r1"})])
        heard = set()
        deadline = time.monotonic() + DEADLINE
        while heard != {"r1", "r2"} and time.monotonic() < deadline:
            heard |= listener.wait(1.0)
        assert heard == {"r1", "r2"}
    finally:
        listener.close()
        writer.close()
        reader.close()
