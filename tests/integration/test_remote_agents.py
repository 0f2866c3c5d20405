"""Remote agents over HTTP: two real gunicorn + gevent servers, one calling the other.

The remote serves ``tests.replica_config`` (the demo agents and ``stepper``); the caller serves
``tests.remote_config``, whose ``slow``, ``writer``, ``far-stepper`` and ``missing`` are the
remote's. Each has its own SQLite file: the caller reaches the remote only over HTTP.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
import uuid

import httpx2 as httpx
import pytest

from bread_sync import Bread, Config, create_bread
from bread_sync.clock import now_iso
from bread_sync.crumbs import Frame
from bread_sync.engine import owners
from bread_sync.errors import BreadError
from bread_sync.stores import sqlite
from bread_sync.transports import http_chunked, http_sse

from ..waiting import wait_for
from . import ownership_config, servers
from .client import (
    AGENT_ERROR,
    HUMAN_REQUIRED,
    RUN_END,
    TEXT_DELTA,
    TRANSPORTS,
    WIRES,
    Tail,
    assert_log,
    durable_seqs,
    log_of,
    new_client,
    open_stream,
    passive_url,
    resume,
    run,
    run_error_of,
    text_of,
)
from .hostile_remote import CAP_BYTES, EndlessRemote
from .test_examples import run_example

TICKS = " ".join(f"tick {n}" for n in range(1, 41)) + " "


@pytest.fixture(scope="module", params=WIRES)
def pair(request, tmp_path_factory):
    """(remote, caller, wire): the caller's two workers relay the remote's agents."""
    wire = request.param
    root = tmp_path_factory.mktemp(f"remote-{wire}")
    transport = TRANSPORTS[wire]
    remote = servers.Server("remote", root, root / "remote.db", transport,
                            env={"BREAD_CONFIG": "tests.replica_config:config"})  # fmt: skip
    remote.start()
    env = {"BREAD_CONFIG": "tests.remote_config:config", "BREAD_REMOTE_URL": remote.url, "BREAD_REMOTE_WIRE": wire}
    caller = servers.Server("caller", root, root / "caller.db", transport, workers=2, env=env)
    try:
        caller.start()
        yield remote, caller, wire
    finally:
        caller.stop()
        remote.stop()


@pytest.fixture
def http():
    with new_client() as client:
        yield client


def remote_run_of(http, remote, session_id: str) -> dict:
    """The remote's run that relays into the caller's run of ``session_id`` (the relay names the
    remote run's session after the local one)."""
    runs = wait_for(lambda: http.get(f"{remote.url}/runs", params={"session": session_id}).json(), 10, "the remote run")
    assert len(runs) == 1, runs
    return runs[0]


def without_ids(events, *keys: str) -> list[tuple]:
    """Each logged crumb as (seq, crumb) without the fields that name this server's own ids."""
    return [(e.seq, {k: v for k, v in e.data.items() if k not in ("runId", *keys)}) for e in events]


def test_a_relayed_runs_log_is_the_remote_runs_crumbs_renumbered(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 3, "delayMs": 20}, "session": {"id": session_id}}
    stream = run(http, caller.url, "far-stepper", body, wire)

    assert stream.status == 200 and stream.types[-1] == RUN_END, stream.types
    assert stream.last_crumb.data["output"] == "finished."
    local = log_of(http, caller.url, stream.run_id, wire)
    assert_log(local, stream.run_id)
    there = remote_run_of(http, remote, session_id)
    assert there["status"] == "completed" and there["agentId"] == "stepper"
    far = log_of(http, remote.url, there["id"], wire)
    # The local run opens with its own start (its agent id); all else is the remote's, at its seqs.
    assert local[0].data["agentId"] == "far-stepper" and far[0].data["agentId"] == "stepper"
    assert without_ids(local[1:]) == without_ids(far[1:])
    assert local[0].data["input"] == far[0].data["input"] and local[0].data["sessionId"] == session_id
    # What the caller's response carried agrees with its log at every durable seq.
    logged = {e.seq: e.data for e in local}
    assert all(logged[e.seq] == e.data for e in stream.events if e.durable)
    assert text_of(stream.events) == text_of(local) == text_of(far)


