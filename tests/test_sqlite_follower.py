"""The log follower of a process without Redis, on the SQLite store: a listener that hears
whether anything was committed (``PRAGMA data_version``), so a follower's pass reads nothing
while nothing was, and a tail of a paused run costs no record read; a resume from another process
still reaches it."""

import time

from bread_sync.cancel import CancelRegistry
from bread_sync.crumbs import Frame
from bread_sync.stores import append_listener, sqlite
from bread_sync.tails import follower as follower_module
from bread_sync.transports import stream

DEADLINE = 10.0


def test_the_listener_hears_whether_another_connection_committed(tmp_path):
    writer, reader = sqlite.store(tmp_path / "bread.db"), sqlite.store(tmp_path / "bread.db")
    listener = append_listener(reader)
    try:
        assert listener.wait(0.0) is None  # its first look: what came before went unheard
        assert listener.wait(0.0) == set()
        writer.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1"})])
        assert listener.wait(0.0) is None  # something was committed: some log may have grown
        assert listener.wait(0.0) == set()
    finally:
        listener.close()
        writer.close()
        reader.close()


def test_an_idle_tail_of_a_paused_run_reads_only_at_the_safety_net_and_a_resume_elsewhere_reaches_it(
    make_bread, tmp_path, monkeypatch
):
    monkeypatch.setattr(follower_module, "SAFETY_NET_SECONDS", 0.1)
    here, there = (make_bread(store=sqlite.store(tmp_path / "bread.db"), transport=stream.transport()) for _ in "ab")
    for bread in (here, there):  # two processes: each its own registry of the runs it executes
        bread.cancels = CancelRegistry()
    here.follower.interval = 0.01
    paused = there.run("writer", {"topic": "bread"}, mode="sync")
    frames = here.tail(paused.run_id, heartbeat=0.05)
    while (frame := next(frames)) is not None:
        last = frame
    assert last.type == "human:required"
    reads = []
    for name in ("last_seqs", "get_run", "get_crumbs"):
        read = getattr(here.store, name)
        counted = lambda *a, read=read, name=name, **kw: reads.append(name) or read(*a, **kw)  # noqa: E731
        monkeypatch.setattr(here.store, name, counted)
    deadline = time.monotonic() + DEADLINE  # until the follower has looked at the run's record (paused)
    while "get_run" not in reads and time.monotonic() < deadline:
        assert next(frames) is None
    reads.clear()

    time.sleep(0.5)  # 5 safety nets and 50 intervals: a follower that polls would read at each

    assert "get_run" not in reads and "get_crumbs" not in reads  # no record look: it is paused
    assert reads.count("last_seqs") <= 7  # the safety nets' one statement for all, no more
    there.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    got = []
    for frame in frames:
        if frame is not None:
            got.append(frame)
        assert time.monotonic() < deadline + DEADLINE
    assert got[-1].type == "agent:run:end"
