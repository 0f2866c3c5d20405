"""What only the Postgres store promises: its schema and migrations, processes on one database,
greenlets that a slow query does not stall, and the test server itself."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from bread_sync.crumbs import Frame
from bread_sync.errors import SEQ_CONFLICT, STORE_UNAVAILABLE, BreadError

from . import postgres_server

psycopg = pytest.importorskip("psycopg", reason='the Postgres tests need psycopg: pip install "bread-sync[test]"')

from bread_sync.stores import postgres  # noqa: E402 - after the skip: it imports psycopg
from bread_sync.stores.postgres import migrations  # noqa: E402

SHIPPED = [fn.__name__ for fn in migrations.MIGRATIONS]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def open_store(postgres_url):
    made = []

    def open_(**opts):
        made.append(postgres.store(url=postgres_url, **opts))
        return made[-1]

    yield open_
    for store in made:
        store.close()


def crumb(run_id, seq, **payload):
    return Frame(run_id, seq, {"type": "text:delta", "runId": run_id, "delta": "x", **payload})


def read(url, sql, params=()):
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def test_migrating_a_blank_database_pins_the_schema(open_store, postgres_url):
    open_store()

    columns = read(
        postgres_url,
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    tables = {}
    for table, column, kind, nullable in columns:
        tables.setdefault(table, []).append((column, kind, nullable == "YES"))
    assert tables == {
        "bread_migrations": [("position", "integer", False), ("name", "text", False), ("applied_at", "text", False)],
        "checkpoints": [("id", "text", False), ("run_id", "text", True), ("status", "text", False),
                        ("created_at", "text", True), ("data", "text", False)],
        "crumbs": [("run_id", "text", False), ("seq", "bigint", False), ("type", "text", False),
                   ("crumb", "text", False)],
        "loop_iterations": [("loop_id", "text", False), ("idx", "integer", False), ("data", "text", False)],
        "loops": [("position", "bigint", False), ("id", "text", False), ("agent_id", "text", True),
                  ("session_id", "text", True), ("status", "text", True), ("run_id", "text", True),
                  ("data", "text", False)],
        "runs": [("position", "bigint", False), ("id", "text", False), ("agent_id", "text", True),
                 ("session_id", "text", True), ("status", "text", False), ("checkpoint_id", "text", True),
                 ("owner", "text", True), ("lease_until", "double precision", True),
                 ("cancel_requested", "boolean", False), ("created_at", "text", True), ("updated_at", "text", True),
                 ("remote_run_id", "text", True), ("remote_seq", "bigint", True), ("usage", "text", True),
                 ("not_before", "double precision", True), ("trace", "text", True)],
        "session_claims": [("session_id", "text", False), ("run_id", "text", False)],
        "session_messages": [("position", "bigint", False), ("session_id", "text", False),
                             ("message", "text", False)],
        "sessions": [("position", "bigint", False), ("id", "text", False), ("tags", "jsonb", False),
                     ("created_at", "text", False), ("updated_at", "text", False), ("state", "text", False)],
        "mcp_sessions": [("id", "text", False), ("created_at", "text", False), ("data", "text", False),
                         ("position", "bigint", False), ("owner", "text", True), ("used_at", "text", True)],
        "push_configs": [("position", "bigint", False), ("task_id", "text", False), ("id", "text", False),
                         ("mount", "text", True), ("url", "text", False), ("token", "text", True),
                         ("authentication", "text", True), ("delivered", "integer", False),
                         ("attempts", "integer", False), ("next_attempt_at", "double precision", False),
                         ("last_error", "text", True), ("done", "boolean", False), ("claimed_by", "text", True),
                         ("claimed_until", "double precision", True), ("created_at", "text", True)],
        "task_runs": [("position", "bigint", False), ("id", "text", False), ("task_id", "text", True),
                      ("session_id", "text", True), ("agent_id", "text", True), ("status", "text", True),
                      ("run_id", "text", True), ("created_at", "text", True), ("data", "text", False)],
    }  # fmt: skip
    indexes = dict(read(postgres_url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"))
    assert {name: d.split(" USING ", 1)[1] for name, d in indexes.items() if not name.endswith("_pkey")} == {
        "idx_runs_status_updated": "btree (status, updated_at)",
        "idx_runs_session": "btree (session_id)",
        "idx_runs_owner": "btree (owner) WHERE cancel_requested",
        "idx_checkpoints_run": "btree (run_id)",
        "idx_session_messages_session": 'btree (session_id, "position")',
        "idx_loops_run": "btree (run_id)",
        "idx_task_runs_created": "btree (created_at)",
        "idx_task_runs_run": "btree (run_id)",
        "idx_push_configs_due": "btree (next_attempt_at) WHERE (NOT done)",
        "idx_mcp_sessions_created": "btree (created_at)",
        "idx_mcp_sessions_owner": 'btree (owner, "position")',
        "idx_mcp_sessions_used": "btree (used_at)",
        "idx_runs_agent_updated": "btree (agent_id, updated_at, id)",
    }
    assert indexes["crumbs_pkey"].endswith("btree (run_id, seq)")
    assert read(postgres_url, "SELECT name FROM bread_migrations ORDER BY position") == [(n,) for n in SHIPPED]
    assert SHIPPED == [
        "m001_initial", "m002_session_state", "m003_mcp_sessions", "m004_push_configs", "m005_relay_position",
        "m006_append_one_crumb", "m007_mcp_sessions_created", "m008_mcp_session_owners",
        "m009_runs_by_agent_updated",
        "m010_run_usage",
        "m011_run_not_before",
        "m012_run_trace",
    ]  # fmt: skip


def test_reopening_applies_nothing_twice_and_keeps_the_data(open_store, postgres_url):
    open_store().append_crumbs("r1", [crumb("r1", 1)])
    again = open_store()
    assert [f.seq for f in again.get_crumbs("r1")] == [1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrations.migrate(conn) == []


def test_a_new_migration_is_applied_once_on_top_of_the_shipped_ones(open_store, postgres_url, monkeypatch):
    open_store()

    def m999_extra(conn):
        conn.execute("CREATE TABLE extra (id text)")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_extra])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrations.migrate(conn) == ["m999_extra"]
        assert migrations.migrate(conn) == []
        assert migrations.applied(conn) == [*SHIPPED, "m999_extra"]


def test_a_failing_migration_leaves_nothing_half_done(postgres_url, monkeypatch):
    def m999_broken(conn):
        conn.execute("CREATE TABLE half (id text)")
        conn.execute("SELECT no_such_function()")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_broken])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedFunction):
            migrations.migrate(conn)
        assert migrations.applied(conn) == []
        assert conn.execute("SELECT to_regclass('crumbs'), to_regclass('half')").fetchone() == (None, None)


MIGRATOR = """
import sys, json, psycopg
from bread_sync.stores.postgres.migrations import migrate
sys.stdin.readline()  # start together
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    print(json.dumps(migrate(conn)))
"""


def test_processes_migrating_a_fresh_database_together_apply_each_migration_once(postgres_url):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATOR, postgres_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )  # fmt: skip
        for _ in range(4)
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=60) for proc in procs]

    assert [err for _, err in results] == [""] * 4
    assert sorted(json.loads(out) for out, _ in results) == [[], [], [], SHIPPED]


def next_seq_append(store, run_id, **payload):
    """Append after the run's last seq, as two writers of one run would, retrying a lost race."""
    for _ in range(200):
        seq = store.last_seq(run_id) + 1
        try:
            store.append_crumbs(run_id, [crumb(run_id, seq, **payload)])
            return
        except BreadError as exc:
            assert exc.code == SEQ_CONFLICT
    raise AssertionError("never won a seq")


