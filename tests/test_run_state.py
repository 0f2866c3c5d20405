"""Bread.run's ``state`` and ``context``: what tools (``ctx.state``, ``ctx.context``) and model
providers (``request.session_state``, ``request.context``) see, and the state the session keeps."""

from __future__ import annotations

import json

import pytest

from bread_sync import BreadError

from .state_config import config as state_config

CONTEXT = [{"description": "the user's timezone", "value": "Europe/Paris"}]


@pytest.fixture(params=["memory", "sqlite"])
def bread(make_bread, request):
    return make_bread(state_config(), store=request.param)


def seen_by_the_tool(result) -> dict:
    (found,) = [crumb["output"] for crumb in result.crumbs if crumb["type"] == "tool:result"]
    return found


def test_a_tool_and_a_provider_see_the_state_and_context_given(bread):
    state = {"plan": {"steps": ["knead", "bake"]}}
    tool = bread.run("peek", "go", session="s1", state=state, context=CONTEXT, mode="sync")
    model = bread.run("mirror", "go", session="s2", state=state, context=CONTEXT, mode="sync")
    assert seen_by_the_tool(tool) == {"state": state, "context": CONTEXT}
    assert json.loads(model.output) == {"state": state, "context": CONTEXT}


def test_the_state_given_is_the_sessions_and_a_later_run_has_it(bread):
    bread.run("peek", "go", session="s1", state={"plan": "rye"}, context=CONTEXT, mode="sync")
    assert bread.store.get_session("s1")["state"] == {"plan": "rye"}

    later = bread.run("peek", "again", session="s1", mode="sync")
    assert seen_by_the_tool(later) == {"state": {"plan": "rye"}, "context": []}  # context is per run
    assert json.loads(bread.run("mirror", "go", session="s1", mode="sync").output)["state"] == {"plan": "rye"}

    bread.run("peek", "reset", session="s1", state={}, mode="sync")  # an empty state given replaces it too
    assert bread.store.get_session("s1")["state"] == {}


def test_a_pipelines_run_has_its_sessions_state(bread):
    bread.run("peek", "go", session="s1", state={"plan": "rye"}, mode="sync")
    assert seen_by_the_tool(bread.run_pipeline("peek-step", "go", session="s1", mode="sync")) == {
        "state": {"plan": "rye"}, "context": [],
    }  # fmt: skip


def test_a_new_session_has_an_empty_state(bread):
    assert seen_by_the_tool(bread.run("peek", "go", mode="sync")) == {"state": {}, "context": []}


def test_a_run_reads_no_session_whose_id_its_opening_made(bread, monkeypatch):
    # Nothing can be stored under an id made for the run: a read would be a statement for nothing.
    read, get_session = [], bread.store.get_session
    monkeypatch.setattr(
        bread.store, "get_session", lambda session_id: read.append(session_id) or get_session(session_id)
    )
    made = bread.run("peek", "go", session={"tags": {"k": "v"}}, mode="sync")
    assert bread.run("peek", "go", mode="sync").status == made.status == "completed"
    assert read == []
    assert seen_by_the_tool(bread.run("peek", "again", session="s1", state={"v": 1}, mode="sync"))["state"] == {"v": 1}
    assert seen_by_the_tool(bread.run("peek", "later", session="s1", mode="sync"))["state"] == {"v": 1}
    assert read == ["s1", "s1"]


def test_a_continuation_has_the_sessions_state_or_the_one_its_resume_gives(bread):
    first = bread.run("guarded", "go", session="s1", state={"v": 1}, mode="sync")
    resumed = bread.resume(first.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert seen_by_the_tool(resumed) == {"state": {"v": 1}, "context": []}

    second = bread.run("guarded", "go", session="s1", mode="sync")
    given = bread.resume(second.checkpoint["checkpointId"], {"approved": True}, state={"v": 2}, context=CONTEXT,
                         mode="sync")  # fmt: skip
    assert seen_by_the_tool(given) == {"state": {"v": 2}, "context": CONTEXT}
    assert bread.store.get_session("s1")["state"] == {"v": 2}


@pytest.mark.parametrize(
    "given",
    [{"state": ["not", "an", "object"]}, {"state": "x"}, {"context": {"a": "b"}}, {"context": [{"value": "x"}]},
     {"context": ["text"]}],
)  # fmt: skip
def test_a_state_that_is_no_object_or_a_malformed_context_is_refused_before_any_run(bread, given):
    with pytest.raises(BreadError) as caught:
        bread.run("peek", "go", session="s1", **given)
    assert caught.value.code == "INVALID_REQUEST"
    assert bread.store.list_runs() == [] and bread.store.get_session("s1") is None


def test_an_unknown_agent_or_checkpoint_is_told_before_a_malformed_state(bread):
    with pytest.raises(BreadError) as caught:
        bread.run("nobody", "go", state="x")
    assert caught.value.code == "AGENT_NOT_FOUND"
    with pytest.raises(BreadError) as caught:
        bread.resume("cp_nothing", {"approved": True}, state="x")
    assert caught.value.code == "CHECKPOINT_NOT_FOUND"
