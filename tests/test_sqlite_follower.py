"""The log follower of a process without Redis, on the SQLite store: a listener that hears
whether anything was committed (``PRAGMA data_version``), so a follower's pass reads nothing
while nothing was, and a tail of a paused run costs no record read; a resume from another process
still reaches it."""

import json
import subprocess
import sys
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


def follow_a_paused_run_elsewhere(make_bread, tmp_path, monkeypatch):
    """Two Breads on one SQLite file, as two processes; ``here`` tails a run ``there`` paused,
    past its replay, with a fast follower. Returns (here, there, the paused run, the tail)."""
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
    return here, there, paused, frames


def count_reads(store, monkeypatch) -> list[str]:
    """The names of the store's log and record reads from now on, in order."""
    reads = []
    for name in ("last_seqs", "get_run", "get_crumbs"):
        read = getattr(store, name)
        counted = lambda *a, read=read, name=name, **kw: reads.append(name) or read(*a, **kw)  # noqa: E731
        monkeypatch.setattr(store, name, counted)
    return reads


def assert_tail_reaches_the_end(frames, deadline: float) -> None:
    got = []
    for frame in frames:
        if frame is not None:
            got.append(frame)
        assert time.monotonic() < deadline
    assert got[-1].type == "agent:run:end"


def test_an_idle_tail_of_a_paused_run_costs_no_periodic_read_and_a_resume_elsewhere_reaches_it(
    make_bread, tmp_path, monkeypatch
):
    here, there, paused, frames = follow_a_paused_run_elsewhere(make_bread, tmp_path, monkeypatch)
    reads = count_reads(here.store, monkeypatch)
    deadline = time.monotonic() + DEADLINE  # until the follower has looked at the run's record (paused)
    while "get_run" not in reads and time.monotonic() < deadline:
        assert next(frames) is None
    reads.clear()

    time.sleep(0.5)  # a window, not a wait: 5 safety nets and 50 intervals, each of which would read

    assert reads == []  # nothing was committed: neither its record nor its log is read
    there.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert_tail_reaches_the_end(frames, time.monotonic() + DEADLINE)


def test_a_resume_committed_while_the_follower_reads_a_paused_record_still_reaches_the_tail(
    make_bread, tmp_path, monkeypatch
):
    """The race of a safety net: the pass reads the last seqs (no growth), the resume commits
    elsewhere, then the pass reads the record, still paused as it was read before the commit. The
    store heard that commit after the pass's look, so the next pass reads the log again."""
    here, there, paused, frames = follow_a_paused_run_elsewhere(make_bread, tmp_path, monkeypatch)
    monkeypatch.setattr(follower_module, "SAFETY_NET_SECONDS", 0.0)  # every pass a safety net's
    read_record = here.store.get_run
    resumed = []

    def record_read_before_a_resume(run_id):
        record = read_record(run_id)
        if not resumed and record["status"] == "paused":
            resumed.append(there.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync"))
        return record

    monkeypatch.setattr(here.store, "get_run", record_read_before_a_resume)
    assert_tail_reaches_the_end(frames, time.monotonic() + DEADLINE)
    assert resumed and resumed[0].status == "completed"


UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, sys, time
from pathlib import Path
import gevent
from bread_sync import create_bread
from bread_sync.cancel import CancelRegistry
from bread_sync.demo import config as demo_config
from bread_sync.stores import sqlite
from bread_sync.transports import stream

STREAMS, BEAT, BEATS = 200, 0.2, 3
folder = Path(sys.argv[1])

def make():
    config = demo_config().model_copy(update={"store": sqlite.store(path=folder / "bread.db"),
                                              "instance_path": folder, "transport": stream.transport()})
    bread = create_bread(config)
    bread.cancels = CancelRegistry()  # as another process: its own registry of the runs it executes
    return bread

there, here = make(), make()
runs = [there.run("writer", {"topic": f"idle {i}"}, mode="sync").run_id for i in range(STREAMS)]
beats = {}

def follow(run_id):
    frames, got = here.tail(run_id, heartbeat=BEAT, batched=True), []
    for items in frames:
        if items is None:
            got.append(time.monotonic())
            if len(got) == BEATS:
                break
    frames.close()
    beats[run_id] = got

gevent.joinall([gevent.spawn(follow, run_id) for run_id in runs], timeout=60)
gaps = [b - a for got in beats.values() for a, b in zip(got, got[1:])]
print(json.dumps({"streams": len(beats), "fewest": min(map(len, beats.values())), "widest_gap": max(gaps)}))
"""


def test_under_gevent_every_idle_tail_of_a_paused_run_gets_its_heartbeats(tmp_path):
    """200 tails of paused runs of another process idle in one gevent hub, as a worker's streams:
    each gets every heartbeat (the follower's passes and safety nets take none from them)."""
    done = subprocess.run([sys.executable, "-c", UNDER_GEVENT, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["streams"] == 200 and out["fewest"] == 3
    assert out["widest_gap"] < 2.0  # 0.2 s apart; 10x of room for a busy machine
