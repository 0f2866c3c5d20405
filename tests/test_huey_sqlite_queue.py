"""The SQLite queue's handout (executors/sqlite_queue.py): one worker of a process reads the file
while the others wait in memory, and one take hands a task to each waiting worker; an idle
worker returns to Huey's loop within the wait; commits wait for no fsync; popping a flag that
is not there takes no write lock. Workers in real
processes: tests/integration/test_queued_runs.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from huey.constants import EmptyData

from bread_sync.errors import STORE_BUSY, BreadError
from bread_sync.executors.huey import executor
from bread_sync.executors.sqlite_queue import Handout, HandoutSqliteStorage

DEADLINE = 10
WORKERS = 4


def _storage(tmp_path) -> HandoutSqliteStorage:
    storage = executor(path=tmp_path / "queue.db").huey.storage
    assert isinstance(storage, HandoutSqliteStorage)
    return storage


def _enqueue_at_once(storage: HandoutSqliteStorage, tasks: list[bytes]) -> None:
    """The tasks in one transaction, so that one take can find them all."""
    with storage.db(commit=True) as curs:
        for task in tasks:
            curs.execute("insert into task (queue, data, priority) values (?, ?, 0)", (storage.name, task))


def _wait_until(condition) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)  # a pause between polls, bounded by the deadline


def test_one_worker_reads_the_queue_and_one_take_hands_a_task_to_each_waiting_worker(tmp_path):
    storage = _storage(tmp_path)
    takes: list[tuple[int, int, list[bytes]]] = []
    take = storage.take

    def recorded_take(most: int) -> list[bytes]:
        tasks = take(most)
        takes.append((threading.get_ident(), most, tasks))
        return tasks

    storage.handout.take = recorded_take
    got: list[bytes] = []

    def worker() -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:  # as Huey's worker loops on a blocking storage
            task = storage.dequeue()
            if task is not None:
                got.append(bytes(task))
                return

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    _wait_until(lambda: storage.handout._waiting == WORKERS - 1 and takes)
    assert len({reader for reader, _, _ in takes}) == 1  # the others wait without reading
    tasks = [f"task {i}".encode() for i in range(WORKERS)]
    _enqueue_at_once(storage, tasks)
    for thread in threads:
        thread.join(DEADLINE)
    assert sorted(got) == tasks  # each task to one worker, none twice
    assert [taken for _, _, taken in takes if taken] == [tasks]  # in one take, in queue order
    assert storage.queue_size() == 0


def test_an_idle_worker_returns_to_hueys_loop_within_the_wait():
    handout = Handout(lambda most: [], wait_seconds=0.05)
    waiter: list[bytes | None] = [b"not yet"]
    thread = threading.Thread(target=lambda: waiter.__setitem__(0, handout.next()))
    started = time.monotonic()
    thread.start()
    assert handout.next() is None
    thread.join(DEADLINE)
    assert waiter == [None]
    assert time.monotonic() - started < DEADLINE


def test_the_queue_commits_without_waiting_for_fsync_as_the_store_does(tmp_path):
    storage = _storage(tmp_path)
    assert storage.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    storage.enqueue(b"task")
    assert bytes(storage.dequeue()) == b"task"


def test_popping_an_absent_flag_takes_no_write_lock(tmp_path):
    # Huey pops each task's revoke flag after the task: with another worker holding the file's
    # write lock, Huey's own pop waited for it (up to 5 s, then "database is locked").
    storage = _storage(tmp_path)
    storage.put_data(b"flag", b"set")
    holder = sqlite3.connect(storage.filename, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        began = time.monotonic()
        assert storage.pop_data(b"absent") is EmptyData
        assert time.monotonic() - began < storage.conn.busy_seconds / 2
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert bytes(storage.pop_data(b"flag")) == b"set"  # a flag that is there is still popped
    assert storage.pop_data(b"flag") is EmptyData


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json, sqlite3, sys, time
    import gevent
    from bread_sync.executors.huey import executor

    storage = executor(path=sys.argv[1]).huey.storage
    storage.enqueue(b"first")
    holder = sqlite3.connect(sys.argv[1], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    taker, enqueuer = gevent.spawn(storage.take, 1), gevent.spawn(storage.enqueue, b"second")
    ticks, began = 0, time.monotonic()
    while time.monotonic() - began < 0.5:  # the hub keeps turning while the take and enqueue wait
        gevent.sleep(0.01)
        ticks += 1
    waiting = not taker.ready() and not enqueuer.ready()
    holder.execute("COMMIT")  # the holder's greenlet can run at all: nothing blocks the hub
    taken = [bytes(task).decode() for task in taker.get(timeout=5)]
    enqueuer.get(timeout=5)
    print(json.dumps({"ticks": ticks, "waiting": waiting, "taken": taken, "left": len(storage.take(5))}))
    """
)


def test_under_gevent_a_take_or_enqueue_waiting_for_the_lock_stalls_no_other_greenlet(tmp_path):
    # SQLite's own busy handler waits in C: the whole worker stood still while another process
    # held the queue file's lock, and the lock's holder in this process never got to release it.
    out = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, str(tmp_path / "queue.db")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["waiting"] and report["taken"] == ["first"] and report["left"] == 1
    assert report["ticks"] >= 20, report


def test_hueys_timeout_is_how_long_a_statement_waits_for_a_locked_file(tmp_path):
    storage = HandoutSqliteStorage("t", filename=str(tmp_path / "q.db"), timeout=0.2)
    holder = sqlite3.connect(storage.filename, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        began = time.monotonic()
        with pytest.raises(BreadError) as busy:
            storage.enqueue(b"task")
        assert busy.value.code == STORE_BUSY and time.monotonic() - began < 4  # not the default 5 s
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert storage.conn.busy_seconds == 0.2
