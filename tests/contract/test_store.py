"""The store contract, over every implementation."""

import threading

import pytest

from bread_sync.crumbs import Frame
from bread_sync.errors import RUN_INTERRUPTED, SEQ_CONFLICT, BreadError
from bread_sync.loading import resolve
from bread_sync.stores import STORES, batch, has_crumb_log, missing_methods

OLD = "2020-01-01T00:00:00.000Z"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    opts = {
        "memory": dict,
        "sqlite": lambda: {"path": tmp_path / "bread.db"},
        "postgres": lambda: {"url": request.getfixturevalue("postgres_url")},
    }[request.param]()
    made = resolve(request.param, STORES, "store", **opts)
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


def crumb(run_id, seq, **payload):
    return Frame(run_id, seq, {"type": "tool:call", "runId": run_id, "n": seq, **payload})


def seqs(frames):
    return [f.seq for f in frames]


def run_record(run_id, **fields):
    record = {
        "id": run_id, "agentId": "echo", "sessionId": "s1", "status": "running", "checkpointId": None,
        "owner": "host:1:a", "leaseUntil": 100.0, "cancelRequested": False, "usage": None,
        "createdAt": OLD, "updatedAt": OLD,
    }  # fmt: skip
    return {**record, **fields}


def checkpoint(checkpoint_id, **fields):
    return {"id": checkpoint_id, "runId": "r1", "status": "pending", "nextSeq": 4, "state": {"a": [1]}, **fields}


def assert_conflict(store, run_id, frames):
    with pytest.raises(BreadError) as info:
        store.append_crumbs(run_id, frames)
    assert info.value.code == SEQ_CONFLICT


# crumb log


def test_it_has_a_crumb_log(store):
    assert has_crumb_log(store)


def test_get_gives_frames_after_in_seq_order(store):
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 2)])
    store.append_crumbs("r2", [crumb("r2", 1)])
    store.append_crumbs("r1", [crumb("r1", 3)])

    assert store.get_crumbs("r1") == [crumb("r1", 1), crumb("r1", 2), crumb("r1", 3)]
    assert seqs(store.get_crumbs("r1", after=1)) == [2, 3]
    assert seqs(store.get_crumbs("r1", after=3)) == []
    assert seqs(store.get_crumbs("r2")) == [1]
    assert store.get_crumbs("nobody") == []


def test_limit_bounds_a_page(store):
    store.append_crumbs("r1", [crumb("r1", seq) for seq in range(1, 6)])

    assert seqs(store.get_crumbs("r1", limit=2)) == [1, 2]
    assert seqs(store.get_crumbs("r1", after=2, limit=2)) == [3, 4]
    assert seqs(store.get_crumbs("r1", after=4, limit=2)) == [5]
    assert store.get_crumbs("r1", limit=0) == []


def test_frames_come_back_with_their_crumb_and_wire_form(store):
    written = Frame("r1", 1, {"type": "tool:result", "runId": "r1", "output": {"ü": [1, None]}})
    store.append_crumbs("r1", [written])

    (read,) = store.get_crumbs("r1")
    assert (read.run_id, read.seq, read.type) == ("r1", 1, "tool:result")
    assert read.crumb == {"type": "tool:result", "runId": "r1", "output": {"ü": [1, None]}}
    assert read.wire == written.wire


def test_an_error_crumb_is_stored_in_its_wire_form(store):
    error = BreadError(RUN_INTERRUPTED, "the process stopped", {"pid": 7})
    store.append_crumbs("r1", [Frame("r1", 1, {"type": "agent:error", "runId": "r1", "error": error})])

    (read,) = store.get_crumbs("r1")
    assert read.crumb["error"] == {
        "name": "BreadError",
        "code": RUN_INTERRUPTED,
        "message": "the process stopped",
        "context": {"pid": 7},
    }


def test_last_seq(store):
    assert store.last_seq("r1") == 0
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 2)])
    store.append_crumbs("r2", [crumb("r2", 1)])
    assert store.last_seq("r1") == 2
    assert store.last_seq("r2") == 1


