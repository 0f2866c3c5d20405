"""The SQLite store's write-ahead log is checkpointed in the background, not by commits."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading

from bread_sync.crumbs import Frame
from bread_sync.stores import sqlite
from bread_sync.stores.sqlite import wal

from .waiting import wait_for

PAGE = 4096
#: Crumbs of about a page each: past SQLite's own checkpoint mark (1,000 pages) in all.
BIG_CRUMBS = 1_500


def write_big_crumbs(store, count=BIG_CRUMBS):
    for seq in range(1, count + 1):
        store.append_crumbs("r1", [Frame("r1", seq, {"type": "tool:call", "runId": "r1", "pad": "x" * PAGE})])


def checkpointers(path):
    return [t for t in threading.enumerate() if t.name == f"bread-checkpoint {path}"]


def test_commits_leave_the_log_to_the_checkpointer(tmp_path):
    path = tmp_path / "bread.db"
    store = sqlite.store(path, checkpoint_seconds=3600)  # not within this test
    try:
        write_big_crumbs(store)
        # SQLite's own checkpoint would have copied the log into the file at 1,000 pages and
        # started the log over; here the log holds every page and the file has none of them.
        assert os.path.getsize(f"{path}-wal") > BIG_CRUMBS * PAGE
        assert os.path.getsize(path) < BIG_CRUMBS * PAGE / 10
    finally:
        store.close()


def test_the_checkpointer_copies_the_log_into_the_file_and_stops_with_the_store(tmp_path):
    path = tmp_path / "bread.db"
    store = sqlite.store(path, checkpoint_seconds=0.05)
    try:
        write_big_crumbs(store, count=300)
        wait_for(lambda: os.path.getsize(path) > 300 * PAGE, 10, "the WAL past 300 pages")
        assert checkpointers(path)
        assert store.get_crumbs("r1")[-1].seq == 300
    finally:
        store.close()
    wait_for(lambda: not checkpointers(path), 10, "the checkpointer to stop")


def test_without_a_checkpointer_commits_checkpoint_as_sqlite_does(tmp_path):
    path = tmp_path / "bread.db"
    store = sqlite.store(path, checkpoint_seconds=None)
    try:
        write_big_crumbs(store)
        assert os.path.getsize(f"{path}-wal") < (wal.BACKSTOP_PAGES // 5) * PAGE
        assert os.path.getsize(path) > 900 * PAGE
        assert not checkpointers(path)
    finally:
        store.close()


def test_a_failed_checkpoint_is_logged_and_the_next_one_runs(tmp_path, monkeypatch, caplog):
    path = tmp_path / "bread.db"
    calls = []
    real = wal.checkpoint

    def fail_once(conn):
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        real(conn)

    monkeypatch.setattr(wal, "checkpoint", fail_once)
    store = sqlite.store(path, checkpoint_seconds=0.05)
    try:
        write_big_crumbs(store, count=300)
        wait_for(lambda: os.path.getsize(path) > 300 * PAGE, 10, "the WAL past 300 pages")
        assert len(calls) >= 2 and "checkpointing" in caplog.text
    finally:
        store.close()


FORK_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    from bread_sync.crumbs import Frame
    from bread_sync.stores import sqlite

    path = sys.argv[1]
    store = sqlite.store(path, checkpoint_seconds=0.01)
    store.last_seq("r1")  # this process's checkpointer runs, all the time
    time.sleep(0.05)
    for attempt in range(20):  # forks that land beside a running checkpoint
        pid = os.fork()
        if pid == 0:  # a worker forked from a master whose store had run
            store.append_crumbs(f"c{attempt}", [Frame(f"c{attempt}", 1, {"type": "tool:call", "runId": "x"})])
            mine = [t for t in threading.enumerate() if t.name.startswith("bread-checkpoint")]
            os._exit(0 if store.last_seq(f"c{attempt}") == 1 and mine else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    store.close()
    print("ok")
    """
)


def test_a_forked_process_checkpoints_with_its_own_thread_whenever_it_forks(tmp_path):
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT, str(tmp_path / "bread.db")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


GEVENT_STORE_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json, sys, time
    import gevent
    from bread_sync.crumbs import Frame
    from bread_sync.stores import sqlite
    from bread_sync.stores.sqlite import wal

    get_ident = monkey.get_original("_thread", "get_ident")
    threads = []
    real = wal.checkpoint
    wal.checkpoint = lambda conn: threads.append(get_ident()) or real(conn)
    store = sqlite.store(sys.argv[1], checkpoint_seconds=0.05)
    store.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1"})])
    deadline = time.monotonic() + 10
    while not threads and time.monotonic() < deadline:
        gevent.sleep(0.02)
    store.close()
    print(json.dumps({"checkpoints": len(threads), "in_hub_thread": get_ident() in threads}))
    """
)


def test_under_gevent_the_store_checkpoints_in_a_thread_of_the_os(tmp_path):
    out = subprocess.run([sys.executable, "-c", GEVENT_STORE_SCRIPT, str(tmp_path / "bread.db")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["checkpoints"] >= 1 and not report["in_hub_thread"]


PATCHED_LATER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from bread_sync.stores import sqlite

    store = sqlite.store(sys.argv[1], checkpoint_seconds=0.3)  # built before gevent patches threading,
    from gevent import monkey; monkey.patch_all()               # as a master builds it before a worker patches
    import gevent

    store.last_seq("r1")  # the checkpointer starts here, in the patched process
    ticks, began = 0, time.monotonic()
    while time.monotonic() - began < 1.0:
        gevent.sleep(0.01)
        ticks += 1
    store.close()
    print(json.dumps({"ticks": ticks}))
    """
)


def test_a_store_built_before_gevent_patched_threading_checkpoints_without_blocking_the_hub(tmp_path):
    out = subprocess.run([sys.executable, "-c", PATCHED_LATER_SCRIPT, str(tmp_path / "bread.db")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["ticks"] >= 50  # 0.01 s ticks for 1 s


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json
    import gevent
    from bread_sync import greenlets

    blocking_sleep = monkey.get_original("time", "sleep")
    get_ident = monkey.get_original("_thread", "get_ident")
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(1000)])
    gevent.sleep(0)
    # A call that blocks its thread of the OS for 0.3 s, as a checkpoint's fsyncs may.
    ran_in = greenlets.in_os_thread(lambda: blocking_sleep(0.3) or get_ident())
    ticker.kill()
    print(json.dumps({"ticks": len(ticks), "other_thread": ran_in != get_ident()}))
    """
)


def test_under_gevent_a_call_in_a_thread_of_the_os_stalls_no_greenlet():
    out = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["other_thread"]
    assert report["ticks"] >= 10  # the hub kept turning (0.01 s ticks) while the call blocked
