"""Bad input gets a clear error and loses nothing."""

from pathlib import Path

import pytest

from bread_sync import Agent, BreadError, Config
from bread_sync.errors import ALL_CODES, HTTP_STATUS


def assert_raises_code(code, fn, *args, **kwargs):
    with pytest.raises(BreadError) as caught:
        fn(*args, **kwargs)
    assert caught.value.code == code
    return caught.value


def test_an_unknown_agent_is_agent_not_found_and_logs_nothing(bread):
    assert_raises_code("AGENT_NOT_FOUND", bread.run, "nobody", "hi")
    assert bread.store.list_runs() == []


@pytest.mark.parametrize("bad", [None, {}, {"topic": 3}, 7, [1]])
def test_input_failing_the_schema_is_input_invalid_before_any_crumb(bread, bad):
    error = assert_raises_code("INPUT_INVALID", bread.run, "writer", bad)
    assert "topic" in error.message or "input" in error.message
    assert bread.store.list_runs() == []


def test_a_plain_text_is_the_writers_topic_and_the_first_integer_of_one_the_slow_count(bread):
    paused = bread.run("writer", "bread", mode="sync")
    assert paused.status == "paused" and paused.checkpoint["input"] == {"title": "bread"}
    ticks = bread.run("slow", "give me 3 ticks, then 9", mode="sync")
    assert ticks.output == "tick 1 tick 2 tick 3 "
    error = assert_raises_code("INPUT_INVALID", bread.run, "slow", "many ticks")
    assert "integer" in error.message


def test_a_plain_texts_first_integer_is_the_counters_until(bread):
    counted = bread.run("counter", "count to 2, please", mode="sync")
    assert [c["iteration"] for c in counted.crumbs if c["type"] == "loop:iteration:end"] == [1, 2]
    error = assert_raises_code("INPUT_INVALID", bread.run, "counter", "count a while")
    assert "integer" in error.message
    assert [record["id"] for record in bread.store.list_runs()] == [counted.run_id]  # none for the refused


def test_an_unknown_provider_is_unknown_provider(make_bread):
    bread = make_bread(Config(agents=[Agent(id="lost", model="nowhere:model")]))
    assert_raises_code("UNKNOWN_PROVIDER", bread.run, "lost", "hi")
    assert bread.store.list_runs() == []


def test_an_unknown_skill_is_skill_not_found(bread):
    assert_raises_code("SKILL_NOT_FOUND", bread.run, "echo", "hi", skill="juggling")


def test_skills_load_from_skill_md_and_reach_the_model(make_bread, tmp_path: Path):
    folder = tmp_path / "agent"
    (folder / "skills" / "haiku").mkdir(parents=True)
    (folder / "prompt.md").write_text("You are terse.")
    (folder / "skills" / "haiku" / "SKILL.md").write_text(
        "---\nname: haiku\ndescription: Answer in a haiku.\n---\nThree lines: 5, 7, 5 syllables.\n"
    )
    seen = []

    class Spy:
        name = "spy"

        def stream(self, request):
            seen.append(request.system)
            return iter(())

    agent = Agent(id="poet", model=Spy(), folder=folder)
    assert agent.skills["haiku"].description == "Answer in a haiku."
    make_bread(Config(agents=[agent])).run("poet", "hi", skill="haiku", mode="sync")
    assert seen == ["You are terse.\n\n# Skill: haiku\n\nThree lines: 5, 7, 5 syllables."]


def test_a_run_id_starts_one_run_and_a_retry_attaches_to_it(bread):
    first = bread.run("echo", "hi there", run_id="r", mode="sync")
    again = bread.run("echo", "something else", run_id="r", mode="sync")
    assert again.output == first.output == "hi there"
    assert [f.type for f in bread.store.get_crumbs("r")].count("agent:run:start") == 1
    assert_raises_code("RUN_ID_CONFLICT", bread.run, "writer", {"topic": "x"}, run_id="r")


def test_a_bad_session_is_invalid_request(bread):
    assert_raises_code("INVALID_REQUEST", bread.run, "echo", "hi", session={"tags": {"a": 1}})
    assert_raises_code("INVALID_REQUEST", bread.run, "echo", "hi", session=["s"])


def test_a_failing_before_run_logs_a_start_then_one_error(make_bread):
    def broken(data, ctx):
        raise ValueError("/srv/app/secret.py: bad")

    bread = make_bread(Config(agents=[Agent(id="broken", model="echo", before_run=broken)]))
    result = bread.run("broken", "hi", mode="sync")
    assert result.status == "failed" and result.error.code == "INTERNAL"
    assert "/srv" not in result.error.message
    assert [f.type for f in bread.store.get_crumbs(result.run_id)] == ["agent:run:start", "agent:error"]


def test_invalid_json_output_is_a_clear_error(make_bread):
    bread = make_bread(Config(agents=[Agent(id="json", model="echo", output="json")]))
    assert bread.run("json", '{"ok": true}', mode="sync").output == {"ok": True}
    result = bread.run("json", "not json", mode="sync")
    assert result.error.code == "OUTPUT_INVALID"


def test_every_code_has_a_status_or_is_a_stream_only_code():
    stream_only = {
        "RUN_CANCELLED",
        "RUN_INTERRUPTED",
        "RUN_TIMEOUT",
        "TOOL_DENIED",
        "TOOL_FAILED",
        "TOOL_OUTCOME_UNKNOWN",
        "INTERNAL",
        "MODEL_ERROR",
        "MODEL_RATE_LIMITED",
        "MODEL_OVERLOADED",
        "MODEL_CONTEXT_TOO_LONG",
        "MODEL_AUTH_FAILED",
        "OUTPUT_INVALID",
    }
    assert set(ALL_CODES) - set(HTTP_STATUS) <= stream_only
    assert BreadError("AGENT_NOT_FOUND", "x").to_body() == {"error": {"code": "AGENT_NOT_FOUND", "message": "x"}}