def test_an_empty_batch_writes_nothing(store):
    store.append_crumbs("r1", [])
    assert store.get_crumbs("r1") == []


def test_a_duplicate_seq_in_one_batch_conflicts_and_writes_nothing(store):
    store.append_crumbs("r1", [crumb("r1", 1)])

    assert_conflict(store, "r1", [crumb("r1", 2), crumb("r1", 2, other=True)])

    assert store.get_crumbs("r1") == [crumb("r1", 1)]
    assert store.last_seq("r1") == 1


def test_a_seq_already_written_conflicts_and_writes_nothing(store):
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 2)])

    assert_conflict(store, "r1", [crumb("r1", 2, late=True), crumb("r1", 3)])

    assert store.get_crumbs("r1") == [crumb("r1", 1), crumb("r1", 2)]
    store.append_crumbs("r1", [crumb("r1", 3)])
    assert seqs(store.get_crumbs("r1")) == [1, 2, 3]


def test_the_log_is_append_only_so_a_late_writer_cannot_fill_a_gap(store):
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 3)])

    assert_conflict(store, "r1", [crumb("r1", 2)])
    assert_conflict(store, "r1", [crumb("r1", 5), crumb("r1", 4)])

    assert seqs(store.get_crumbs("r1")) == [1, 3]


def test_seqs_are_per_run(store):
    store.append_crumbs("r1", [crumb("r1", 1)])
    store.append_crumbs("r2", [crumb("r2", 1)])
    assert seqs(store.get_crumbs("r2")) == [1]


# runs


def test_create_and_get_a_run(store):
    assert store.create_run(run_record("r1"))
    assert store.get_run("r1") == run_record("r1")


def test_a_runs_usage_is_kept_as_given(store):
    usage = {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7, "byModel": {"script:a": {"inputTokens": 3}}}
    store.create_run(run_record("r1"))
    assert store.update_run("r1", status="completed", usage=usage)
    assert store.get_run("r1")["usage"] == usage
    assert store.get_run("nobody") is None


