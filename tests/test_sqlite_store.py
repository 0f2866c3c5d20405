"""What only the SQLite store promises: its schema, migrations, many threads and processes."""

import gc
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing

import pytest
from sqlite_utils import Database

from bread_sync.crumbs import Frame
from bread_sync.errors import SEQ_CONFLICT, BreadError
from bread_sync.stores import sqlite
from bread_sync.stores.sqlite import migrations

#: Every migration the code ships, in order.
SHIPPED = [fn.__name__ for fn in migrations.MIGRATIONS]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "bread.db"


@pytest.fixture
def open_store(path):
    made = []

    def open_(**opts):
        made.append(sqlite.store(path=path, **opts))
        return made[-1]

    yield open_
    for store in made:
        store.close()


def crumb(run_id, seq, **payload):
    return Frame(run_id, seq, {"type": "tool:call", "runId": run_id, **payload})


def append_next(store, run_id, **payload):
    """Claim the next seq of ``run_id`` as concurrent writers do: retry on SEQ_CONFLICT."""
    while True:
        seq = store.last_seq(run_id) + 1
        try:
            store.append_crumbs(run_id, [crumb(run_id, seq, **payload)])
            return
        except BreadError as exc:
            if exc.code != SEQ_CONFLICT:
                raise


def read(path, sql, params=()):
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, params).fetchall()


def connect(path):
    return Database(sqlite3.connect(path, isolation_level=None))