def test_get_agents_lists_remote_agents_with_the_remotes_schema(http, pair):
    remote, caller, _ = pair
    listed = {a["id"]: a for a in http.get(f"{caller.url}/agents").json()}
    there = http.get(f"{remote.url}/agents/stepper").json()

    assert {"slow", "writer", "far-stepper", "missing", "echo"} <= set(listed)
    ids = [a["id"] for a in http.get(f"{caller.url}/agents").json()]
    assert len(ids) == len(set(ids)), f"a shadowed agent listed twice: {ids}"
    summary = {k: there[k] for k in ("model", "outputFormat", "description")}
    assert listed["far-stepper"] == {"id": "far-stepper", **summary}
    described = http.get(f"{caller.url}/agents/far-stepper").json()
    assert described == {**there, "id": "far-stepper"}
    assert described["inputSchema"]["required"] == ["count", "delayMs"]
    # An agent the remote does not have is described by what the config knows, not a 500.
    missing = http.get(f"{caller.url}/agents/missing")
    assert missing.status_code == 200 and missing.json()["model"] == "remote:no-such-agent", missing.text
    assert listed["missing"]["model"] == "remote:no-such-agent"


def test_a_remote_hitl_pause_is_a_local_checkpoint_whose_resume_resumes_the_remote(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    first = run(http, caller.url, "writer", {"input": {"topic": "bread"}, "session": {"id": session_id}}, wire)
    assert first.types[-1] == HUMAN_REQUIRED, first.types
    paused = first.last_crumb.data
    there = remote_run_of(http, remote, session_id)
    assert there["status"] == "paused"
    assert paused["checkpointId"] != there["checkpointId"], "the local pause is a local checkpoint"
    assert http.get(f"{caller.url}/runs/{first.run_id}").json()["status"] == "paused"

    continuation = resume(http, caller.url, paused["checkpointId"], {"approved": True}, wire)

    assert continuation.run_id == first.run_id
    assert continuation.types[0] == "human:resumed" and continuation.types[-1] == RUN_END, continuation.types
    assert continuation.events[0].data["checkpointId"] == paused["checkpointId"]
    assert continuation.last_crumb.data["output"] == "Published."
    assert wait_for(lambda: http.get(f"{remote.url}/runs/{there['id']}").json()["status"] == "completed", 10,
                    "the remote run's end")  # fmt: skip
    local, far = log_of(http, caller.url, first.run_id, wire), log_of(http, remote.url, there["id"], wire)
    assert_log(local, first.run_id)
    assert without_ids(local[1:], "checkpointId") == without_ids(far[1:], "checkpointId")
    again = resume(http, caller.url, paused["checkpointId"], {"approved": True}, wire)
    assert "CHECKPOINT_ALREADY_RESUMED" in again.text


@pytest.mark.parametrize("where", ["caller", "remote"])
def test_a_cancel_crosses_from_either_side(http, pair, where):
    """A cancel of the local run cancels the remote one; a cancel on the remote ends the local one."""
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 200, "delayMs": 50}, "session": {"id": session_id}}
    with open_stream(http, "POST", f"{caller.url}/agents/slow/run", wire, body=body) as stream:
        stream.until(lambda e: e.type == TEXT_DELTA, "a first tick")
        there = remote_run_of(http, remote, session_id)
        target = f"{caller.url}/runs/{stream.run_id}" if where == "caller" else f"{remote.url}/runs/{there['id']}"
        assert http.post(f"{target}/cancel").status_code == 200
        stream.rest()
    assert stream.last_crumb.type == AGENT_ERROR and stream.last_crumb.data["error"]["code"] == "RUN_CANCELLED"
    assert wait_for(lambda: http.get(f"{remote.url}/runs/{there['id']}").json()["status"] == "cancelled", 10,
                    "the remote run's cancel")  # fmt: skip
    assert http.get(f"{caller.url}/runs/{stream.run_id}").json()["status"] == "cancelled"
    assert_log(log_of(http, caller.url, stream.run_id, wire), stream.run_id)


