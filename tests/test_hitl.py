"""Pausing for a human, checkpoints, and resuming from the store alone."""

import threading

import pytest

from bread_sync import Agent, BreadError, Config
from bread_sync.demo import config as demo_config
from bread_sync.models import script
from bread_sync.models.script import say
from bread_sync.stores import memory


def pause_writer(bread, **kwargs):
    result = bread.run("writer", {"topic": "bread"}, mode="sync", **kwargs)
    assert result.status == "paused"
    return result


def test_sync_mode_returns_a_paused_result_with_its_checkpoint(bread):
    result = pause_writer(bread)
    assert result.checkpoint["kind"] == "approval"
    assert result.checkpoint["toolName"] == "publish"
    assert result.checkpoint["input"] == {"title": "bread"}
    record = bread.store.get_run(result.run_id)
    assert record["status"] == "paused" and record["checkpointId"] == result.checkpoint["checkpointId"]


def test_the_checkpoint_holds_what_a_continuation_needs(bread):
    result = pause_writer(bread, session={"id": "s1", "tags": {"user": "42"}})
    checkpoint = bread.store.get_checkpoint(result.checkpoint["checkpointId"])
    log = bread.store.get_crumbs(result.run_id)
    stack = checkpoint["stack"]
    assert checkpoint["version"] == 1 and checkpoint["status"] == "pending"
    assert checkpoint["runId"] == result.run_id and checkpoint["sessionId"] == "s1"
    assert checkpoint["nextSeq"] == log[-1].seq + 1
    assert stack["kind"] == "agent" and stack["agentId"] == "writer" and stack["input"] == {"topic": "bread"}
    assert [m["role"] for m in stack["messages"]] == ["user", "assistant"]
    pending = [{"id": result.checkpoint["toolCallId"], "name": "publish", "input": {"title": "bread"}}]
    assert stack["pending"] == pending
    assert stack["modelState"] == {"step": 2}
    assert stack["child"] is None