def schema(path):
    tables = [name for (name,) in read(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    columns = {
        table: [
            (name, type_, notnull, pk) for _, name, type_, notnull, _, pk in read(path, f"PRAGMA table_info({table})")
        ]
        for table in tables
    }
    indexes = {
        name: (table, unique, [column for _, _, column in read(path, f"PRAGMA index_info({name})")])
        for table in tables
        for _, name, unique, origin, _ in read(path, f"PRAGMA index_list({table})")
        if origin == "c"
    }
    triggers = read(path, "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
    return tables, columns, indexes, triggers


# schema and migrations


def test_migrating_a_blank_database_pins_the_schema(open_store, path):
    open_store()

    tables, columns, indexes, triggers = schema(path)

    assert tables == [
        "_bread_migrations", "checkpoints", "crumbs", "loop_iterations", "loops", "mcp_sessions", "push_configs",
        "runs", "session_claims", "session_messages", "sessions", "task_runs",
    ]  # fmt: skip
    assert columns == {
        "_bread_migrations": [("name", "TEXT", 0, 1), ("applied_at", "TEXT", 0, 0)],
        "checkpoints": [
            ("id", "TEXT", 0, 1), ("run_id", "TEXT", 0, 0), ("status", "TEXT", 0, 0), ("data", "TEXT", 0, 0),
        ],
        "crumbs": [("run_id", "TEXT", 1, 0), ("seq", "INTEGER", 1, 0), ("type", "TEXT", 1, 0), ("crumb", "TEXT", 1, 0)],
        "runs": [
            ("id", "TEXT", 0, 1), ("agent_id", "TEXT", 0, 0), ("session_id", "TEXT", 0, 0), ("status", "TEXT", 1, 0),
            ("checkpoint_id", "TEXT", 0, 0), ("owner", "TEXT", 0, 0), ("lease_until", "REAL", 0, 0),
            ("cancel_requested", "INTEGER", 0, 0), ("created_at", "TEXT", 0, 0), ("updated_at", "TEXT", 0, 0),
            ("remote_run_id", "TEXT", 0, 0), ("remote_seq", "INTEGER", 0, 0), ("usage", "TEXT", 0, 0),
            ("not_before", "REAL", 0, 0), ("trace", "TEXT", 0, 0),
        ],
        "session_messages": [("position", "INTEGER", 0, 1), ("session_id", "TEXT", 1, 0), ("message", "TEXT", 0, 0)],
        "sessions": [
            ("id", "TEXT", 0, 1), ("tags", "TEXT", 0, 0), ("created_at", "TEXT", 0, 0), ("updated_at", "TEXT", 0, 0),
            ("state", "TEXT", 1, 0),
        ],
        "session_claims": [("session_id", "TEXT", 1, 1), ("run_id", "TEXT", 1, 0)],
        "loops": [
            ("id", "TEXT", 0, 1), ("agent_id", "TEXT", 0, 0), ("session_id", "TEXT", 0, 0), ("status", "TEXT", 0, 0),
            ("data", "TEXT", 1, 0),
        ],
        "loop_iterations": [("loop_id", "TEXT", 0, 1), ("idx", "INTEGER", 0, 2), ("data", "TEXT", 0, 0)],
        "task_runs": [
            ("id", "TEXT", 0, 1), ("task_id", "TEXT", 0, 0), ("session_id", "TEXT", 0, 0), ("agent_id", "TEXT", 0, 0),
            ("status", "TEXT", 0, 0), ("created_at", "TEXT", 0, 0), ("data", "TEXT", 1, 0),
        ],
        "mcp_sessions": [
            ("id", "TEXT", 0, 1), ("created_at", "TEXT", 1, 0), ("data", "TEXT", 1, 0), ("owner", "TEXT", 0, 0),
            ("used_at", "TEXT", 0, 0),
        ],
        "push_configs": [
            ("task_id", "TEXT", 0, 1), ("id", "TEXT", 0, 2), ("mount", "TEXT", 0, 0), ("url", "TEXT", 1, 0),
            ("token", "TEXT", 0, 0),
            ("authentication", "TEXT", 0, 0), ("delivered", "INTEGER", 1, 0), ("attempts", "INTEGER", 1, 0),
            ("next_attempt_at", "REAL", 1, 0), ("last_error", "TEXT", 0, 0), ("done", "INTEGER", 1, 0),
            ("claimed_by", "TEXT", 0, 0), ("claimed_until", "REAL", 0, 0), ("created_at", "TEXT", 0, 0),
        ],
    }  # fmt: skip
    assert indexes == {
        "idx_crumbs_run_seq": ("crumbs", 1, ["run_id", "seq"]),
        "idx_session_messages_session": ("session_messages", 0, ["session_id", "position"]),
        "idx_runs_session": ("runs", 0, ["session_id"]),
        "idx_task_runs_created": ("task_runs", 0, ["created_at"]),
        "idx_runs_status_updated": ("runs", 0, ["status", "updated_at"]),
        "idx_checkpoints_run": ("checkpoints", 0, ["run_id"]),
        "idx_loops_run": ("loops", 0, [None]),  # an expression: json_extract(data, '$.runId')
        "idx_task_runs_run": ("task_runs", 0, [None]),
        "idx_push_configs_due": ("push_configs", 0, ["done", "next_attempt_at"]),
        "idx_mcp_sessions_created": ("mcp_sessions", 0, ["created_at"]),
        "idx_mcp_sessions_owner": ("mcp_sessions", 0, ["owner"]),
        "idx_mcp_sessions_used": ("mcp_sessions", 0, ["used_at"]),
        "idx_runs_agent_updated": ("runs", 0, ["agent_id", "updated_at", "id"]),
    }
    assert triggers == [("crumbs_append_only", "crumbs")]
    migrations = [name for (name,) in read(path, "SELECT name FROM _bread_migrations")]
    assert migrations == [
        "m001_initial", "m002_claims_loops_task_runs", "m003_retention_indexes", "m004_session_state",
        "m005_mcp_sessions", "m006_push_configs", "m007_relay_position", "m008_mcp_sessions_created",
        "m009_mcp_session_owners", "m010_runs_by_agent_updated", "m011_run_usage",
        "m012_run_not_before", "m013_run_trace", "m014_fewer_pages_per_run",
    ]  # fmt: skip
    # A claim is one b-tree keyed by its session: no rowid table beside its key's index.
    assert read(path, "SELECT sql LIKE '%WITHOUT ROWID' FROM sqlite_master WHERE name = 'session_claims'") == [(1,)]


def test_the_file_is_in_wal_mode_and_waits_for_a_lock_in_python(open_store):
    store = open_store()
    with store.connection() as db:
        assert db.journal_mode == "wal"
        assert db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        # SQLite's busy handler would sleep in C, stalling a gevent worker: see stores/sqlite/busy.py.
        assert db.execute("PRAGMA busy_timeout").fetchone() == (0,)
        assert db.conn.busy_seconds == 5.0


def test_reopening_applies_nothing_twice_and_keeps_the_data(open_store, path):
    first = open_store()
    first.append_crumbs("r1", [crumb("r1", 1)])
    first.close()

    second = open_store()

    assert second.get_crumbs("r1") == [crumb("r1", 1)]
    with second.connection() as db:
        assert migrations.migrate(db) == []
        assert migrations.applied(db) == SHIPPED


def test_reopening_applies_only_a_new_migration(open_store, monkeypatch):
    open_store()
    calls = []

    def m999_add_note(db):
        calls.append(1)
        db["runs"].add_column("note", str)

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_add_note])
    store = open_store()
    open_store()

    assert calls == [1]
    with store.connection() as db:
        assert migrations.applied(db) == [*SHIPPED, "m999_add_note"]
        assert "note" in db["runs"].columns_dict


def test_a_claim_held_before_the_claims_were_keyed_by_session_is_still_held(open_store, monkeypatch):
    with monkeypatch.context() as older:  # a database of the release before m014
        older.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[: SHIPPED.index("m014_fewer_pages_per_run")])
        old = open_store()
        assert old.claim_session("s1", "run-a") is None
        old.close()

    store = open_store()

    assert store.claim_session("s1", "run-b") == "run-a"
    store.release_session("s1", "run-a")
    assert store.claim_session("s1", "run-b") is None