def test_an_agent_the_remote_lacks_fails_the_local_run_with_the_remotes_error(http, pair):
    _, caller, wire = pair
    stream = run(http, caller.url, "missing", {"input": "hello"}, wire)
    assert stream.last_crumb.type == AGENT_ERROR and stream.last_crumb.data["error"]["code"] == "AGENT_NOT_FOUND"
    assert http.get(f"{caller.url}/runs/{stream.run_id}").json()["status"] == "failed"


def kill_the_owner_mid_run(http, caller, wire, agent: str, body: dict, far_enough) -> tuple[str, list]:
    """Start a run of ``agent`` on the caller, SIGKILL the worker that owns it once the stream
    shows ``far_enough``, and return (run id, the events the client had)."""
    with new_client() as first_client:
        with open_stream(first_client, "POST", f"{caller.url}/agents/{agent}/run", wire, body=body) as stream:
            stream.until(far_enough, "the run under way")
            owner = owners.parse(http.get(f"{caller.url}/runs/{stream.run_id}").json()["owner"])
            assert owner is not None and owner.pid in caller.worker_pids()
            os.kill(owner.pid, signal.SIGKILL)
            with pytest.raises(httpx.TransportError):
                stream.rest()  # the connection drops with the worker
    assert RUN_END not in stream.types
    return stream.run_id, stream.events


def reconnect(caller, run_id: str, wire: str, before: list) -> list:
    """The client's reconnect after what it holds, as a browser's EventSource would: its crumbs."""
    tail = Tail(passive_url(caller.url, run_id), wire, headers={"Last-Event-ID": str(max(durable_seqs(before)))})
    tail.start()
    return [e for e in tail.finish(30) if e.kind == "crumb"]


def assert_relayed_whole(http, remote, caller, wire, run_id: str, session_id: str, before: list, after: list) -> None:
    durable = durable_seqs(before) + durable_seqs(after)
    assert durable == sorted(set(durable)), f"a durable crumb twice or out of order: {durable}"
    record = http.get(f"{caller.url}/runs/{run_id}").json()
    assert record["status"] == "completed", record
    local = log_of(http, caller.url, run_id, wire)
    assert_log(local, run_id)
    assert durable_seqs(local) == durable, "the client missed a durable crumb the log holds"
    far = log_of(http, remote.url, remote_run_of(http, remote, session_id)["id"], wire)
    assert without_ids(local[1:]) == without_ids(far[1:]), "the log lost or doubled a relayed crumb"


def test_a_relay_survives_a_sigkill_of_the_callers_worker(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 40, "delayMs": 100}, "session": {"id": session_id}}
    five = lambda e: e.type == TEXT_DELTA and "tick 5 " in e.data["delta"]  # noqa: E731
    run_id, before = kill_the_owner_mid_run(http, caller, wire, "slow", body, five)

    after = reconnect(caller, run_id, wire, before)

    assert after[-1].type == RUN_END and after[-1].data["output"] == TICKS, [e.type for e in after]
    assert_relayed_whole(http, remote, caller, wire, run_id, session_id, before, after)
    # Text: the segment in flight at the reconnect may come again whole (the dedup rule), never less.
    local = log_of(http, caller.url, run_id, wire)
    assert text_of(local) == TICKS and TICKS in text_of(before) + text_of(after)
    assert text_of(after).endswith("tick 40 ")


def test_a_relay_taken_over_mid_run_goes_on_after_its_last_durable_crumb(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 12, "delayMs": 100}, "session": {"id": session_id}}
    third = lambda e: e.type == "tool:result" and e.data["output"] == {"noted": 3}  # noqa: E731
    run_id, before = kill_the_owner_mid_run(http, caller, wire, "far-stepper", body, third)

    after = reconnect(caller, run_id, wire, before)

    assert after[-1].type == RUN_END and after[-1].data["output"] == "finished.", [e.type for e in after]
    assert_relayed_whole(http, remote, caller, wire, run_id, session_id, before, after)
    results = [e.data["output"]["noted"] for e in before + after if e.type == "tool:result"]
    assert results == list(range(1, 13)), "a step's tool result lost or doubled"


