"""``BREAD_DB`` picks the store by its scheme, for the server and the CLI alike: a
``postgresql://`` or ``postgres://`` URL is the Postgres store, anything else a SQLite file; a
Postgres URL without the extra says which ``pip install`` fixes it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bread_sync import create_bread
from bread_sync.config import load_config

pytest.importorskip("psycopg", reason='the Postgres tests need psycopg: pip install "bread-sync[test]"')

from bread_sync.stores.postgres import PostgresStore  # noqa: E402 - after the skip
from bread_sync.stores.sqlite import SQLiteStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BREAD_SYNC = str(Path(sys.executable).parent / "bread-sync")
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
DEADLINE = 30.0
FIX = 'pip install "bread-sync[postgres]" (in a clone: pip install -e ".[postgres]")'


@pytest.fixture
def bread_of(monkeypatch):
    made = []

    def make(db):
        monkeypatch.setenv("BREAD_DB", db)
        made.append(create_bread(load_config()))
        return made[-1]

    yield make
    for bread in made:
        bread.close()


@pytest.mark.parametrize("scheme", ["postgresql://", "postgres://"])
def test_a_postgres_url_is_the_postgres_store(bread_of, postgres_url, scheme):
    bread = bread_of(scheme + postgres_url.split("://", 1)[1])
    assert isinstance(bread.store, PostgresStore)
    assert bread.run("echo", "hi").result().status == "completed"
    assert [run["status"] for run in bread.store.list_runs()] == ["completed"]


def test_anything_else_is_a_sqlite_file(bread_of, tmp_path):
    bread = bread_of(str(tmp_path / "postgres.db"))
    assert isinstance(bread.store, SQLiteStore)
    assert bread.store.path == tmp_path / "postgres.db"


def test_the_postgres_store_by_name_needs_a_postgres_url(tmp_path, make_bread):
    with pytest.raises(ValueError, match="BREAD_DB=postgresql://"):
        make_bread(store="postgres")


def child_env(**settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_")}
    return {**env, "PYTHONUNBUFFERED": "1", **settings}


def test_the_cli_runs_and_resumes_on_postgres_across_processes(postgres_url, tmp_path):
    env = child_env(BREAD_DB=postgres_url, BREAD_INSTANCE=str(tmp_path))

    def cli(*args):
        return subprocess.run([BREAD_SYNC, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=DEADLINE)  # fmt: skip

    paused = cli("invoke", "writer", '{"topic": "bread"}')
    assert paused.returncode == 3, paused.stderr
    checkpoint_id = json.loads(paused.stdout.splitlines()[-1])["checkpointId"]
    resumed = cli("resume", checkpoint_id, '{"approved": true}')
    assert resumed.returncode == 0, resumed.stderr
    assert "Published." in resumed.stdout
    again = cli("resume", checkpoint_id, '{"approved": true}')
    assert again.returncode == 1 and "CHECKPOINT_ALREADY_RESUMED" in again.stderr
    gc = cli("gc", "--older-than", "0")
    assert gc.returncode == 0, gc.stderr
    deleted = json.loads(gc.stdout.splitlines()[-1])["deleted"]
    # its pause's checkpoint and its progress (what it would have gone on from after a crash)
    assert deleted["runs"] == 1 and deleted["crumbs"] > 0 and deleted["checkpoints"] == 2
    assert json.loads(cli("gc", "--older-than", "0").stdout.splitlines()[-1])["deleted"]["runs"] == 0


@pytest.fixture
def without_psycopg(tmp_path):
    """A child's PYTHONPATH on which psycopg cannot be imported, as if the extra were missing."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None\n")
    return str(hide)


@pytest.mark.parametrize("command", [["invoke", "echo", "hi"], ["gc", "--older-than", "1"], ["start", "--port", "0"]])
def test_a_postgres_url_without_the_extra_says_what_to_install(without_psycopg, tmp_path, command):
    env = child_env(BREAD_DB="postgresql://bread@db.internal/bread", BREAD_INSTANCE=str(tmp_path),
                    PYTHONPATH=without_psycopg)  # fmt: skip
    result = subprocess.run([BREAD_SYNC, *command], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=DEADLINE)  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: cannot load the config: ") and FIX in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_gunicorn_with_a_postgres_url_without_the_extra_says_what_to_install(without_psycopg, tmp_path):
    from tests.integration.servers import free_port

    env = child_env(BREAD_DB="postgres://bread@db.internal/bread", BREAD_INSTANCE=str(tmp_path),
                    PYTHONPATH=without_psycopg, BREAD_BIND=f"127.0.0.1:{free_port()}")  # fmt: skip
    result = subprocess.run([GUNICORN, "-c", "gunicorn.conf.py", "wsgi:app"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DEADLINE)  # fmt: skip
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and FIX in errors[0]
    assert "Traceback" not in result.stderr


def test_the_store_alias_without_the_extra_says_what_to_install(without_psycopg):
    code = (
        "from bread_sync.loading import resolve\nfrom bread_sync.stores import STORES\n"
        "try:\n    resolve('postgres', STORES, 'store', url='postgresql://x/y')\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=child_env(PYTHONPATH=without_psycopg), cwd=ROOT,
                          capture_output=True, text=True, timeout=DEADLINE)  # fmt: skip
    assert done.stdout.strip() == f"bread_sync.stores.postgres needs the 'postgres' extra: {FIX}", done.stderr
