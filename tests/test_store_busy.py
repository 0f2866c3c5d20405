"""The SQLite store and a file another process locked: writes wait (cooperatively under gevent)
and then succeed, or fail with STORE_BUSY and write nothing; reads never wait; a lock held for
a commit's length is tried again well within a millisecond."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from bread_sync.crumbs import Frame
from bread_sync.errors import STORE_BUSY, BreadError
from bread_sync.stores import sqlite
from bread_sync.stores.sqlite.busy import BUSY_PAUSES

from .sqlite_lock import lock_held


def frame(run_id: str, seq: int) -> Frame:
    return Frame(run_id, seq, {"type": "tool:call", "runId": run_id, "n": seq})


@pytest.fixture
def store(tmp_path):
    made = sqlite.store(tmp_path / "bread.db", busy_seconds=2.0)
    yield made
    made.close()


def test_a_write_waits_for_the_lock_and_reads_do_not(store):
    store.append_crumbs("r", [frame("r", 1)])
    with lock_held(store.path, 0.6):
        began = time.monotonic()
        assert [f.seq for f in store.get_crumbs("r")] == [1]  # WAL: a reader is never locked out
        read_seconds = time.monotonic() - began
        store.append_crumbs("r", [frame("r", 2)])
        write_seconds = time.monotonic() - began
    assert read_seconds < 0.3
    assert 0.3 < write_seconds < 2.0
    assert [f.seq for f in store.get_crumbs("r")] == [1, 2]


def test_a_lock_held_past_the_wait_is_store_busy_and_writes_nothing(store):
    with lock_held(store.path, 3.0), pytest.raises(BreadError) as caught:
        store.append_crumbs("r", [frame("r", 1)])
    assert caught.value.code == STORE_BUSY and caught.value.status == 503
    assert store.get_crumbs("r") == []
    store.append_crumbs("r", [frame("r", 1)])
    assert store.last_seq("r") == 1
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_waiting_writers_in_threads_all_get_through(store):
    errors = []

    def write(n: int) -> None:
        try:
            store.touch_session(f"s{n}")
        except Exception as exc:
            errors.append(exc)

    with lock_held(store.path, 0.5):
        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
    assert errors == []
    assert len(store.list_sessions()) == 4


def test_a_write_refused_by_a_commit_tries_again_within_a_fraction_of_a_millisecond(tmp_path):
    # Another process's commit holds the lock for 50 to 200 us: a first pause of SQLite's 1 ms
    # held two workers' writes back many times longer than the lock was held.
    store = sqlite.store(tmp_path / "bread.db", pool_size=1)  # one connection: the one watched
    holder = sqlite3.connect(store.path, isolation_level=None)
    pauses: list[float] = []

    def commit_meanwhile(pause: float) -> None:
        pauses.append(pause)
        if holder.in_transaction:
            holder.execute("COMMIT")

    with store.connection() as db:
        db.conn.os_sleep = commit_meanwhile
    try:
        holder.execute("BEGIN IMMEDIATE")
        store.touch_session("s")
    finally:
        holder.close()
        store.close()
    assert pauses == [BUSY_PAUSES[0]] and pauses[0] <= 0.0002


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json, sqlite3, sys, time
    import gevent
    from bread_sync.stores import sqlite

    store = sqlite.store(sys.argv[1])
    holder = sqlite3.connect(sys.argv[1], isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    writer = gevent.spawn(store.touch_session, "s")
    ticks, began = 0, time.monotonic()
    while time.monotonic() - began < 0.5:  # the hub keeps turning while the writer waits
        gevent.sleep(0.01)
        ticks += 1
    waiting = not writer.ready()
    holder.execute("COMMIT")  # the holder's greenlet can run at all: nothing blocks the hub
    writer.get(timeout=5)
    print(json.dumps({"ticks": ticks, "waiting": waiting, "sessions": len(store.list_sessions())}))
    """
)


def test_under_gevent_a_waiting_write_stalls_no_other_greenlet(tmp_path):
    out = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, str(tmp_path / "bread.db")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["waiting"] and report["sessions"] == 1
    assert report["ticks"] >= 20, report