@pytest.fixture
def bread_calling(tmp_path):
    """Callers in this process, on one SQLite file, whose ``slow`` is the remote's; closed after."""
    made: list[Bread] = []

    def make(remote, wire: str) -> Bread:
        factory = http_sse.remote_agent if wire == "sse" else http_chunked.remote_agent
        remote_agents = {"slow": factory(url=remote.url, agent_id="slow")}
        config = Config(store=sqlite.store(path=tmp_path / "caller.db"), blob_store=None, remote_agents=remote_agents)
        made.append(create_bread(config))
        return made[-1]

    yield make
    for bread in made:
        bread.close()


def dead_relay(run_id: str, remote_run_id: str) -> dict:
    """The record of a relay whose owner's lease lapsed an hour ago."""
    return {
        "id": run_id, "agentId": "slow", "sessionId": f"ses_{uuid.uuid4().hex}", "status": "running",
        "checkpointId": None, "owner": "elsewhere:1:gone", "leaseUntil": time.time() - 3600,
        "cancelRequested": False, "createdAt": now_iso(), "updatedAt": now_iso(),
        "remoteRunId": remote_run_id, "remoteSeq": 0,
    }  # fmt: skip


def test_a_dead_relay_is_taken_over_by_one_process_only(http, pair, bread_calling):
    remote, _, wire = pair
    finished = run(http, remote.url, "slow", {"input": {"count": 3, "delayMs": 0}}, wire)
    first, second = bread_calling(remote, wire), bread_calling(remote, wire)
    record = dead_relay("run_orphan", finished.run_id)
    first.store.create_run(record)
    start = {"type": "agent:run:start", "runId": "run_orphan"}
    first.store.append_crumbs("run_orphan", [Frame("run_orphan", 1, start)])

    claims = [first.adopt(record), second.adopt(record)]

    assert claims.count(True) == 1, claims
    adopted = wait_for(lambda: (r := first.store.get_run("run_orphan"))["status"] != "running" and r, 10, "its end")
    assert adopted["status"] == "completed"
    log = first.store.get_crumbs("run_orphan")
    assert [f.crumb["type"] for f in log] == ["agent:run:start", "text:delta", "agent:run:end"]
    assert log[1].crumb["delta"] == "tick 1 tick 2 tick 3 " and log[2].crumb["output"] == log[1].crumb["delta"]


def test_a_dead_relay_whose_remote_run_is_gone_is_interrupted(pair, bread_calling):
    remote, _, wire = pair
    bread = bread_calling(remote, wire)
    bread.store.create_run(dead_relay("run_lost", "run_the_remote_never_had"))

    assert bread.sweep_interrupted() == 1  # taken over by the sweep, then found gone

    record = bread.store.get_run("run_lost")
    assert record["status"] == "interrupted"
    assert bread.store.get_crumbs("run_lost")[-1].crumb["error"]["code"] == "RUN_INTERRUPTED"


def test_the_remote_agents_example_runs_the_remote_writer_through_the_caller(pair, monkeypatch):
    remote, caller, wire = pair
    if wire != "ndjson":
        pytest.skip("the example's client reads the caller's NDJSON")
    lines = run_example("remote_agents.py", caller)
    assert lines[0].split() == ["1", "agent:run:start"] and "human:required" in lines[10], lines
    assert lines[11].startswith("paused: publish") and lines[-1] == "output: Published.", lines
    # The example's own config names the remote's writer.
    monkeypatch.setenv("BREAD_REMOTE_URL", remote.url)
    example = importlib.import_module("examples.remote_agents").config()
    assert example.remote_agents["writer"].url == remote.url and example.remote_agents["writer"].agent_id == "writer"