WRITER = """
import sys
from bread_sync.stores import postgres
from tests.test_postgres_store import next_seq_append
url, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
store = postgres.store(url=url)
for n in range(count):
    next_seq_append(store, "shared", writer=writer, n=n)
store.close()
"""


def test_processes_appending_to_one_run_leave_a_gap_free_log(open_store, postgres_url):
    writers, count = ("a", "b", "c"), 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, postgres_url, writer, str(count)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )  # fmt: skip
        for writer in writers
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    errors = [proc.communicate(timeout=120)[1] for proc in procs]

    assert errors == [""] * len(writers)
    log = open_store().get_crumbs("shared")
    assert [f.seq for f in log] == list(range(1, len(writers) * count + 1))
    for writer in writers:
        assert [f.crumb["n"] for f in log if f.crumb["writer"] == writer] == list(range(count))


@pytest.mark.parametrize("late_seqs", [[2], [2, 3]], ids=["one crumb", "two crumbs"])
def test_a_late_batch_cannot_land_behind_one_that_committed_after_it_began(open_store, postgres_url, late_seqs):
    """Two appends to one run take turns: the second waits for the first's transaction, then
    sees its seqs, so a log never shows 1, 3 and later 2. One crumb and several go through
    different functions (bread_append_crumb, bread_append_crumbs) that take the same turn."""
    store = open_store()
    store.append_crumbs("r1", [crumb("r1", 1)])
    with psycopg.connect(postgres_url) as first:  # a transaction left open: its append holds the turn
        first.execute("SELECT bread_append_crumbs('r1', ARRAY[2]::bigint[], ARRAY['t'], ARRAY['{}'])")
        codes = []

        def late():
            try:
                store.append_crumbs("r1", [crumb("r1", seq) for seq in late_seqs])
            except BreadError as exc:
                codes.append(exc.code)

        blocked = threading.Thread(target=late)
        blocked.start()
        blocked.join(0.3)
        assert blocked.is_alive()  # waiting for the turn
        first.commit()
    blocked.join(10)
    assert not blocked.is_alive()
    assert codes == [SEQ_CONFLICT]
    assert [f.seq for f in store.get_crumbs("r1")] == [1, 2]