def test_a_session_kept_before_the_state_column_has_an_empty_state(open_store, monkeypatch):
    with monkeypatch.context() as older:  # a database of the release before m004
        older.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[: SHIPPED.index("m004_session_state")])
        old = open_store()
        with old.connection() as db:
            db.execute("INSERT INTO sessions (id, tags, created_at, updated_at) VALUES ('s1', '{}', 'then', 'then')")
        old.close()

    store = open_store()

    assert store.get_session("s1")["state"] == {}
    store.touch_session("s1", state={"plan": "rye"})
    assert store.get_session("s1")["state"] == {"plan": "rye"}


def test_a_migration_another_process_applied_meanwhile_is_not_applied_again(path, monkeypatch):
    """The pending set is read again inside the write transaction, after waiting for the lock."""
    real_immediate = migrations.immediate

    def other_process_wins_the_race(db):
        monkeypatch.setattr(migrations, "immediate", real_immediate)
        with connect(path) as other:
            assert migrations.migrate(other) == SHIPPED
        return real_immediate(db)

    with connect(path) as db:
        monkeypatch.setattr(migrations, "immediate", other_process_wins_the_race)
        assert migrations.migrate(db) == []
        assert migrations.applied(db) == SHIPPED


def test_a_failing_migration_leaves_nothing_half_done(path, monkeypatch):
    def m999_broken(db):
        db["runs"].add_column("note", str)
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_broken])
    with pytest.raises(RuntimeError, match="boom"):
        sqlite.store(path=path)

    assert read(path, "SELECT name FROM sqlite_master WHERE type = 'table'") == []


# the store as a file


def test_the_folder_of_the_file_is_created(tmp_path):
    store = sqlite.store(path=tmp_path / "instance" / "deep" / "bread.db")
    store.close()
    assert (tmp_path / "instance" / "deep" / "bread.db").is_file()


def test_an_in_memory_database_is_refused():
    with pytest.raises(ValueError, match="memory store"):
        sqlite.store(path=":memory:")


def test_the_frame_wire_text_is_stored_as_is(open_store):
    store = open_store()
    wire = '{"type": "tool:call", "runId": "r1", "n": 1}'
    store.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1", "n": 1}, wire=wire)])

    (frame,) = store.get_crumbs("r1")
    assert frame.wire == wire
    assert frame.crumb == {"type": "tool:call", "runId": "r1", "n": 1}


def test_a_batch_is_one_transaction_other_connections_see_whole_or_not_at_all(open_store, path):
    store = open_store()
    store.append_crumbs("r1", [Frame("r1", 1, {"type": "tool:call", "runId": "r1"})])
    seen_inside = None
    with pytest.raises(BreadError) as caught, store.batch():
        store.touch_session("s1")
        store.append_crumbs("r1", [Frame("r1", 2, {"type": "tool:call", "runId": "r1"})])
        seen_inside = read(path, "SELECT count(*) FROM crumbs"), read(path, "SELECT count(*) FROM sessions")
        store.append_crumbs("r1", [Frame("r1", 2, {"type": "tool:call", "runId": "r1"})])  # conflicts
    assert caught.value.code == SEQ_CONFLICT
    assert seen_inside == ([(1,)], [(0,)])  # nothing of the batch was visible before it ended
    # and its earlier writes were undone with it
    assert read(path, "SELECT count(*) FROM crumbs") == [(1,)] and store.get_session("s1") is None