def test_a_remote_subagent_relays_inside_its_callers_run_and_pauses_there(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    first = run(http, caller.url, "editor", {"input": "go", "session": {"id": session_id}}, wire)
    assert first.types[-1] == HUMAN_REQUIRED, first.types
    types = first.types
    assert types.count("agent:run:start") == 1, "the remote's own start is not relayed into the parent"
    assert types.index("subagent:run:start") < types.index("tool:call", types.index("subagent:run:start"))
    paused = first.last_crumb.data
    assert paused["toolName"] == "publish"

    continuation = resume(http, caller.url, paused["checkpointId"], {"approved": True}, wire)

    assert continuation.types[-1] == RUN_END, continuation.types
    end = next(e.data for e in continuation.events if e.type == "subagent:run:end")
    assert (end["subagentId"], end["status"], end["output"]) == ("writer", "completed", "Published.")
    assert continuation.last_crumb.data["output"] == "The writer said: Published."
    assert_log(log_of(http, caller.url, first.run_id, wire), first.run_id)
    there = wait_for(lambda: [r for r in http.get(f"{remote.url}/runs", params={"agent": "writer"}).json()
                              if r["sessionId"] == session_id], 10, "the remote writer's run")  # fmt: skip
    assert there[0]["status"] == "completed"


def test_a_local_agents_run_with_a_remote_subagent_is_carried_on_when_its_owner_dies(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": "go", "session": {"id": session_id}}
    five = lambda e: e.type == TEXT_DELTA and "tick 5 " in e.data["delta"]  # noqa: E731
    run_id, before = kill_the_owner_mid_run(http, caller, wire, "watcher", body, five)

    after = reconnect(caller, run_id, wire, before)

    assert after[-1].type == RUN_END and after[-1].data["output"] == "Watched.", after[-1].data
    assert http.get(f"{caller.url}/runs/{run_id}").json()["status"] == "completed"
    local = log_of(http, caller.url, run_id, wire)
    assert_log(local, run_id)
    types = [e.type for e in local]
    assert types.count("agent:run:continued") == 1, types
    assert types.count("subagent:run:start") == 1 and types.count("subagent:run:end") == 1, types
    end = next(e.data for e in local if e.type == "subagent:run:end")
    assert end["output"] == "".join(f"tick {n} " for n in range(1, 41)), end
    there = wait_for(lambda: [r for r in http.get(f"{remote.url}/runs", params={"agent": "slow"}).json()
                              if r["sessionId"] == session_id], 10, "the remote slow run")  # fmt: skip
    assert len(there) == 1 and there[0]["status"] == "completed", there


def test_a_relay_reopens_a_silent_stream_after_its_position(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 3, "delayMs": 1500}, "session": {"id": session_id}}
    stream = run(http, caller.url, "sleepy", body, wire)  # 1.5 s between ticks, 0.5 s of patience

    assert stream.types[-1] == RUN_END and stream.last_crumb.data["output"] == "tick 1 tick 2 tick 3 ", stream.types
    assert text_of(stream.events) == "tick 1 tick 2 tick 3 ", "a re-opened stream re-sent text the relay had"
    local = log_of(http, caller.url, stream.run_id, wire)
    far = log_of(http, remote.url, remote_run_of(http, remote, session_id)["id"], wire)
    assert without_ids(local[1:]) == without_ids(far[1:])
    # The relay re-opened the remote run's stream while it waited (the caller's log says so).
    far_id = remote_run_of(http, remote, session_id)["id"]
    assert caller.log(200_000).count(f"remote run {far_id}: its stream ended or went silent") >= 2


def test_a_cancel_of_a_paused_relay_cancels_the_paused_remote_run(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    first = run(http, caller.url, "writer", {"input": {"topic": "rye"}, "session": {"id": session_id}}, wire)
    assert first.types[-1] == HUMAN_REQUIRED, first.types
    there = remote_run_of(http, remote, session_id)

    assert http.post(f"{caller.url}/runs/{first.run_id}/cancel").status_code == 200

    assert http.get(f"{caller.url}/runs/{first.run_id}").json()["status"] == "cancelled"
    assert http.get(f"{remote.url}/runs/{there['id']}").json()["status"] == "cancelled"
    later = resume(http, caller.url, first.last_crumb.data["checkpointId"], {"approved": True}, wire)
    assert "CHECKPOINT_ALREADY_RESUMED" in later.text


def test_a_relay_stopped_by_a_graceful_shutdown_is_taken_over_by_the_next_server(http, pair, tmp_path):
    remote, _, wire = pair
    env = {"BREAD_CONFIG": "tests.remote_config:config", "BREAD_REMOTE_URL": remote.url, "BREAD_REMOTE_WIRE": wire}
    first = servers.Server("leaving", tmp_path, tmp_path / "caller.db", TRANSPORTS[wire], env=env).start()
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 100, "delayMs": 100}, "session": {"id": session_id}}
    try:
        with open_stream(http, "POST", f"{first.url}/agents/slow/run", wire, body=body) as stream:
            stream.until(lambda e: e.type == TEXT_DELTA, "a first tick")
            run_id = stream.run_id
            first.terminate()  # SIGTERM: gunicorn's graceful stop, 5 s here
            try:
                stream.rest()
            except httpx.TransportError:
                pass  # the response was open when its worker went: nothing ended the run
        assert first.wait(15) == 0
    finally:
        first.stop()
    left = wait_for(lambda: http.get(f"{remote.url}/runs", params={"session": session_id}).json(), 5, "the remote run")
    assert left[0]["status"] == "running", "the shutdown cancelled the remote run"
    assert RUN_END not in stream.types and AGENT_ERROR not in stream.types, stream.types

    second = servers.Server("arriving", tmp_path, tmp_path / "caller.db", TRANSPORTS[wire], env=env).start()
    try:
        after = reconnect(second, run_id, wire, stream.events)
        assert after[-1].type == RUN_END and after[-1].data["output"].endswith("tick 100 "), [e.type for e in after]
        assert_relayed_whole(http, remote, second, wire, run_id, session_id, stream.events, after)
    finally:
        second.stop()