def test_a_new_bread_on_the_same_store_resumes_under_the_same_run(make_bread):
    store = memory.store()
    first = make_bread(store=store)
    paused = pause_writer(first)
    first.close()
    second = make_bread(store=store)
    resumed = second.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert resumed.run_id == paused.run_id and resumed.output == "Published."
    assert resumed.crumbs[0]["type"] == "human:resumed"
    assert resumed.crumbs[0]["response"] == {"approved": True}
    assert store.get_run(paused.run_id)["status"] == "completed"
    seqs = [f.seq for f in store.get_crumbs(paused.run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_checkpoint_resumes_once(bread):
    checkpoint_id = pause_writer(bread).checkpoint["checkpointId"]
    bread.resume(checkpoint_id, {"approved": True}, mode="sync")
    with pytest.raises(BreadError) as caught:
        bread.resume(checkpoint_id, {"approved": True}, mode="sync")
    assert caught.value.code == "CHECKPOINT_ALREADY_RESUMED"


def test_racing_resumes_have_exactly_one_winner(make_bread):
    store = memory.store()
    paused = pause_writer(make_bread(store=store))
    breads = [make_bread(store=store) for _ in range(8)]
    barrier = threading.Barrier(len(breads))
    outcomes = []

    def resume(b):
        barrier.wait()
        try:
            outcomes.append(b.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync").status)
        except BreadError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=resume, args=(b,)) for b in breads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(outcomes) == ["CHECKPOINT_ALREADY_RESUMED"] * 7 + ["completed"]
    assert [f.type for f in store.get_crumbs(paused.run_id)].count("human:resumed") == 1


@pytest.mark.parametrize("response", [None, {}, {"approved": "yes"}, ["approved"]])
def test_a_malformed_approval_is_rejected_without_burning_the_checkpoint(bread, response):
    checkpoint_id = pause_writer(bread).checkpoint["checkpointId"]
    with pytest.raises(BreadError) as caught:
        bread.resume(checkpoint_id, response)
    assert caught.value.code == "INVALID_REQUEST"
    assert bread.resume(checkpoint_id, {"approved": True}, mode="sync").output == "Published."


@pytest.mark.parametrize("response", [{"approved": True}, {"approved": False}, 42, {"name": "Ada"}])
def test_an_answer_that_does_not_fit_an_input_pause_keeps_the_checkpoint(bread, response):
    paused = bread.run("interviewer", None, mode="sync")
    checkpoint_id = paused.checkpoint["checkpointId"]
    with pytest.raises(BreadError) as caught:
        bread.resume(checkpoint_id, response)
    assert caught.value.code == "INPUT_INVALID"
    assert bread.store.get_checkpoint(checkpoint_id)["status"] == "pending"
    assert bread.resume(checkpoint_id, {"answer": "Ada"}, mode="sync").output == "Thanks, Ada."


def test_an_input_tool_without_a_response_schema_takes_any_answer_but_an_approval(make_bread):
    from bread_sync import Agent, Config, input_tool
    from bread_sync.models.script import call, provider, say

    asker = Agent(id="asker", model=provider([call("ask", {}), lambda convo: say(repr(convo.last_tool_output))]),
                  tools=[input_tool("ask")])  # fmt: skip
    bread = make_bread(Config(agents=[asker]))
    first = bread.run("asker", None, mode="sync").checkpoint["checkpointId"]
    with pytest.raises(BreadError) as caught:
        bread.resume(first, {"approved": True})
    assert caught.value.code == "INPUT_INVALID"
    assert bread.resume(first, {"approved": True, "why": "it asked"}, mode="sync").output == (
        "{'approved': True, 'why': 'it asked'}"
    )


def test_an_unknown_checkpoint_is_not_found(bread):
    with pytest.raises(BreadError) as caught:
        bread.resume("cp_nope", {"approved": True})
    assert caught.value.code == "CHECKPOINT_NOT_FOUND"


def test_the_session_accumulates_history_across_runs(make_bread):
    seen = []

    def remember(convo):
        seen.append([(m["role"], m["content"]) for m in convo.messages])
        return say("ok")

    config = Config(agents=[Agent(id="memo", model=script.provider([remember]))])
    bread = make_bread(config)
    bread.run("memo", "first", session={"id": "s", "tags": {"a": "1"}}, mode="sync")
    bread.run("memo", "second", session={"id": "s", "tags": {"b": "2"}}, mode="sync")
    assert seen[1] == [("user", "first"), ("assistant", "ok"), ("user", "second")]
    session = bread.store.get_session("s")
    assert session["tags"] == {"a": "1", "b": "2"}
    assert [m["role"] for m in session["messages"]] == ["user", "assistant", "user", "assistant"]
    assert len({m["runId"] for m in session["messages"]}) == 2


def test_a_run_without_a_session_gets_a_fresh_one(bread):
    result = bread.run("echo", "hi", mode="sync")
    session_id = result.crumbs[0]["sessionId"]
    assert session_id and bread.store.get_session(session_id)["messages"][0]["content"] == "hi"


def test_before_run_rewrites_the_input_the_checkpoint_keeps(make_bread):
    config = demo_config()
    writer = next(a for a in config.agents if a.id == "writer")
    shouting = Agent(
        id="shouting-writer", model=writer.model, tools=writer.tools, input_schema=writer.input_schema,
        before_run=lambda data, ctx: {"topic": data["topic"].upper()},
    )  # fmt: skip
    bread = make_bread(config.model_copy(update={"agents": [shouting]}))
    result = bread.run("shouting-writer", {"topic": "bread"}, mode="sync")
    assert result.crumbs[0]["input"] == {"topic": "BREAD"}
    assert bread.store.get_checkpoint(result.checkpoint["checkpointId"])["stack"]["input"] == {"topic": "BREAD"}


def test_a_response_schema_pydantic_cannot_read_fails_when_the_tool_is_made():
    from pydantic.errors import PydanticSchemaGenerationError

    from bread_sync import input_tool

    with pytest.raises(PydanticSchemaGenerationError):
        input_tool("ask", response_schema=object())
