"""Per-run ownership against a real server: the app key cannot reach a run of the ops key's by
any route that takes a run id, and an anonymous caller cannot map the routes."""

from __future__ import annotations

import pytest

from .client import TRANSPORTS, failure_of, fetch, resume, run
from .ownership_config import KEYS

CONFIG = "tests.integration.ownership_config:config"
OPS = {"Authorization": f"Bearer {KEYS['ops']}"}
APP = {"Authorization": f"Bearer {KEYS['app']}"}


@pytest.fixture
def owned(pool, wire):
    return pool.primary(TRANSPORTS[wire], CONFIG)


def forbidden(answer) -> None:
    assert (answer.status, answer.json()) == (403, {"error": "Forbidden"})


def test_another_callers_run_is_403_on_every_route_by_its_id_and_stays_whole(http, owned, wire):
    run_id = f"ops-{wire}-1"
    paused = run(http, owned.url, "writer", {"input": {"topic": "x"}, "runId": run_id}, wire, headers=OPS)
    pause = paused.last_crumb.data
    assert pause["type"] == "human:required"
    base = owned.url
    forbidden(fetch(http, "GET", f"{base}/runs/{run_id}/stream", wire, headers=APP))
    forbidden(fetch(http, "POST", f"{base}/runs/{run_id}/cancel", wire, headers=APP))
    forbidden(fetch(http, "GET", f"{base}/runs/{run_id}", wire, headers=APP))
    forbidden(run(http, base, "writer", {"input": {"topic": "y"}, "runId": run_id}, wire, headers=APP))
    # A checkpoint's id does not name its run: another caller's is answered as an unknown one.
    theirs = resume(http, base, pause["checkpointId"], {"approved": True}, wire, headers=APP)
    unknown = resume(http, base, "cp_unknown", {"approved": True}, wire, headers=APP)
    assert failure_of(unknown, wire)["code"] == "CHECKPOINT_NOT_FOUND"
    assert theirs.text.replace(pause["checkpointId"], "cp_unknown") == unknown.text
    assert http.get(f"{base}/runs/{run_id}", headers=OPS).json()["status"] == "paused"
    resumed = resume(http, base, pause["checkpointId"], {"approved": True}, wire, headers=OPS)
    assert resumed.last_crumb.data["output"] == "Published."
    log = fetch(http, "GET", f"{base}/runs/{run_id}/stream", wire, headers=OPS)
    assert [e.type for e in log.crumbs].count("agent:run:start") == 1 and log.last_crumb.type == "agent:run:end"


def test_another_callers_loop_or_task_run_is_answered_exactly_as_an_unknown_one(http, owned, wire):
    base = owned.url
    run(http, base, "counter", {"input": {"until": 2}, "runId": f"ops-{wire}-loop"}, wire, headers=OPS)
    run(http, base, "manager", {"input": "go", "runId": f"ops-{wire}-task"}, wire, headers=OPS)
    for kind, run_id in (("loops", f"ops-{wire}-loop"), ("tasks", f"ops-{wire}-task")):
        known = next(row["id"] for row in http.get(f"{base}/{kind}", headers=OPS).json() if row["runId"] == run_id)
        theirs, unknown = http.get(f"{base}/{kind}/{known}", headers=APP), http.get(f"{base}/{kind}/nope", headers=APP)
        assert (theirs.status_code, theirs.headers["content-type"]) == (
            unknown.status_code,
            unknown.headers["content-type"],
        )
        assert theirs.status_code == 404 and theirs.text.replace(known, "nope") == unknown.text
        assert http.get(f"{base}/{kind}/{known}", headers=OPS).status_code == 200


def test_a_run_id_of_its_own_attaches_and_one_of_another_agent_conflicts(http, owned, wire):
    run_id = f"app-{wire}-1"
    first = run(http, owned.url, "echo", {"input": "hi", "runId": run_id}, wire, headers=APP)
    again = run(http, owned.url, "echo", {"input": "other", "runId": run_id}, wire, headers=APP)
    assert again.last_crumb.data["output"] == first.last_crumb.data["output"] == "hi"
    conflict = run(http, owned.url, "writer", {"input": {"topic": "x"}, "runId": run_id}, wire, headers=APP)
    assert failure_of(conflict, wire)["code"] == "RUN_ID_CONFLICT"


def test_a_new_run_id_that_names_another_caller_is_403_and_its_owner_runs_its_own(http, owned, wire):
    run_id = f"ops-{wire}-squatted"
    forbidden(run(http, owned.url, "echo", {"input": "app's", "runId": run_id}, wire, headers=APP))
    forbidden(fetch(http, "POST", f"{owned.url}/pipelines/draft-then-echo/run", wire, headers=APP,
                    body={"input": {"topic": "app's"}, "runId": run_id}))  # fmt: skip
    own = run(http, owned.url, "echo", {"input": "ops's", "runId": run_id}, wire, headers=OPS)
    assert own.run_id == run_id and own.last_crumb.data["output"] == "ops's"


@pytest.mark.parametrize(("method", "path"), [("GET", "/nope"), ("GET", "/agents/echo/run"), ("PUT", "/agents")])
def test_an_anonymous_caller_cannot_map_the_routes(http, owned, wire, method, path):
    anonymous = http.request(method, f"{owned.url}{path}")
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "UNAUTHENTICATED"
    assert http.request(method, f"{owned.url}{path}", headers=OPS).status_code in (404, 405)
    assert http.get(f"{owned.url}/health").status_code == 200