def test_a_closed_store_refuses_work(open_store):
    store = open_store()
    store.last_seq("r1")
    store.close()
    with pytest.raises((RuntimeError, sqlite3.ProgrammingError)):
        store.last_seq("r1")


def test_a_dropped_store_closes_its_connections(path):
    store = sqlite.store(path=path, pool_size=1)
    with store.connection() as db:
        pass
    del store
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")


def test_reading_after_a_seq_searches_the_index(open_store):
    store = open_store(pool_size=1)
    for start in range(0, 3000, 500):
        store.append_crumbs("big", [crumb("big", seq) for seq in range(start + 1, start + 501)])
        store.append_crumbs(f"other{start}", [crumb(f"other{start}", 1)])
    statements = []
    with store.connection() as db:
        db.conn.set_trace_callback(statements.append)

    assert [f.seq for f in store.get_crumbs("big", after=2990, limit=5)] == [2991, 2992, 2993, 2994, 2995]
    assert store.last_seq("big") == 3000
    assert store.last_seqs(["big", "other0"]) == {"big": 3000, "other0": 1}

    with store.connection() as db:
        db.conn.set_trace_callback(None)
        plans = [[row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}")] for sql in statements]
    get_plan, last_plan, many_plan = plans
    assert get_plan == ["SEARCH crumbs USING INDEX idx_crumbs_run_seq (run_id=? AND seq>?)"]
    assert last_plan == ["SEARCH crumbs USING COVERING INDEX idx_crumbs_run_seq (run_id=?)"]
    # each run's last seq is one seek in the index, not a read of its rows
    assert "SEARCH crumbs USING COVERING INDEX idx_crumbs_run_seq (run_id=?)" in " ".join(many_plan)
    assert not any(step.startswith("SCAN crumbs") for step in many_plan)


# concurrency


def test_many_threads_share_one_store(open_store):
    store = open_store(pool_size=3)
    threads, per_thread = 12, 20
    start = threading.Barrier(threads)
    errors = []

    def work(n):
        try:
            start.wait()
            run_id, session_id = f"own{n}", f"s{n}"
            store.touch_session(session_id, {"thread": str(n)})
            for seq in range(1, per_thread + 1):
                store.append_crumbs(run_id, [crumb(run_id, seq)])
                append_next(store, "shared", thread=n, n=seq)
                store.append_messages(session_id, [{"role": "user", "content": str(seq)}])
                store.get_crumbs("shared", after=seq)
        except Exception as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    shared = store.get_crumbs("shared")
    assert [f.seq for f in shared] == list(range(1, threads * per_thread + 1))
    assert sorted((f.crumb["thread"], f.crumb["n"]) for f in shared) == [
        (t, n) for t in range(threads) for n in range(1, per_thread + 1)
    ]
    for n in range(threads):
        assert [f.seq for f in store.get_crumbs(f"own{n}")] == list(range(1, per_thread + 1))
        assert len(store.get_session(f"s{n}")["messages"]) == per_thread


WRITER = """
import sys
from bread_sync.stores import sqlite
from tests.test_sqlite_store import append_next

path, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
store = sqlite.store(path=path)
for n in range(count):
    append_next(store, "shared", writer=writer, n=n)
store.close()
"""


def test_processes_appending_to_one_run_leave_a_gap_free_log(path, request):
    """Both processes also open the fresh file at once, so they race to migrate it."""
    writers, count = ("a", "b", "c"), 150
    root = str(request.config.rootpath)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), writer, str(count)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=root,
            text=True,
        )  # fmt: skip
        for writer in writers
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=120) for proc in procs]

    assert [(proc.returncode, err) for proc, (_, err) in zip(procs, results, strict=True)] == [(0, "")] * len(procs)
    store = sqlite.store(path=path)
    try:
        log = store.get_crumbs("shared")
        with store.connection() as db:
            assert migrations.applied(db) == SHIPPED
    finally:
        store.close()
    assert [f.seq for f in log] == list(range(1, len(writers) * count + 1))
    for writer in writers:
        assert [f.crumb["n"] for f in log if f.crumb["writer"] == writer] == list(range(count))