def test_a_frame_is_stored_in_its_wire_form_as_is(open_store, postgres_url):
    store = open_store()
    frames = [
        Frame("r1", 1, {"type": "text:delta", "runId": "r1", "delta": "ü \u2028"}),
        # What an array literal must escape or could misread: quotes, backslashes, braces, commas.
        Frame("r1", 2, {"type": "tool:result", "runId": "r1", "output": 'a "b" \\ {c}, NULL \\" \n'}),
    ]
    store.append_crumbs("r1", frames)
    assert read(postgres_url, "SELECT crumb, type FROM crumbs ORDER BY seq") == [(f.wire, f.type) for f in frames]
    assert [f.wire for f in store.get_crumbs("r1")] == [f.wire for f in frames]
    assert store.get_crumbs("r1")[1].crumb == frames[1].crumb


def test_an_unreachable_server_is_store_unavailable(postgres_url):
    with pytest.raises(BreadError) as info:
        postgres.store(url=postgres_server.database_url("postgresql://postgres@127.0.0.1:1", "x"), connect_seconds=1)
    assert info.value.code == STORE_UNAVAILABLE
    assert info.value.status == 503
    assert "127.0.0.1" not in info.value.message  # it reaches clients: no host named


def race(count, attempt):
    """``attempt(n)`` in ``count`` threads released together; their answers, by ``n``."""
    start, answers = threading.Barrier(count), {}

    def go(n):
        start.wait()
        answers[n] = attempt(n)

    threads = [threading.Thread(target=go, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return [answers[n] for n in range(count)]


def test_of_hosts_racing_for_a_session_a_checkpoint_or_a_push_one_wins(open_store):
    """Each racer has a store of its own (its own pool, as a replica on another host has)."""
    stores = [open_store(pool_size=1) for _ in range(6)]
    stores[0].save_checkpoint({"id": "cp1", "runId": "r1", "status": "pending"})

    claims = race(6, lambda n: stores[n].claim_session("s1", f"run{n}"))
    (winner,) = [f"run{n}" for n, holder in enumerate(claims) if holder is None]
    assert [holder for holder in claims if holder is not None] == [winner] * 5
    assert race(6, lambda n: stores[n].claim_checkpoint("cp1")).count(True) == 1
    stores[0].save_push_config({"taskId": "t1", "id": "c1", "url": "https://hook.example/a"})
    pushes = race(6, lambda n: stores[n].claim_push(f"sender{n}", now=time.time() + 1, until=time.time() + 60))
    assert [p["claimedBy"] for p in pushes if p is not None] == [stores[0].list_push_configs("t1")[0]["claimedBy"]]


def test_a_closed_store_refuses_work(open_store):
    store = open_store()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.last_seq("r1")


GREEN = """
from gevent import monkey; monkey.patch_all()
import json, sys, time
import gevent
from bread_sync.stores import postgres
store = postgres.store(url=sys.argv[1])
store.last_seq("warm")  # the pool is open and a connection made

def slow():
    with store.connection() as conn:
        conn.execute("SELECT pg_sleep(0.5)")

began = time.monotonic()
sleeper = gevent.spawn(slow)
ticks = 0
while not sleeper.dead:
    gevent.sleep(0.01)
    ticks += 1
sleeper.get()
print(json.dumps({"ticks": ticks, "seconds": time.monotonic() - began}))
store.close()
"""


def test_psycopg_imported_before_gevent_patched_is_said_at_the_first_query(postgres_url):
    code = (
        "import psycopg, sys\nfrom gevent import monkey; monkey.patch_all()\n"
        "from bread_sync.stores import postgres\nstore = postgres.store(url=sys.argv[1])\n"
        "store.last_seq('r1'); store.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code, postgres_url], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "psycopg was imported before gevent patched" in done.stderr
    patched_first = subprocess.run([sys.executable, "-c", GREEN, postgres_url], capture_output=True, text=True,
                                   cwd=ROOT, timeout=60)  # fmt: skip
    assert "imported before gevent" not in patched_first.stderr


def test_under_gevent_a_slow_query_stalls_no_other_greenlet(postgres_url):
    done = subprocess.run([sys.executable, "-c", GREEN, postgres_url], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seconds"] >= 0.5
    assert report["ticks"] >= 25, report  # 50 at most; a stalled hub would tick once or twice


WITHOUT_PATH = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.postgres_server import PostgresServer, postgres_bindir
bindir = postgres_bindir()
server = PostgresServer().start()
try:
    import psycopg
    with psycopg.connect(server.url()) as conn:
        print(bindir, conn.execute("SELECT 1").fetchone()[0])
finally:
    server.remove()
"""


def test_a_machine_without_postgres_on_path_runs_the_wheels_binaries(tmp_path):
    if postgres_server.postgres_bindir(path=str(tmp_path)) is None:
        pytest.skip('pgserver is not installed: pip install "bread-sync[test]"')
    bin_dir = tmp_path / "bin"  # PATH holds runuser alone (for root), no initdb or postgres
    bin_dir.mkdir()
    if shutil.which("runuser"):
        (bin_dir / "runuser").symlink_to(shutil.which("runuser"))
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run([sys.executable, "-c", WITHOUT_PATH, ROOT], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    bindir, answer = done.stdout.split()
    assert bindir.endswith("pgserver/pginstall/bin")
    assert answer == "1"