def test_a_traced_runs_span_headers_are_kept_as_given_and_absent_until_set(store):
    # engine/opening.py writes them with each traced driving's first crumb.
    trace = {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01", "tracestate": "k=v"}
    store.create_run(run_record("r1"))
    assert "trace" not in store.get_run("r1")
    assert store.update_run("r1", status="completed", trace=trace)
    assert store.get_run("r1")["trace"] == trace


def test_a_relays_record_keeps_its_remote_run_and_position(store):
    # engine/relay.py writes the position with each relayed durable crumb, in its batch.
    assert store.create_run(run_record("r1", remoteRunId="run_far", remoteSeq=0))
    with batch(store):
        store.append_crumbs("r1", [Frame("r1", 1, {"type": "agent:run:start", "runId": "r1"})])
        assert store.update_run("r1", remoteSeq=7)
    record = store.get_run("r1")
    assert (record["remoteRunId"], record["remoteSeq"]) == ("run_far", 7)
    assert store.list_runs(status="running")[0]["remoteSeq"] == 7
    assert store.update_run("r1", expect={"remoteSeq": 7}, remoteSeq=9)
    assert not store.update_run("r1", expect={"remoteSeq": 7}, remoteSeq=10)
    assert store.get_run("r1")["remoteSeq"] == 9
    store.create_run(run_record("r2"))
    assert "remoteRunId" not in store.get_run("r2"), "a run that relays nothing has no relay fields"


def test_creating_an_existing_run_changes_nothing(store):
    store.create_run(run_record("r1"))
    assert not store.create_run(run_record("r1", agentId="other", status="paused"))
    assert store.get_run("r1") == run_record("r1")


def test_a_returned_record_is_a_copy(store):
    store.create_run(run_record("r1"))
    store.get_run("r1")["status"] = "completed"
    assert store.get_run("r1")["status"] == "running"


def test_update_sets_fields_and_updated_at(store):
    store.create_run(run_record("r1"))

    assert store.update_run("r1", status="paused", checkpointId="cp1", owner=None, cancelRequested=True)

    record = store.get_run("r1")
    assert record["updatedAt"] > OLD
    assert record == run_record(
        "r1", status="paused", checkpointId="cp1", owner=None, cancelRequested=True, updatedAt=record["updatedAt"]
    )
    assert not store.update_run("nobody", status="paused")


def test_update_with_expect_is_a_compare_and_set(store):
    store.create_run(run_record("r1", leaseUntil=123.25))

    assert not store.update_run("r1", expect={"status": "paused"}, status="completed")
    assert not store.update_run("r1", expect={"status": "running", "leaseUntil": 1.0}, status="interrupted")
    assert store.get_run("r1") == run_record("r1", leaseUntil=123.25)

    expect = {"status": "running", "leaseUntil": 123.25, "owner": "host:1:a"}
    assert store.update_run("r1", expect=expect, status="interrupted", owner=None)
    assert not store.update_run("r1", expect=expect, status="interrupted", owner=None)
    assert store.get_run("r1")["status"] == "interrupted"


def test_expect_matches_a_missing_owner_and_a_flag(store):
    store.create_run(run_record("r1", owner=None))

    assert store.update_run("r1", expect={"owner": None, "cancelRequested": False}, cancelRequested=True)
    assert not store.update_run("r1", expect={"cancelRequested": False}, status="failed")
    assert store.update_run("r1", expect={"cancelRequested": True}, status="failed")


def test_claiming_a_queued_run_is_a_compare_and_set_once_it_is_due(store):
    assert store.create_run(run_record("r1", status="queued", owner=None, notBefore=50.0))
    assert store.get_run("r1")["notBefore"] == 50.0
    assert not store.claim_queued("r1", "host:1:w", 200.0, now=49.0)  # not due yet
    assert store.claim_queued("r1", "host:1:w", 200.0, now=50.0)
    record = store.get_run("r1")
    assert (record["status"], record["owner"], record["leaseUntil"]) == ("running", "host:1:w", 200.0)
    assert not store.claim_queued("r1", "host:2:w", 200.0, now=50.0)  # one winner
    assert not store.claim_queued("nope", "host:2:w", 200.0, now=50.0)


def test_a_claim_holds_an_agents_cap_on_its_running_runs(store):
    assert store.create_run(run_record("r1"))  # running
    for run_id in ("r2", "r3"):
        assert store.create_run(run_record(run_id, status="queued", owner=None))
    assert store.create_run(run_record("other", agentId="writer", status="queued", owner=None))
    assert store.claim_queued("r2", "host:1:w", 200.0, now=1.0, most_running=2)
    assert not store.claim_queued("r3", "host:1:w", 200.0, now=1.0, most_running=2)
    assert store.claim_queued("other", "host:1:w", 200.0, now=1.0, most_running=1)  # per agent
    assert store.update_run("r1", status="completed")
    assert store.claim_queued("r3", "host:1:w", 200.0, now=1.0, most_running=2)


def test_list_runs_filters(store):
    store.create_run(run_record("r1"))
    store.create_run(run_record("r2", status="paused"))
    store.create_run(run_record("r3", agentId="other", sessionId="s2"))

    def ids(**filters):
        return sorted(r["id"] for r in store.list_runs(**filters))

    assert ids() == ["r1", "r2", "r3"]
    assert ids(status="running") == ["r1", "r3"]
    assert ids(agent="echo") == ["r1", "r2"]
    assert ids(session="s2") == ["r3"]
    assert ids(status="running", agent="echo", session="s1") == ["r1"]
    assert ids(status="completed") == []
    assert store.list_runs(status="paused") == [run_record("r2", status="paused")]


def test_page_runs_reads_an_agents_runs_last_updated_first_a_page_past_a_cursor(store):
    # Two runs updated at the same time are told apart by id, as the cursor is.
    times = {"r1": "2020-01-01T00:00:01.000Z", "r2": "2020-01-01T00:00:03.000Z", "r3": "2020-01-01T00:00:03.000Z",
             "r4": "2020-01-01T00:00:02.000Z", "r5": "2020-01-01T00:00:04.000Z"}  # fmt: skip
    for run_id, updated_at in times.items():
        status = "paused" if run_id == "r4" else "running"
        store.create_run(run_record(run_id, updatedAt=updated_at, status=status, sessionId=f"s{int(run_id[1]) % 2}"))
    store.create_run(run_record("x1", agentId="other", updatedAt="2020-01-01T00:00:09.000Z"))

    def ids(**query):
        return [r["id"] for r in store.page_runs("echo", **query)]

    assert ids() == ["r5", "r3", "r2", "r4", "r1"]
    assert ids(limit=2) == ["r5", "r3"]
    assert ids(after=(times["r3"], "r3"), limit=2) == ["r2", "r4"]
    assert ids(after=(times["r4"], "r4")) == ["r1"]
    assert ids(session="s1") == ["r5", "r3", "r1"]
    assert ids(statuses=["paused", "completed"]) == ["r4"] and ids(statuses=[]) == []
    assert store.page_runs("echo", limit=1) == [run_record("r5", updatedAt=times["r5"], sessionId="s1")]


def test_cancel_requested_lists_running_runs_of_the_owner(store):
    store.create_run(run_record("asked", cancelRequested=True))
    store.create_run(run_record("not-asked"))
    store.create_run(run_record("other-owner", owner="host:2:b", cancelRequested=True))
    store.create_run(run_record("finished", status="completed", cancelRequested=True))

    assert store.cancel_requested("host:1:a") == ["asked"]
    store.update_run("not-asked", expect={"status": "running"}, cancelRequested=True)
    assert sorted(store.cancel_requested("host:1:a")) == ["asked", "not-asked"]
    assert store.cancel_requested("nobody") == []


# checkpoints


def test_save_and_get_a_checkpoint(store):
    store.save_checkpoint(checkpoint("cp1"))
    assert store.get_checkpoint("cp1") == checkpoint("cp1")
    assert store.get_checkpoint("nothing") is None


def test_saving_again_replaces_a_checkpoint(store):
    store.save_checkpoint(checkpoint("cp1"))
    store.save_checkpoint(checkpoint("cp1", nextSeq=9))
    assert store.get_checkpoint("cp1") == checkpoint("cp1", nextSeq=9)


def test_a_checkpoint_is_claimed_once(store):
    store.save_checkpoint(checkpoint("cp1"))

    assert store.claim_checkpoint("cp1")
    assert not store.claim_checkpoint("cp1")
    assert not store.claim_checkpoint("cp1", status="void")
    assert store.get_checkpoint("cp1") == checkpoint("cp1", status="resumed")
    assert not store.claim_checkpoint("nothing")


def test_a_claim_can_void_a_checkpoint(store):
    store.save_checkpoint(checkpoint("cp1"))
    assert store.claim_checkpoint("cp1", status="void")
    assert store.get_checkpoint("cp1")["status"] == "void"
    assert not store.claim_checkpoint("cp1")


def test_one_of_many_racing_threads_wins_a_claim(store):
    store.save_checkpoint(checkpoint("cp1"))
    racers = 16
    start = threading.Barrier(racers)
    wins = []

    def claim():
        start.wait()
        wins.append(store.claim_checkpoint("cp1"))

    threads = [threading.Thread(target=claim) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(wins) == [False] * (racers - 1) + [True]


# sessions


def test_touch_creates_a_session_and_merges_tags(store):
    store.touch_session("s1", {"user": "ann", "team": "a"})
    created = store.get_session("s1")
    assert created["id"] == "s1"
    assert created["tags"] == {"user": "ann", "team": "a"}
    assert created["messages"] == []
    assert created["createdAt"] <= created["updatedAt"]

    store.touch_session("s1", {"team": "b", "plan": "pro"})
    store.touch_session("s1")

    touched = store.get_session("s1")
    assert touched["tags"] == {"user": "ann", "team": "b", "plan": "pro"}
    assert touched["createdAt"] == created["createdAt"]
    assert touched["updatedAt"] >= created["updatedAt"]
    assert store.get_session("nobody") is None


def test_a_session_keeps_the_last_state_given(store):
    store.touch_session("s1")
    assert store.get_session("s1")["state"] == {}

    store.touch_session("s1", state={"plan": {"steps": ["knead", "bake"]}})
    store.touch_session("s1", {"user": "ann"})  # no state given: the session keeps its own

    assert store.get_session("s1")["state"] == {"plan": {"steps": ["knead", "bake"]}}
    store.touch_session("s1", state={})
    assert store.get_session("s1")["state"] == {}
    store.touch_session("s2", state={"fresh": True})  # a new session starts with the state given
    assert store.get_session("s2")["state"] == {"fresh": True}


def test_messages_accumulate_in_order(store):
    store.touch_session("s1")
    store.touch_session("s2")
    store.append_messages("s1", [{"role": "user", "content": "hi", "runId": "r1"}])
    store.append_messages("s2", [{"role": "user", "content": "other"}])
    store.append_messages(
        "s1",
        [
            {"role": "assistant", "content": "hello", "runId": "r1"},
            {"role": "tool", "content": "{}", "error": {"code": "TOOL_FAILED"}},
        ],
    )

    assert store.get_session("s1")["messages"] == [
        {"role": "user", "content": "hi", "runId": "r1"},
        {"role": "assistant", "content": "hello", "runId": "r1"},
        {"role": "tool", "content": "{}", "error": {"code": "TOOL_FAILED"}},
    ]
    assert store.get_session("s2")["messages"] == [{"role": "user", "content": "other"}]


def test_messages_for_an_unknown_session_are_dropped(store):
    store.append_messages("nobody", [{"role": "user", "content": "hi"}])
    assert store.get_session("nobody") is None
    assert store.list_sessions() == []
    store.touch_session("nobody")
    assert store.get_session("nobody")["messages"] == []


def test_list_sessions_by_tags_without_messages(store):
    store.touch_session("s1", {"user": "ann", "team": "a"})
    store.touch_session("s2", {"user": "bob", "team": "a"})
    store.touch_session("s3")
    store.append_messages("s1", [{"role": "user", "content": "hi"}])

    def ids(tags=None):
        return sorted(s["id"] for s in store.list_sessions(tags))

    assert ids() == ["s1", "s2", "s3"]
    assert ids({"team": "a"}) == ["s1", "s2"]
    assert ids({"team": "a", "user": "bob"}) == ["s2"]
    assert ids({"team": "b"}) == []
    (listed,) = store.list_sessions({"user": "ann"})
    assert set(listed) == {"id", "tags", "createdAt", "updatedAt"}


def test_delete_a_session_and_its_messages(store):
    store.touch_session("s1", {"user": "ann"})
    store.append_messages("s1", [{"role": "user", "content": "hi"}])

    assert store.delete_session("s1")
    assert not store.delete_session("s1")
    assert store.get_session("s1") is None

    store.touch_session("s1")
    assert store.get_session("s1")["messages"] == []
    assert store.get_session("s1")["tags"] == {}


def test_cleanup_by_idle_time_and_tags(store):
    store.touch_session("s1", {"team": "a"})
    store.touch_session("s2", {"team": "b"})
    store.touch_session("s3", {"team": "a"})
    store.append_messages("s1", [{"role": "user", "content": "hi"}])

    assert store.cleanup_sessions(older_than_days=1) == 0
    assert store.cleanup_sessions(older_than_days=-1, tags={"team": "a"}) == 2
    assert [s["id"] for s in store.list_sessions()] == ["s2"]

    store.touch_session("s1")
    assert store.get_session("s1")["messages"] == []
    assert store.cleanup_sessions() == 2
    assert store.list_sessions() == []


def test_last_seqs_of_many_runs_in_one_read(store):
    store.append_crumbs("r1", [crumb("r1", 1), crumb("r1", 2)])
    store.append_crumbs("r2", [crumb("r2", 1)])
    many = [f"none{n}" for n in range(1200)]  # more than one statement's worth on SQLite
    assert store.last_seqs(["r1", *many, "r2"]) == {"r1": 2, "r2": 1}
    assert store.last_seqs([]) == {}


# MCP sessions


def mcp_session(session_id, **fields):
    return {"id": session_id, "protocolVersion": "2025-11-25", "createdAt": OLD, "owner": "alice", "usedAt": OLD,
            **fields}  # fmt: skip


def test_it_plays_the_mcp_bridges_role(store):
    from bread_sync.protocols.mcp.plugin import McpSessionStore

    assert missing_methods(store, McpSessionStore) == []


def test_create_and_get_an_mcp_session(store):
    assert store.get_mcp_session("m1") is None
    assert store.create_mcp_session(mcp_session("m1")) is True
    assert store.get_mcp_session("m1") == mcp_session("m1")


def test_creating_an_existing_mcp_session_changes_nothing(store):
    store.create_mcp_session(mcp_session("m1"))
    assert store.create_mcp_session(mcp_session("m1", protocolVersion="2024-11-05")) is False
    assert store.get_mcp_session("m1")["protocolVersion"] == "2025-11-25"


def test_a_deleted_mcp_session_is_gone_and_deletes_once(store):
    store.create_mcp_session(mcp_session("m1"))
    store.create_mcp_session(mcp_session("m2"))
    assert store.delete_mcp_session("m1") is True
    assert store.get_mcp_session("m1") is None
    assert store.delete_mcp_session("m1") is False
    assert store.get_mcp_session("m2") == mcp_session("m2")


# push subscriptions (the A2A bridge's push notifications)


def push(task_id="t1", config_id="c1", **fields):
    return {"taskId": task_id, "id": config_id, "mount": "/a2a", "url": "https://hook.example/a", "token": "tok",
            "authentication": {"schemes": ["Bearer"]}, **fields}  # fmt: skip


def test_it_keeps_push_subscriptions(store):
    from bread_sync.webhooks import PushStore, records_pushes

    assert records_pushes(store)
    assert missing_methods(store, PushStore) == []


def test_a_push_subscription_starts_undelivered_and_due(store):
    store.save_push_config(push())
    (config,) = store.list_push_configs("t1")
    assert {k: config[k] for k in ("taskId", "id", "mount", "url", "token", "authentication")} == push()
    assert (config["delivered"], config["attempts"], config["done"], config["claimedBy"]) == (0, 0, False, None)
    assert store.list_push_configs("t2") == []


def test_saving_again_replaces_the_target_and_keeps_the_deliveries(store):
    store.save_push_config(push())
    claimed = store.claim_push("me", now=10**10, until=10**10 + 30)
    assert store.settle_push("t1", "c1", "me", delivered=3)
    store.save_push_config(push(url="https://hook.example/b", token=None, authentication=None))
    (config,) = store.list_push_configs("t1")
    assert claimed["id"] == "c1" and config["url"] == "https://hook.example/b" and config["token"] is None
    assert config["delivered"] == 3 and config["authentication"] is None


def test_a_subscription_is_deleted_once(store):
    store.save_push_config(push())
    store.save_push_config(push(config_id="c2"))
    assert [c["id"] for c in store.list_push_configs("t1")] == ["c1", "c2"]
    assert store.delete_push_config("t1", "c1") and not store.delete_push_config("t1", "c1")
    assert [c["id"] for c in store.list_push_configs("t1")] == ["c2"]


def test_a_claim_takes_a_due_subscription_once_until_it_is_settled_or_expires(store):
    store.save_push_config(push())
    now = 10**10
    claimed = store.claim_push("a", now, now + 30)
    assert (claimed["claimedBy"], claimed["claimedUntil"]) == ("a", now + 30)
    assert store.claim_push("b", now + 1, now + 31) is None  # held
    assert not store.settle_push("t1", "c1", "b", delivered=1)  # not b's
    assert store.settle_push("t1", "c1", "a", delivered=1, attempts=0, nextAttemptAt=now + 5, lastError=None)
    assert store.claim_push("b", now + 1, now + 31) is None  # not due yet
    again = store.claim_push("b", now + 5, now + 35)
    assert again["delivered"] == 1 and again["claimedBy"] == "b"
    assert store.claim_push("c", now + 36, now + 60)["claimedBy"] == "c"  # b's claim expired
    assert not store.settle_push("t1", "c1", "b", delivered=2)


def test_hastening_makes_a_subscription_waiting_for_news_due_but_not_one_backing_off(store):
    store.save_push_config(push())
    store.save_push_config(push(config_id="c2"))
    now = 10**10
    for config_id, attempts in (("c1", 0), ("c2", 1)):
        assert store.claim_push("a", now, now + 30)["id"] == config_id
        assert store.settle_push("t1", config_id, "a", attempts=attempts, nextAttemptAt=now + 60)
    assert store.claim_push("a", now + 1, now + 31) is None
    assert store.hasten_push("t1", now + 1) and not store.hasten_push("t2", now + 1)
    assert store.claim_push("a", now + 1, now + 31)["id"] == "c1"
    assert store.claim_push("a", now + 1, now + 31) is None  # c2 keeps its back-off
    assert not store.hasten_push("t1", now + 2)  # c1 is claimed: its sender settles it


def test_a_done_subscription_is_never_claimed(store):
    store.save_push_config(push())
    store.claim_push("a", 10**10, 10**10 + 30)
    assert store.settle_push("t1", "c1", "a", done=True)
    assert store.claim_push("a", 10**11, 10**11 + 30) is None
    assert store.list_push_configs("t1")[0]["done"] is True


def test_settle_refuses_other_fields(store):
    store.save_push_config(push())
    store.claim_push("a", 10**10, 10**10 + 30)
    with pytest.raises(ValueError, match="url"):
        store.settle_push("t1", "c1", "a", url="https://elsewhere")


def test_one_of_many_racing_threads_claims_a_subscription(store):
    store.save_push_config(push())
    won, barrier = [], threading.Barrier(8)

    def race(owner):
        barrier.wait()
        if store.claim_push(owner, 10**10, 10**10 + 30) is not None:
            won.append(owner)

    threads = [threading.Thread(target=race, args=(f"o{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(won) == 1


def test_touching_an_mcp_session_moves_its_used_at_only(store):
    store.create_mcp_session(mcp_session("m1"))
    assert store.touch_mcp_session("m1", "2030-01-01T00:00:00.000Z") is True
    assert store.get_mcp_session("m1") == mcp_session("m1", usedAt="2030-01-01T00:00:00.000Z")
    assert store.touch_mcp_session("nobody", "2030-01-01T00:00:00.000Z") is False


def test_evicting_mcp_sessions_keeps_an_owners_newest_and_no_one_elses(store):
    for n in range(5):
        store.create_mcp_session(mcp_session(f"a{n}"))  # in this order: a0 is the oldest
        store.create_mcp_session(mcp_session(f"b{n}", owner="bob"))
    assert store.evict_mcp_sessions("alice", 2) == 3
    assert [n for n in range(5) if store.get_mcp_session(f"a{n}")] == [3, 4]
    assert all(store.get_mcp_session(f"b{n}") for n in range(5))
    assert store.evict_mcp_sessions("alice", 2) == 0


def test_expiring_mcp_sessions_deletes_those_unused_since_whoever_owns_them(store):
    store.create_mcp_session(mcp_session("old"))
    store.create_mcp_session(mcp_session("old-bob", owner="bob"))
    store.create_mcp_session(mcp_session("used", usedAt="2030-01-01T00:00:00.000Z"))
    assert store.expire_mcp_sessions("2025-01-01T00:00:00.000Z") == 2
    assert [store.get_mcp_session(i) is None for i in ("old", "old-bob", "used")] == [True, True, False]


def test_a_session_is_claimed_by_one_run_at_a_time(store):
    assert store.claim_session("s1", "r1") is None  # free: taken
    assert store.claim_session("s1", "r1") is None  # its holder again
    assert store.claim_session("s1", "r2") == "r1"  # busy: the holder
    assert store.claim_session("s1", "r2", take_from="r9") == "r1"  # only the holder named is replaced
    assert store.claim_session("s1", "r2", take_from="r1") is None  # a stale holder taken over
    assert store.claim_session("s1", "r1") == "r2"
    store.release_session("s1", "r2")
    assert store.claim_session("s1", "r3") is None
