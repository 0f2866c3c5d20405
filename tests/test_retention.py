"""Retention: ``collect_garbage`` over a real run store and blob store, and ``bread-sync gc``."""

from __future__ import annotations

import json
import os
import time

import pytest

from bread_sync import Config
from bread_sync.crumbs import Frame
from bread_sync.demo import config as demo_config
from bread_sync.errors import NOT_SUPPORTED, BreadError
from bread_sync.retention import collect_garbage
from bread_sync.stores.sqlite import store as sqlite_store

from .test_cli import cli, env  # noqa: F401 - the env fixture

OLD = "2020-01-01T00:00:00.000Z"
MONTH_AGO = time.time() - 31 * 86_400


def make(tmp_path, **updates):
    from bread_sync import create_bread

    return create_bread(demo_config().model_copy(update={"instance_path": tmp_path, "transport": "stream", **updates}))


@pytest.fixture
def bread(tmp_path):
    made = make(tmp_path, store="memory")
    yield made
    made.close()


def age(bread, url: str) -> None:
    """Make a stored file a month old."""
    key = url.rsplit("/", 1)[1]
    for path in bread.blob_store.root.glob(f"{key}*"):
        os.utime(path, (MONTH_AGO, MONTH_AGO))


def finish_old(bread, run_id: str) -> None:
    bread.store.update_run(run_id, status="completed")
    bread.store._runs[run_id]["updatedAt"] = OLD  # the memory store's record: aged by hand


def paused_run_with_file(bread, url: str, given: str | None = None) -> str:
    """A paused run that generated the file at ``url`` (and was given the one at ``given``)."""
    run_id = "waiting"
    bread.store.create_run({
        "id": run_id, "agentId": "artist", "sessionId": "s", "status": "paused", "checkpointId": None,
        "owner": None, "leaseUntil": 0.0, "cancelRequested": False, "createdAt": OLD, "updatedAt": OLD,
    })  # fmt: skip
    reference = {"type": "file", "uri": given, "mimeType": "image/png"}
    start = {"type": "agent:run:start", "runId": run_id, "agentId": "artist", "sessionId": "s", "input": [reference]}
    crumb = {"type": "file:generated", "runId": run_id, "uri": url, "mimeType": "image/png"}
    bread.store.append_crumbs(run_id, [Frame(run_id, 1, start), Frame(run_id, 2, crumb)])
    return run_id


def test_old_runs_and_files_go_and_a_file_of_a_paused_run_stays(bread):
    drawn = bread.run("artist", "draw", mode="sync")
    assert drawn.status == "completed"
    (file_crumb,) = [c for c in drawn.crumbs if c["type"] == "file:generated"]
    kept = bread.blob_store.put(b"still needed", "text/plain")
    given = bread.blob_store.put(b"an upload it reads", "image/png", owner="someone")
    fresh = bread.blob_store.put(b"new", "text/plain")
    paused_run_with_file(bread, kept["url"], given["url"])
    finish_old(bread, drawn.run_id)
    for url in (file_crumb["uri"], kept["url"], given["url"]):
        age(bread, url)

    logged = len(bread.store.get_crumbs(drawn.run_id))

    report = collect_garbage(bread, 30)

    assert report["dryRun"] is False and report["before"] < time.strftime("%Y-%m-%d")
    nothing_else = {"loops": 0, "taskRuns": 0, "mcpSessions": 0}
    progress = 1  # what the run would have gone on from, saved with its file:generated crumb
    assert report["deleted"] == {"runs": 1, "crumbs": logged, "checkpoints": progress, **nothing_else, "files": 1}
    assert bread.store.get_run(drawn.run_id) is None
    assert bread.blob_store.get(file_crumb["uri"]) is None
    assert bread.blob_store.get(kept["url"])[0] == b"still needed"
    assert bread.blob_store.get(given["url"])[0] == b"an upload it reads"
    assert bread.blob_store.get(fresh["url"])[0] == b"new"
    assert bread.store.get_run("waiting")["status"] == "paused"