def test_a_remote_behind_auth_is_reached_with_the_configured_headers(http, tmp_path):
    remote = servers.Server("guarded", tmp_path, tmp_path / "remote.db", "http-chunked",
                            env={"BREAD_CONFIG": "tests.integration.ownership_config:config"})  # fmt: skip
    env = {"BREAD_CONFIG": "tests.remote_config:config", "BREAD_REMOTE_WIRE": "ndjson",
           "BREAD_REMOTE_KEY": ownership_config.KEYS["ops"]}  # fmt: skip
    caller = servers.Server("keyed", tmp_path, tmp_path / "caller.db", "http-chunked", env=env)
    try:
        caller.env["BREAD_REMOTE_URL"] = remote.start().url
        caller.start()
        assert http.get(f"{remote.url}/agents/slow").status_code == 401, "the remote lets anyone in"

        described = http.get(f"{caller.url}/agents/slow").json()
        stream = run(http, caller.url, "slow", {"input": {"count": 3, "delayMs": 0}}, "ndjson")

        assert described["inputSchema"], described  # the remote's, not what the config knows
        assert stream.types[-1] == RUN_END and stream.last_crumb.data["output"] == "tick 1 tick 2 tick 3 "
    finally:
        caller.stop()
        remote.stop()


def test_a_dead_relay_taken_over_keeps_its_session(http, pair, bread_calling):
    remote, _, wire = pair
    bread = bread_calling(remote, wire)
    with open_stream(http, "POST", f"{remote.url}/agents/slow/run", wire,
                     body={"input": {"count": 30, "delayMs": 100}}) as far:  # fmt: skip
        far.until(lambda e: e.type == TEXT_DELTA, "the remote run under way")
        record = dead_relay("run_holding", far.run_id)
        bread.store.create_run(record)
        assert bread.store.claim_session(record["sessionId"], "run_holding") is None

        # A run that wants the session finds the holder's owner gone: the relay is taken over
        # and keeps the session, rather than being interrupted and losing it.
        with pytest.raises(BreadError) as refused:
            bread.sessions.claim(record["sessionId"], "run_new", "reject")
        assert refused.value.code == "SESSION_BUSY"
        assert bread.store.get_run("run_holding")["owner"] == bread.owner
        far.rest()
    ended = wait_for(lambda: (r := bread.store.get_run("run_holding"))["status"] != "running" and r, 10, "its end")
    assert ended["status"] == "completed"


