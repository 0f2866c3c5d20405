"""A run's end is written off the event loop's thread under gevent (``SQLiteStore.write_batch``),
and is committed before anyone sees its crumb. Under gevent in a subprocess, as a worker has it."""

import json
import subprocess
import sys
import textwrap

import pytest

from bread_sync import greenlets
from bread_sync.crumbs import Frame
from bread_sync.stores import sqlite

PRELUDE = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json, sys, sqlite3, time
    import gevent
    from bread_sync.crumbs import Frame
    from bread_sync.stores import sqlite

    get_ident = monkey.get_original("_thread", "get_ident")
    LOOP = get_ident()
    #: A statement that keeps SQLite busy for a few tenths of a second, as a big commit may.
    SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 3000000) SELECT count(*) FROM c"
    store = sqlite.store(sys.argv[1], pool_size=4, checkpoint_seconds=None)

    def crumb(seq):
        return Frame("r1", seq, {"type": "tool:call", "runId": "r1"})

    def slow_write(seen):
        def write():
            seen.append(get_ident())
            with store.connection() as db:  # the batch's connection, in the writer's thread
                db.execute(SLOW).fetchone()
        return write

    def ticking():
        ticks = []
        return ticks, gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(1000)])
    """
)

SCENARIOS = {
    "loop_turns": """
        ticks, ticker = ticking()
        gevent.sleep(0)
        seen = []
        store.write_batch([lambda: store.append_crumbs("r1", [crumb(1)]), slow_write(seen)])
        ticker.kill()
        report = {"ticks": len(ticks), "off_loop": seen[0] != LOOP, "log": len(store.get_crumbs("r1"))}
    """,
    "in_the_loop": """
        store.close()
        store = sqlite.store(sys.argv[1], pool_size=4, checkpoint_seconds=None, writes_in_thread=False)  # a worker's
        seen = []
        store.write_batch([lambda: store.append_crumbs("r1", [crumb(1)]), slow_write(seen)])
        report = {"in_loop": seen[0] == LOOP, "log": len(store.get_crumbs("r1"))}
    """,
    "rolled_back": """
        from bread_sync.errors import BreadError
        def refuse():
            raise BreadError("SEQ_CONFLICT", "not this process's")
        try:
            store.write_batch([lambda: store.append_crumbs("r1", [crumb(1)]), refuse])
            raised = None
        except BreadError as exc:
            raised = exc.code
        with gevent.Timeout(2):  # every pooled connection is back: four at once, none waits
            held = [store.connection() for _ in range(4)]
            for each in held:
                each.__enter__()
            for each in held:
                each.__exit__(None, None, None)
        report = {"raised": raised, "log": len(store.get_crumbs("r1"))}
    """,
    "killed": """
        seen = []
        writer = gevent.spawn(store.write_batch, [lambda: store.append_crumbs("r1", [crumb(1)]), slow_write(seen)])
        gevent.sleep(0.05)
        writer.kill()  # while its transaction goes on in the thread
        with gevent.Timeout(5):
            store.write_batch([lambda: store.append_crumbs("r1", [crumb(2)])])
            held = [store.connection() for _ in range(4)]
            for each in held:
                each.__enter__()
            for each in held:
                each.__exit__(None, None, None)
        report = {"log": [f.seq for f in store.get_crumbs("r1")]}
    """,
    "locked_file": """
        from bread_sync.stores.sqlite import busy
        gevent_sleeps = []
        patched_sleep = busy.time.sleep
        busy.time.sleep = lambda s: gevent_sleeps.append(get_ident()) or patched_sleep(s)
        holder = sqlite3.connect(sys.argv[1], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's write, say
        gevent.spawn_later(0.1, holder.execute, "ROLLBACK")  # the loop is free to run it meanwhile
        began = time.monotonic()
        store.write_batch([lambda: store.append_crumbs("r1", [crumb(1)])])
        report = {"waited": time.monotonic() - began, "log": len(store.get_crumbs("r1")),
                  "gevent_sleep_off_loop": any(ident != LOOP for ident in gevent_sleeps)}
    """,
    "answers_paced": """
        from bread_sync import greenlets
        from gevent import get_hub
        os_lock = monkey.get_original("threading", "Lock")
        os_sleep = monkey.get_original("time", "sleep")
        thread, gate, finished, turns = greenlets.OSThread(), os_lock(), [], []
        gate.acquire()

        def caller(fn):
            thread.call(fn)
            turns.append(get_hub().loop.now())  # the loop's clock moves only when the loop turns

        callers = [gevent.spawn(caller, lambda: gate.acquire())]
        callers += [gevent.spawn(caller, lambda: finished.append(1)) for _ in range(3)]
        gevent.sleep(0.05)  # all four queued, the first one holding the thread
        gate.release()
        while len(finished) < 3:  # the loop's thread waits, without the loop, until all are done
            os_sleep(0.001)
        gevent.joinall(callers)
        report = {"turns": len(set(turns)), "answers": len(turns)}
    """,
    "run_end": """
        from bread_sync import Agent, create_bread
        from bread_sync.config import Config

        bread = create_bread(Config(agents=[Agent(id="a", model="echo")],
                                    store=store, instance_path=sys.argv[2], blob_store=None))
        ends, threads = [], []
        real = store.update_run
        store.update_run = lambda *a, **k: threads.append(get_ident()) or real(*a, **k)

        def at_publish(frame):  # what a client could read once it holds the end crumb
            if frame.type == "agent:run:end":
                reader = sqlite3.connect(sys.argv[1])
                ends.append({
                    "in_log": reader.execute("SELECT count(*) FROM crumbs WHERE run_id = ? AND seq = ?",
                                             (frame.run_id, frame.seq)).fetchone()[0],
                    "status": reader.execute("SELECT status FROM runs WHERE id = ?", (frame.run_id,)).fetchone()[0],
                    "claims": reader.execute("SELECT count(*) FROM session_claims").fetchone()[0],
                })
                reader.close()

        bread.on("crumb", at_publish)
        result = bread.run("a", "hello", session="s1", mode="sync")
        report = {"ends": ends, "end_off_loop": bool(threads) and threads[-1] != LOOP,
                  "messages": len(store.get_session("s1")["messages"])}
    """,
}


def run_scenario(name, tmp_path):
    script = PRELUDE + textwrap.dedent(SCENARIOS[name]) + "\nstore.close()\nprint(json.dumps(report))\n"
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "bread.db"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_under_gevent_the_batch_commits_in_a_thread_of_the_os_while_the_loop_turns(tmp_path):
    report = run_scenario("loop_turns", tmp_path)
    assert report["off_loop"] and report["log"] == 1
    assert report["ticks"] >= 10  # 0.01 s ticks went on while SQLite worked


def test_under_gevent_a_store_told_so_commits_the_batch_in_the_callers_greenlet(tmp_path):
    assert run_scenario("in_the_loop", tmp_path) == {"in_loop": True, "log": 1}


def test_a_worker_has_its_sqlite_store_commit_in_the_loop(tmp_path):
    from bread_sync.config import Config
    from bread_sync.server.worker import _with_store_committing_in_the_loop
    from bread_sync.stores.memory import MemoryStore

    config = _with_store_committing_in_the_loop(Config(instance_path=tmp_path))
    try:
        assert isinstance(config.store, sqlite.SQLiteStore) and config.store.writes_in_thread is False
        assert config.store.path.parent == tmp_path
    finally:
        config.store.close()
    memory = _with_store_committing_in_the_loop(Config(instance_path=tmp_path, store="memory"))
    assert isinstance(memory.store, MemoryStore)  # any other store is opened as it is
    web = sqlite.store(tmp_path / "web.db", checkpoint_seconds=None)
    assert web.writes_in_thread is True  # a web server's
    web.close()


def test_under_gevent_a_failed_batch_is_rolled_back_raises_in_its_greenlet_and_returns_its_connection(tmp_path):
    assert run_scenario("rolled_back", tmp_path) == {"raised": "SEQ_CONFLICT", "log": 0}


def test_under_gevent_a_batch_whose_greenlet_was_killed_still_commits_and_gives_its_connection_back(tmp_path):
    assert run_scenario("killed", tmp_path) == {"log": [1, 2]}


def test_under_gevent_the_batch_waits_for_a_locked_file_with_the_os_sleep(tmp_path):
    report = run_scenario("locked_file", tmp_path)
    assert report["log"] == 1 and report["waited"] >= 0.09
    assert not report["gevent_sleep_off_loop"]


def test_under_gevent_calls_that_finish_together_resume_their_callers_one_per_turn_of_the_loop(tmp_path):
    assert run_scenario("answers_paced", tmp_path) == {"turns": 4, "answers": 4}


def test_under_gevent_a_run_end_is_committed_off_the_loop_before_its_crumb_is_published(tmp_path):
    report = run_scenario("run_end", tmp_path)
    assert report["end_off_loop"]
    assert report["ends"] == [{"in_log": 1, "status": "completed", "claims": 0}]
    assert report["messages"] == 2


def test_without_gevent_the_batch_is_written_in_the_callers_thread(tmp_path):
    store = sqlite.store(tmp_path / "bread.db", checkpoint_seconds=None)
    try:
        store.write_batch([lambda: store.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1"})])])
        assert [f.seq for f in store.get_crumbs("r1")] == [1]
    finally:
        store.close()


@pytest.mark.parametrize("fails", [False, True])
def test_an_os_thread_call_outside_gevent_runs_here_and_then_runs_after_it(fails):
    done = []

    def call():
        if fails:
            raise ValueError("no")
        return 7

    if fails:
        with pytest.raises(ValueError):
            greenlets.OSThread().call(call, then=lambda: done.append(1))
    else:
        assert greenlets.OSThread().call(call, then=lambda: done.append(1)) == 7
    assert done == [1]