def test_a_dry_run_counts_and_deletes_nothing(bread):
    drawn = bread.run("artist", "draw", mode="sync")
    (file_crumb,) = [c for c in drawn.crumbs if c["type"] == "file:generated"]
    finish_old(bread, drawn.run_id)
    age(bread, file_crumb["uri"])

    report = collect_garbage(bread, 30, dry_run=True)

    assert report["dryRun"] is True
    assert (report["deleted"]["runs"], report["deleted"]["files"]) == (1, 1)
    assert bread.store.get_run(drawn.run_id) is not None
    assert bread.blob_store.get(file_crumb["uri"]) is not None
    assert collect_garbage(bread, 30)["deleted"] == report["deleted"]


def test_a_store_that_cannot_purge_is_not_supported(tmp_path):
    class Forgetful:
        """A store with no purge: a third party's, say."""

    bread = make(tmp_path, store=Forgetful())
    with pytest.raises(BreadError) as caught:
        collect_garbage(bread, 30)
    assert caught.value.code == NOT_SUPPORTED


def test_a_negative_age_is_refused(bread):
    with pytest.raises(ValueError, match="0 or more"):
        collect_garbage(bread, -1)


def test_retention_days_comes_from_the_environment(monkeypatch):
    from bread_sync.config import apply_environment

    monkeypatch.setenv("BREAD_RETENTION_DAYS", "14")
    assert apply_environment(Config()).retention_days == 14
    monkeypatch.setenv("BREAD_RETENTION_DAYS", "two weeks")
    with pytest.raises(ValueError, match="BREAD_RETENTION_DAYS"):
        apply_environment(Config())


# -- the command line -----------------------------------------------------------------------------


def seed(path) -> None:
    """An old finished run and an old running one, in the CLI's SQLite file."""
    made = sqlite_store(path)
    for run_id, status in (("old-done", "completed"), ("old-live", "running")):
        made.create_run({
            "id": run_id, "agentId": "echo", "sessionId": "s", "status": status, "checkpointId": None,
            "owner": "elsewhere", "leaseUntil": 4e9, "cancelRequested": False, "createdAt": OLD, "updatedAt": OLD,
        })  # fmt: skip
        made.append_crumbs(run_id, [Frame(run_id, 1, {"type": "agent:run:start", "runId": run_id})])
    made.close()


def test_gc_deletes_what_is_older_than_the_days_given(env):  # noqa: F811
    seed(env["BREAD_DB"])

    dry = cli(env, "gc", "--older-than", "30", "--dry-run")
    real = cli(env, "gc", "--older-than", "30")
    again = cli(env, "gc", "--older-than", "30")

    assert (dry.returncode, real.returncode, again.returncode) == (0, 0, 0), (dry.stderr, real.stderr)
    assert json.loads(dry.stdout)["dryRun"] is True
    assert json.loads(dry.stdout)["deleted"] == json.loads(real.stdout)["deleted"]
    assert json.loads(real.stdout)["deleted"] == {
        "runs": 1, "crumbs": 1, "checkpoints": 0, "loops": 0, "taskRuns": 0, "mcpSessions": 0, "files": 0,
    }  # fmt: skip
    assert json.loads(again.stdout)["deleted"]["runs"] == 0
    reopened = sqlite_store(env["BREAD_DB"])
    assert [r["id"] for r in reopened.list_runs()] == ["old-live"]
    reopened.close()


def test_gc_takes_its_default_age_from_bread_retention_days(env):  # noqa: F811
    seed(env["BREAD_DB"])

    unset = cli(env, "gc")
    from_env = cli({**env, "BREAD_RETENTION_DAYS": "30"}, "gc")

    assert unset.returncode == 2 and "BREAD_RETENTION_DAYS" in unset.stderr
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["deleted"]["runs"] == 1