def test_a_cancel_does_not_wait_for_a_remote_that_stopped_answering(http, pair):
    remote, caller, wire = pair
    body = {"input": {"count": 100, "delayMs": 100}, "session": {"id": f"ses_{uuid.uuid4().hex}"}}
    (worker,) = remote.worker_pids()
    with open_stream(http, "POST", f"{caller.url}/agents/slow/run", wire, body=body, seconds=20) as stream:
        stream.until(lambda e: e.type == TEXT_DELTA, "a first tick")
        os.kill(worker, signal.SIGSTOP)  # the remote neither sends nor answers; its sockets stay open
        try:
            started = time.monotonic()
            assert http.post(f"{caller.url}/runs/{stream.run_id}/cancel").status_code == 200
            stream.rest()
            waited = time.monotonic() - started
        finally:
            os.kill(worker, signal.SIGCONT)
    assert stream.last_crumb.type == AGENT_ERROR and stream.last_crumb.data["error"]["code"] == "RUN_CANCELLED"
    assert waited < 5, f"the cancel waited {waited:.1f} s for the silent remote (its heartbeat timeout is 45 s)"
    assert http.get(f"{caller.url}/runs/{stream.run_id}").json()["status"] == "cancelled"


@pytest.mark.parametrize("wire", WIRES)
def test_a_remote_whose_line_never_ends_fails_the_relay_with_a_decode_error(http, tmp_path, wire):
    """A remote that answers a line without end (and descriptions without end): the caller holds
    no more than its bound of it, hangs up, and ends its run with one terminal crumb."""
    content_type, prefix = ("text/event-stream", b"data: ") if wire == "sse" else ("application/x-ndjson", b"")
    with EndlessRemote(content_type, prefix=prefix) as hostile:
        env = {"BREAD_CONFIG": "tests.remote_config:config", "BREAD_REMOTE_URL": hostile.url, "BREAD_REMOTE_WIRE": wire}
        caller = servers.Server("caller", tmp_path, tmp_path / "caller.db", TRANSPORTS[wire], env=env)
        try:
            caller.start()
            stream = run(http, caller.url, "slow", {"input": {"count": 3, "delayMs": 0}}, wire)
            described = http.get(f"{caller.url}/agents/slow").json()
        finally:
            caller.stop()

    assert run_error_of(stream, wire)["code"] == "PROTOCOL_DECODE_ERROR"
    assert [e.type for e in stream.crumbs if e.type in (RUN_END, AGENT_ERROR)] == [AGENT_ERROR]
    assert described["model"] == "remote:slow", described  # its description, past the bound, is not read
    wait_for(lambda: len(hostile.sent) == len(hostile.requests), 10, "the hostile remote's connections over")
    assert max(hostile.sent) < CAP_BYTES, hostile.sent  # the caller hung up on each


def test_a_remote_run_carried_on_after_its_worker_died_is_relayed_without_the_text_it_lost(http, pair):
    remote, caller, wire = pair
    session_id = f"ses_{uuid.uuid4().hex}"
    body = {"input": {"count": 40, "delayMs": 100}, "session": {"id": session_id}}
    with new_client() as client, open_stream(client, "POST", f"{caller.url}/agents/far-stepper/run", wire,
                                             body=body, seconds=60) as stream:  # fmt: skip
        stream.until(lambda e: e.type == "text:delta" and "step 6" in e.data["delta"], "the sixth step's text")
        (worker,) = remote.worker_pids()

        os.kill(worker, signal.SIGKILL)  # its respawned worker carries the remote run on

        stream.rest()
    assert stream.types[-1] == RUN_END and stream.types.count("agent:run:continued") == 1, stream.types
    local = log_of(http, caller.url, stream.run_id, wire)
    assert_log(local, stream.run_id)
    far = log_of(http, remote.url, remote_run_of(http, remote, session_id)["id"], wire)
    # The remote's lost text is not in the local log either: the two stay the same crumbs at the same seqs.
    assert without_ids(local[1:]) == without_ids(far[1:]), "the relay logged text the remote lost"
    (continued,) = [e for e in local if e.type == "agent:run:continued"]
    assert continued.data["afterSeq"] == continued.seq - 1
