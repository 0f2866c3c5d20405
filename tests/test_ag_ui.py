"""The AG-UI translator: real crumb streams of the demo agents in, conformant AG-UI events out."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from ag_ui import core

from bread_sync import BreadError
from bread_sync.protocols import ag_ui
from bread_sync.protocols.ag_ui import EMITTED_EVENT_TYPES, create_ag_ui_transformer, encode

from .ag_ui_rules import check_stream, decode_sse
from .demo_runs import DEMO_IDS, DEMO_RUNS, FRAMED_IDS, FRAMED_RUNS

E = core.EventType


def translate(crumbs, transformer=None) -> list[dict]:
    """Every crumb through one transformer, each event encoded and decoded as a client reads it."""
    transformer = transformer or create_ag_ui_transformer()
    return decode_sse("".join(encode(event) for crumb in crumbs for event in transformer(crumb)))


def types(events) -> list[str]:
    return [e["type"] for e in events]


@pytest.mark.parametrize(("agent", "given"), DEMO_RUNS, ids=DEMO_IDS)
def test_every_demo_agent_translates_to_a_conformant_stream(bread, agent, given):
    check_stream(translate(bread.run(agent, given)))


@pytest.mark.parametrize(("agent", "given"), FRAMED_RUNS, ids=FRAMED_IDS)
def test_frames_are_the_events_as_the_encoder_writes_them(bread, agent, given):
    # frames() splices a delta into its message's content frame: the same events, decoded.
    crumbs = list(bread.run(agent, given))
    by_model, by_frames = create_ag_ui_transformer(), create_ag_ui_transformer()
    framed = "".join(frame for crumb in crumbs for frame in by_frames.frames(crumb))
    assert decode_sse(framed) == translate(crumbs, by_model)
    assert [e["type"] for e in decode_sse(framed)].count("TEXT_MESSAGE_CONTENT") == sum(
        crumb["type"] == "text:delta" for crumb in crumbs
    )


def test_a_pipeline_translates_with_its_steps(bread):
    events = translate(bread.run_pipeline("draft-then-echo", {"topic": "rye"}))
    check_stream(events)
    assert {"type": "STEP_STARTED", "stepName": "writer"} in events
    assert {"type": "STEP_FINISHED", "stepName": "writer"} in events  # closed at the pause


def test_run_started_carries_the_session_and_protocol_version(bread):
    events = translate(bread.run("echo", "hi", session="thread-1"))
    assert events[0]["threadId"] == "thread-1" and events[0]["protocolVersion"] == core.PROTOCOL_VERSION
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": events[0]["runId"], "result": "hi"}


def test_the_ids_given_replace_the_runs_own(bread):
    events = translate(bread.run("echo", "hi"), create_ag_ui_transformer(thread_id="t", run_id="client-run"))
    assert (events[0]["threadId"], events[0]["runId"]) == ("t", "client-run")
    assert (events[-1]["threadId"], events[-1]["runId"]) == ("t", "client-run")


def test_text_opens_on_the_first_delta_and_closes_before_a_tool_call(bread):
    events = translate(bread.run("writer", {"topic": "cats"}))
    assert types(events)[:3] == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    end = types(events).index("TEXT_MESSAGE_END")
    start = events[end + 1]
    assert start["type"] == "TOOL_CALL_START" and start["toolCallName"] == "publish"
    assert start["parentMessageId"] == events[1]["messageId"]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Drafting a post about cats."


def test_streamed_tool_input_is_sent_as_it_streams_and_tool_call_adds_nothing(bread):
    events = translate(bread.run("writer", {"topic": "cats"}))
    calls = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert types(calls) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert json.loads(calls[1]["delta"]) == {"title": "cats"}


def test_a_tool_call_without_streamed_input_is_sent_whole():
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
        {"type": "text:delta", "runId": "r", "delta": "Let me look."},
        {"type": "tool:call", "runId": "r", "toolCallId": "t1", "toolName": "look", "input": {"q": "x"}},
        {"type": "tool:result", "runId": "r", "toolCallId": "t1", "toolName": "look", "output": {"hits": 2}},
        {"type": "agent:run:end", "runId": "r", "output": "done"},
    ]
    events = translate(crumbs)
    check_stream(events)
    assert types(events)[3:8] == [
        "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    ]  # fmt: skip
    assert json.loads(events[5]["delta"]) == {"q": "x"}
    assert json.loads(events[7]["content"]) == {"hits": 2}


def test_a_tool_error_is_a_result_whose_content_is_the_error_as_json(bread):
    paused = bread.run("writer", {"topic": "cats"}, mode="sync")
    resumed = bread.resume(paused.checkpoint["checkpointId"], {"approved": False})
    events = translate(resumed, create_ag_ui_transformer(thread_id="t"))
    check_stream(events)
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert isinstance(result["content"], str)
    assert json.loads(result["content"])["error"]["code"] == "TOOL_DENIED"
    assert set(json.loads(result["content"])["error"]) == {"code", "message"}


def test_a_pause_closes_the_message_and_ends_the_run_with_an_interrupt(bread):
    events = translate(bread.run("writer", {"topic": "cats"}))
    assert types(events)[-2:] == ["TOOL_CALL_END", "RUN_FINISHED"]
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    assert events[-1]["outcome"]["type"] == "interrupt"
    assert interrupt["reason"] == "approval" and interrupt["id"].startswith("cp_")
    assert interrupt["responseSchema"] == ag_ui.APPROVAL_SCHEMA
    assert interrupt["metadata"] == {"toolName": "publish", "input": {"title": "cats"}}
    assert isinstance(interrupt["message"], str) and interrupt["toolCallId"] == events[-3]["toolCallId"]


def test_an_input_pause_asks_the_question(bread):
    schema = {"type": "string"}
    events = translate(bread.run("interviewer", None), create_ag_ui_transformer(response_schema=lambda crumb: schema))
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "input" and interrupt["message"] == "What is your name?"
    assert interrupt["responseSchema"] == schema


def test_a_continuation_opens_with_run_started(bread):
    transformer = create_ag_ui_transformer()
    paused = translate(bread.run("interviewer", None), transformer)
    checkpoint = paused[-1]["outcome"]["interrupts"][0]["id"]
    resumed = translate(bread.resume(checkpoint, "Ada"), transformer)
    check_stream(paused + resumed)
    assert resumed[0] == {**paused[0]}  # the same thread and run
    assert resumed[-1]["result"] == "Thanks, Ada."


def test_a_loop_accretes_one_state_shape_and_steps_each_iteration(bread):
    events = translate(bread.run("counter", {"until": 2}))
    snapshots = [e["snapshot"]["loop"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert [s["phase"] for s in snapshots] == ["start", "iteration:start", "iteration:end"] * 1 + [
        "iteration:start", "iteration:end", "end",
    ]  # fmt: skip
    assert all(s["maxIterations"] == 10 and s["loopId"] == snapshots[0]["loopId"] for s in snapshots)
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps == [f"{snapshots[0]['loopId']}_iteration_{n}" for n in (1, 2)]


def test_subagents_and_tasks_are_steps_with_their_state(bread):
    events = translate(bread.run("manager", None))
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps[0] == "subagent_echo" and steps[1].startswith("task_task_")
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots[1]["subagent"] == {
        "parentAgentId": "manager", "subagentId": "echo", "status": "completed", "output": "hello from the manager",
    }  # fmt: skip
    task = snapshots[3]["task"]
    assert task["taskId"] == "word-count" and task["status"] == "completed" and task["model"] == "script"
    assert set(task) <= {"taskRunId", "taskId", "model", "status", "durationMs", "usage", "error"}


def test_each_snapshot_carries_the_clients_state_with_breads_keys_winning(bread):
    client = {"plan": ["knead", "bake"], "loop": "the client's own", "task": 0}
    transformer = create_ag_ui_transformer(state=client)
    snapshots = [e["snapshot"] for e in translate(bread.run("counter", {"until": 1}), transformer)
                 if e["type"] == "STATE_SNAPSHOT"]  # fmt: skip
    assert snapshots and all(s["plan"] == ["knead", "bake"] and s["task"] == 0 for s in snapshots)
    assert all(isinstance(s["loop"], dict) and s["loop"]["loopId"] for s in snapshots)
    assert client["loop"] == "the client's own"  # the client's state given is not changed


def test_a_snapshot_keeps_breads_keys_seen_before_it(bread):
    # A snapshot replaces the client's whole state: the task's keeps what the subagent's said.
    events = translate(bread.run("manager", None), create_ag_ui_transformer(state={"plan": "x"}))
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert set(snapshots[0]) == {"plan", "subagent"}
    assert set(snapshots[-1]) == {"plan", "subagent", "task"}
    assert snapshots[-1]["subagent"]["status"] == "completed" and snapshots[-1]["task"]["status"] == "completed"


def test_a_generated_file_is_a_custom_event(bread):
    events = translate(bread.run("artist", None))
    (custom,) = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "FILE_GENERATED" and custom["value"]["mimeType"] == "image/png"
    assert set(custom["value"]) == {"uri", "mimeType", "name"}


def test_a_file_reference_echoed_as_output_is_announced_before_run_finished():
    output = {"uri": "/files/f1", "mimeType": "text/plain"}
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": None},
        {"type": "agent:run:end", "runId": "r", "output": output},
    ]
    events = translate(crumbs)
    assert types(events) == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    assert events[1]["value"] == output


def test_an_error_closes_everything_open_then_run_error():
    crumbs = [
        {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": None},
        {"type": "pipeline:step:start", "runId": "r", "pipelineId": "p", "stepName": "one", "index": 0},
        {"type": "text:delta", "runId": "r", "delta": "partial"},
        {"type": "tool:input:start", "runId": "r", "toolCallId": "t1", "toolName": "x"},
        {"type": "agent:error", "runId": "r", "error": BreadError("MODEL_ERROR", "the model went away")},
        {"type": "text:delta", "runId": "r", "delta": "too late"},
    ]
    events = translate(crumbs)
    check_stream(events)
    assert types(events)[-5:] == ["TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_END", "STEP_FINISHED", "RUN_ERROR"]
    assert events[-1] == {"type": "RUN_ERROR", "message": "the model went away", "code": "MODEL_ERROR"}


def test_a_failure_before_the_run_is_a_lone_run_error():
    error = {"name": "BreadError", "code": "AGENT_NOT_FOUND", "message": "no agent 'x'", "context": None}
    events = translate([{"type": "agent:error", "runId": "r", "error": error}])
    check_stream(events)
    assert types(events) == ["RUN_ERROR"]


def test_nothing_follows_the_runs_end(bread):
    transformer = create_ag_ui_transformer()
    translate(bread.run("echo", "hi"), transformer)
    assert transformer({"type": "text:delta", "runId": "r", "delta": "x"}) == []
    assert transformer({"type": "agent:run:end", "runId": "r", "output": None}) == []


def test_a_stream_joined_late_still_opens_with_run_started():
    events = translate([{"type": "text:delta", "runId": "r", "delta": "mid"}, {"type": "agent:run:end", "runId": "r"}])
    check_stream(events)
    assert events[0]["runId"] == "r"


def test_a_tool_progress_is_a_custom_event_with_what_the_crumb_says():
    progress = {"toolCallId": "t", "progress": 1, "message": "half"}
    events = translate([{"type": "tool:progress", "runId": "r", **progress}])
    [custom] = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "TOOL_PROGRESS" and custom["value"] == progress


def test_an_unknown_crumb_type_is_skipped():
    assert create_ag_ui_transformer()({"type": "something:new", "runId": "r"}) == []


def test_every_event_the_demo_emits_is_on_the_pinned_surface(bread):
    seen = set()
    for agent, given in DEMO_RUNS:
        seen.update(types(translate(bread.run(agent, given))))
    assert seen <= {t.value for t in EMITTED_EVENT_TYPES}


def test_emitted_event_surface_is_pinned():
    """Adding an event type to the bridge is a decision: this list, the docs and the clients'
    reading of it change together. The package's event classes are read from its source."""
    pinned = {
        E.RUN_STARTED, E.RUN_FINISHED, E.RUN_ERROR,
        E.TEXT_MESSAGE_START, E.TEXT_MESSAGE_CONTENT, E.TEXT_MESSAGE_END,
        E.TOOL_CALL_START, E.TOOL_CALL_ARGS, E.TOOL_CALL_END, E.TOOL_CALL_RESULT,
        E.STEP_STARTED, E.STEP_FINISHED, E.STATE_SNAPSHOT, E.CUSTOM,
        E.REASONING_START, E.REASONING_MESSAGE_START, E.REASONING_MESSAGE_CONTENT, E.REASONING_MESSAGE_END,
        E.REASONING_END,
    }  # fmt: skip
    assert EMITTED_EVENT_TYPES == pinned
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in Path(ag_ui.__file__).parent.glob("*.py")]
    used = {
        alias.name
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "ag_ui.core"
        for alias in node.names
        if alias.name.endswith("Event") and alias.name != "BaseEvent"
    }
    assert {getattr(core, name).model_fields["type"].default for name in used} == pinned


def test_reasoning_segments_are_reasoning_messages_of_their_own():
    run = [
        {"type": "agent:run:start", "runId": "r", "agentId": "a", "sessionId": "s", "input": "?"},
        {"type": "reasoning:delta", "runId": "r", "delta": "Think"},
        {"type": "reasoning:delta", "runId": "r", "delta": "ing."},
        {"type": "text:delta", "runId": "r", "delta": "Yes."},
        {"type": "reasoning:delta", "runId": "r", "delta": "More."},
        {"type": "agent:run:end", "runId": "r", "output": "Yes."},
    ]

    events = translate(run)

    check_stream(events)
    assert types(events) == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "RUN_FINISHED",
    ]
    assert [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"] == ["Think", "ing.", "More."]
    assert events[2]["role"] == "reasoning" and events[2]["messageId"] == "rsn_r_1"


def test_events_encode_as_bare_sse_frames():
    (event,) = create_ag_ui_transformer()({"type": "agent:error", "runId": "r", "error": BreadError("X", "y")})
    assert encode(event) == 'data: {"type":"RUN_ERROR","message":"y","code":"X"}\n\n'


CARRIED_ON = [
    {"type": "agent:run:start", "runId": "r", "sessionId": "s", "agentId": "a", "input": "x"},
    {"type": "tool:result", "runId": "r", "toolCallId": "t1", "toolName": "x", "output": 1},
    {"type": "text:delta", "runId": "r", "delta": "Lost"},
    {"type": "agent:run:continued", "runId": "r", "reason": "owner-died", "afterSeq": 2, "attempt": 1},
    {"type": "text:delta", "runId": "r", "delta": "Found"},
    {"type": "agent:run:end", "runId": "r", "output": "Found"},
]


def test_a_continuation_closes_the_message_of_the_lost_text_and_the_new_call_s_text_is_another():
    events = translate(CARRIED_ON)
    check_stream(events)
    messages = [e for e in events if e["type"].startswith("TEXT_MESSAGE")]
    lost, found = messages[0]["messageId"], messages[3]["messageId"]
    assert [(e["type"], e["messageId"], e.get("delta")) for e in messages] == [
        ("TEXT_MESSAGE_START", lost, None),
        ("TEXT_MESSAGE_CONTENT", lost, "Lost"),
        ("TEXT_MESSAGE_END", lost, None),
        ("TEXT_MESSAGE_START", found, None),
        ("TEXT_MESSAGE_CONTENT", found, "Found"),
        ("TEXT_MESSAGE_END", found, None),
    ]
    assert lost != found


def test_a_stream_resumed_after_a_continuation_names_the_new_message_as_the_live_one_did():
    live = [e for e in translate(CARRIED_ON) if e["type"] == "TEXT_MESSAGE_START"][-1]["messageId"]
    resumed = create_ag_ui_transformer()
    for crumb in [CARRIED_ON[0], CARRIED_ON[1], CARRIED_ON[3]]:  # the log: it never had the lost text
        resumed(crumb)
    events = translate(CARRIED_ON[4:], resumed)
    assert events[0] == {"type": "TEXT_MESSAGE_START", "messageId": live, "role": "assistant"}
