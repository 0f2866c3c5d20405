"""The A2A bridge without a server: the translator's event surface, the text template against
the SDK's models, the parts mapping, the inline-bytes arithmetic, a pause's answers."""

from __future__ import annotations

import base64
import json

import pytest

from bread_sync import crumbs as c
from bread_sync.crumbs import Frame, dumps
from bread_sync.errors import RUN_CANCELLED, BreadError
from bread_sync.protocols.a2a import A2ATranslator, a2a_server, v03, v10
from bread_sync.protocols.a2a.parts import BadParams, check_inline_sizes, decoded_size, pause_answer, run_input
from bread_sync.protocols.a2a.stream import StreamEncoder
from bread_sync.protocols.a2a.translator import ArtifactChunk, Status, TaskFold, TaskLog, TextChunk, input_parts
from bread_sync.wire.replay import ShownText

RUN = "run_1"
#: One crumb of every type, as a run writes them.
EVERY_CRUMB = [
    {"type": c.AGENT_RUN_START, "runId": RUN, "agentId": "a", "sessionId": "s"},
    {"type": c.AGENT_RUN_CONTINUED, "runId": RUN, "reason": "owner-died", "afterSeq": 1, "attempt": 1},
    {"type": c.TEXT_DELTA, "runId": RUN, "delta": "hi"},
    {"type": c.REASONING_DELTA, "runId": RUN, "delta": "hmm"},
    {"type": c.TOOL_INPUT_START, "runId": RUN, "toolCallId": "t", "toolName": "x"},
    {"type": c.TOOL_INPUT_DELTA, "runId": RUN, "toolCallId": "t", "delta": "{}"},
    {"type": c.TOOL_INPUT_END, "runId": RUN, "toolCallId": "t"},
    {"type": c.TOOL_CALL, "runId": RUN, "toolCallId": "t", "toolName": "x", "input": {}},
    {"type": c.TOOL_RESULT, "runId": RUN, "toolCallId": "t", "output": 1},
    {"type": c.TOOL_ERROR, "runId": RUN, "toolCallId": "t", "error": BreadError("TOOL_FAILED", "no")},
    {"type": c.TOOL_PROGRESS, "runId": RUN, "toolCallId": "t", "progress": 1},
    {"type": c.FILE_GENERATED, "runId": RUN, "uri": "/files/ab", "mimeType": "image/png"},
    {
        "type": c.HUMAN_REQUIRED,
        "runId": RUN,
        "checkpointId": "cp",
        "kind": "approval",
        "toolName": "x",
        "toolCallId": "t",
        "input": {},
    },  # fmt: skip
    {"type": c.HUMAN_RESUMED, "runId": RUN, "checkpointId": "cp"},
    {"type": c.PIPELINE_STEP_START, "runId": RUN, "stepName": "s"},
    {"type": c.PIPELINE_STEP_END, "runId": RUN, "stepName": "s"},
    {"type": c.LOOP_START, "runId": RUN, "loopId": "l"},
    {"type": c.LOOP_ITERATION_START, "runId": RUN, "loopId": "l", "iteration": 1},
    {"type": c.LOOP_ITERATION_END, "runId": RUN, "loopId": "l", "iteration": 1},
    {"type": c.LOOP_END, "runId": RUN, "loopId": "l"},
    {"type": c.SUBAGENT_RUN_START, "runId": RUN, "subagentId": "x"},
    {"type": c.SUBAGENT_RUN_END, "runId": RUN, "subagentId": "x"},
    {"type": c.TASK_START, "runId": RUN, "taskRunId": "x"},
    {"type": c.TASK_END, "runId": RUN, "taskRunId": "x"},
    {"type": c.AGENT_RUN_END, "runId": RUN, "output": {"n": 1}},
    {"type": c.AGENT_ERROR, "runId": RUN, "error": BreadError(RUN_CANCELLED, "stop")},
]


def test_every_crumb_type_is_covered():
    assert {crumb["type"] for crumb in EVERY_CRUMB} == set(c.ALL_TYPES)


def test_the_emitted_event_surface_is_pinned():
    events = [event for crumb in EVERY_CRUMB for event in A2ATranslator(RUN, "http://h/")(crumb)]
    surface = {(type(e).__name__, getattr(e, "state", None), getattr(e, "final", None)) for e in events}
    assert surface == {
        ("TextChunk", None, None), ("ArtifactChunk", None, None), ("Status", "input-required", True),
        ("Status", "working", False), ("Status", "completed", True), ("Status", "canceled", True),
    }  # fmt: skip
    failed = A2ATranslator(RUN)({"type": c.AGENT_ERROR, "runId": RUN, "error": BreadError("MODEL_ERROR", "x")})
    assert failed == [Status("failed", [{"text": "MODEL_ERROR: x"}, {"data": {"code": "MODEL_ERROR", "message": "x"}}],
                             f"{RUN}-failed", final=True)]  # fmt: skip


def test_artifact_ids_come_from_the_task_and_the_log():
    translate = A2ATranslator(RUN, "http://h/")
    first, again = translate.text("a"), translate.text("b")
    assert (first.artifact_id, first.append, again.append) == (f"{RUN}-text-1", False, True)
    (file,) = translate({"type": c.FILE_GENERATED, "runId": RUN, "uri": "/files/ab", "mimeType": "image/png"})
    assert file == ArtifactChunk(f"{RUN}-file-1", [{"file": {"uri": "http://h/files/ab", "mimeType": "image/png"}}],
                                 last_chunk=True)  # fmt: skip
    translate({"type": c.HUMAN_RESUMED, "runId": RUN})
    assert translate.text("c") == TextChunk(f"{RUN}-text-2", False, "c")
    echoed = translate({"type": c.AGENT_RUN_END, "runId": RUN, "output": {"uri": "/files/ab", "mimeType": "image/png"}})
    assert echoed == [Status("completed", final=True)]  # that file was announced already


@pytest.mark.parametrize(("dialect", "part"), [
    (v03, {"kind": "text", "text": "hmm", "metadata": {"thought": True}}),
    (v10, {"text": "hmm", "metadata": {"thought": True}}),
])  # fmt: skip
def test_a_thought_is_a_working_status_update_whose_text_part_is_marked(dialect, part):
    thought = {"type": c.REASONING_DELTA, "runId": RUN, "delta": "hmm"}
    [event] = A2ATranslator(RUN)(thought)
    assert event == Status("working", [{"text": "hmm", "metadata": {"thought": True}}], f"{RUN}-thought-1")
    written = dialect.event(RUN, "ctx", event)
    status = written["status"] if dialect is v03 else written["statusUpdate"]["status"]
    assert status["message"]["parts"] == [part]
    # a delta has no log position of its own: its frame's id is its watermark, so a resubscribe
    # from it gets the thought again from the log (a status update, shown again), never loses it
    frame = StreamEncoder(dialect, 7, RUN, "ctx").crumb(c.Frame(RUN, 3, thought))
    assert [f.startswith(b"id: 3\ndata: ") for f in frame] == [True]


def test_a_task_s_artifacts_hold_no_thoughts():
    log = TaskLog(RUN)
    for crumb in ({"type": c.REASONING_DELTA, "runId": RUN, "delta": "hmm"}, {"type": c.TEXT_DELTA, "runId": RUN,
                  "delta": "yes"}, {"type": c.AGENT_RUN_END, "runId": RUN, "output": "yes"}):  # fmt: skip
        log.add(crumb)
    assert [a.parts for a in log.fold.artifacts.values()] == [[{"text": "yes"}]]
    assert log.history[0].parts == [{"text": "hmm", "metadata": {"thought": True}}]


def test_a_continuation_s_text_goes_to_a_new_artifact_and_the_lost_text_s_is_not_appended_to():
    continued = {"type": c.AGENT_RUN_CONTINUED, "runId": RUN, "reason": "owner-died", "afterSeq": 4, "attempt": 1}
    translate = A2ATranslator(RUN)
    assert [translate.text("Hello. "), translate.text("Lost")] == [
        TextChunk(f"{RUN}-text-1", False, "Hello. "),
        TextChunk(f"{RUN}-text-1", True, "Lost"),
    ]
    assert translate(continued) == []
    found = [translate({"type": c.TEXT_DELTA, "runId": RUN, "delta": d})[0] for d in ("Fou", "nd.")]
    assert found == [TextChunk(f"{RUN}-text-1-after4", False, "Fou"), TextChunk(f"{RUN}-text-1-after4", True, "nd.")]
    # A resubscribe brought to a position past the continuation by the log names it the same.
    resubscribed = A2ATranslator(RUN)
    for crumb in ({"type": c.TEXT_DELTA, "runId": RUN, "delta": "Hello. "}, continued):
        resubscribed(crumb)
    assert resubscribed.text_key() == (f"{RUN}-text-1-after4", False)


@pytest.mark.parametrize("dialect", [v03, v10])
@pytest.mark.parametrize("text", ["plain", 'quote " and \\', "é 漢字 \U0001f35e", "line\nbreak\u2028", ""])
def test_a_text_chunk_from_its_template_is_what_the_models_write(dialect, text):
    context = 'a client\'s "context" é'  # ids go into the template escaped, as the models write them
    encoder = StreamEncoder(dialect, 7, RUN, context)
    for append in (False, True):
        chunk = TextChunk(f"{RUN}-text-1", append, text)
        expected = f'data: {{"jsonrpc":"2.0","id":7,"result":{dumps(dialect.event(RUN, context, chunk))}}}\n\n'
        assert encoder.event(chunk).decode() == expected


def test_parts_become_the_runs_input():
    assert run_input([{"text": "a"}, {"text": "b"}], None) == "a\nb"
    assert run_input([{"data": {"x": 1}}], None) == {"x": 1}
    assert run_input([{"file": {"uri": "/files/f", "mimeType": "text/csv", "name": None}}], None) == {
        "type": "file", "uri": "/files/f", "mimeType": "text/csv"}  # fmt: skip
    mixed = run_input([{"text": "a"}, {"data": [1]}, {"file": {"uri": "u"}}], None)
    assert mixed == [{"text": "a"}, {"data": [1]}, {"type": "file", "uri": "u"}]
    with pytest.raises(BadParams, match="no parts"):
        run_input([], None)
    with pytest.raises(BadParams, match="blob store"):
        run_input([{"file": {"bytes": "AAAA"}}], None)


def test_inline_bytes_are_stored_and_named_by_their_url():
    class Blobs:
        def put(self, data, mime_type, name=None, owner=None):
            self.got = (data, mime_type, name)
            return {"url": "/files/0123", "mimeType": mime_type}

    blobs = Blobs()
    value = run_input([{"file": {"bytes": base64.b64encode(b"abc").decode(), "name": "a.txt"}}], blobs)
    assert value == {"type": "file", "uri": "/files/0123", "name": "a.txt"} and blobs.got == (
        b"abc",
        "application/octet-stream",
        "a.txt",
    )
    with pytest.raises(BadParams, match="not base64"):
        run_input([{"file": {"bytes": "a!b="}}], blobs)


def test_inline_files_media_types_are_told_before_any_is_stored_which_may_refuse_them():
    class Blobs:
        def put(self, data, mime_type, name=None, owner=None):
            pytest.fail("stored before its type was told")

    told = []

    def refuse(media_types):
        told.append(media_types)
        raise BadParams("not these")

    files = [
        {"file": {"uri": "/files/f", "mimeType": "text/csv"}},
        {"file": {"bytes": "AAAA", "mimeType": "image/png"}},
    ]
    with pytest.raises(BadParams, match="not these"):
        run_input([*files, {"text": "t"}, {"file": {"bytes": "AAAA"}}], Blobs(), before_storing=refuse)
    assert told == [["image/png", "application/octet-stream"]]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 1000, 1001, 1002])
def test_the_decoded_size_is_read_from_the_base64s_length(size):
    assert decoded_size(base64.b64encode(b"x" * size).decode()) == size


def test_the_inline_limit_is_checked_before_decoding():
    over = "A" * (10 * 1024 * 1024 // 3 * 4 + 8)  # never decoded: "A"s are valid base64 anyway
    with pytest.raises(BadParams, match="limit"):
        check_inline_sizes({"message": {"parts": [{"kind": "file", "file": {"bytes": over}}]}}, v03.INLINE_BYTES)
    with pytest.raises(BadParams, match="limit"):
        check_inline_sizes({"message": {"parts": [{"raw": over}]}}, v10.INLINE_BYTES)
    check_inline_sizes({"message": {"parts": [{"raw": "AAAA"}, "junk", {"file": 3}]}}, v10.INLINE_BYTES)
    check_inline_sizes({"message": "junk"}, v03.INLINE_BYTES)


@pytest.mark.parametrize("said", ["yes", "Y", " Approve ", "APPROVED", "true"])
def test_yes_words_approve(said):
    assert pause_answer([{"text": said}], "approval") == {"approved": True}


@pytest.mark.parametrize("said", ["no", "yes please", "", "ok"])
def test_any_other_text_denies(said):
    assert pause_answer([{"text": said}], "approval") == {"approved": False}


def test_an_input_answer_is_the_text_or_the_data_as_is():
    assert pause_answer([{"text": "Ann"}], "input") == {"answer": "Ann"}
    assert pause_answer([{"data": {"anything": [1]}}], "approval") == {"anything": [1]}
    with pytest.raises(BadParams):
        pause_answer([{"text": "a"}, {"text": "b"}], "input")


def test_a_fold_is_the_task_a_stream_describes():
    fold = TaskFold()
    for event in [TextChunk("t", False, "a"), TextChunk("t", True, "b"), ArtifactChunk("f", [{"file": {"uri": "u"}}]),
                  Status("completed", final=True)]:  # fmt: skip
        fold.add(event)
    assert fold.status.state == "completed"
    assert [a.parts for a in fold.artifacts.values()] == [[{"text": "ab"}], [{"file": {"uri": "u"}}]]


def test_a_v10_message_reads_parts_by_member_and_ignores_unknown_fields():
    parts, task_id, context_id = v10.read_message({"message": {"role": "ROLE_USER", "messageId": "m", "contextId": "c",
        "parts": [{"text": "t", "kind": "text"}, {"data": [1, 2]}, {"url": "u", "mediaType": "a/b"}]}})  # fmt: skip
    assert parts == [{"text": "t"}, {"data": [1, 2]}, {"file": {"uri": "u", "mimeType": "a/b", "name": None}}]
    assert (task_id, context_id) == (None, "c")
    with pytest.raises(ValueError, match="one of"):
        v10.read_message({"message": {"parts": [{"mediaType": "a/b"}], "messageId": "m", "role": "ROLE_USER"}})


def test_the_state_enums_round_trip():
    for state in ("working", "input-required", "completed", "canceled", "failed"):
        assert v10.state_name(v10.state(state)) == state
    assert (
        json.loads(dumps(v10.task("t", "c", Status("input-required"))))["status"]["state"]
        == "TASK_STATE_INPUT_REQUIRED"
    )


def test_a_mount_names_a_version_it_knows():
    with pytest.raises(ValueError, match="spec_version"):
        a2a_server("echo", spec_version="2.0")


def test_the_demo_serves_without_the_extra(make_bread, monkeypatch):
    import importlib.util

    from bread_sync import demo
    from bread_sync.server import create_server

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "a2a" else real(name, *a))
    config = demo.config()
    assert [p for p in config.plugins if p.name == "a2a"] == []
    client = create_server(make_bread(config, transport="http-sse")).test_client()
    assert client.get("/.well-known/agent-card.json").status_code == 404


def test_a_task_log_cut_mid_run_holds_the_artifacts_so_far_and_the_history_in_order():
    log = TaskLog(RUN, "http://h/")
    start = {"type": c.AGENT_RUN_START, "runId": RUN, "agentId": "a", "sessionId": "s", "input": "draw"}
    pause = {"type": c.HUMAN_REQUIRED, "runId": RUN, "checkpointId": "cp", "kind": "input", "toolName": "ask",
             "toolCallId": "t", "input": {"question": "which?"}}  # fmt: skip
    for crumb in (start, {"type": c.TEXT_DELTA, "runId": RUN, "delta": "a "},
                  {"type": c.FILE_GENERATED, "runId": RUN, "uri": "/files/ab", "mimeType": "image/png"}):  # fmt: skip
        log.add(crumb)
    assert log.fold.status == Status("working")  # running: the artifacts so far
    assert [a.artifact_id for a in log.fold.artifacts.values()] == [f"{RUN}-text-1", f"{RUN}-file-1"]
    log.add(pause)
    log.add({"type": c.HUMAN_RESUMED, "runId": RUN, "checkpointId": "cp", "response": {"answer": "red"}})
    log.add({**start, "input": "again"})  # a continuation's start: its input is not a new message
    assert [(m.role, m.parts, m.message_id) for m in log.history] == [
        ("user", [{"text": "draw"}], f"{RUN}-user-1"),
        ("agent", log.history[1].parts, "cp"),
        ("user", [{"data": {"answer": "red"}}], f"{RUN}-user-2"),
    ]
    assert log.history[1].parts[0]["data"]["question"] == "which?"


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("hi", [{"text": "hi"}]),
        ({"n": 1}, [{"data": {"n": 1}}]),
        ({"uri": "/files/x", "mimeType": "a/b"}, [{"file": {"uri": "http://h/files/x", "mimeType": "a/b"}}]),
        ([{"text": "a"}, {"data": 2}], [{"text": "a"}, {"data": 2}]),
        ([1, 2], [{"data": [1, 2]}]),
        (None, [{"data": None}]),
    ],
)
def test_a_runs_input_is_the_parts_that_gave_it(value, parts):
    assert input_parts(value, "http://h/") == parts


def frame_of(seq, kind, **fields):
    return Frame(RUN, seq, {"type": kind, "runId": RUN, **fields})


#: A run's live stream: text, a file, more text (one artifact), reasoning (no event), its end.
LIVE = [
    frame_of(1, c.AGENT_RUN_START, agentId="a", sessionId="s"),
    frame_of(1, c.TEXT_DELTA, delta="A "),
    frame_of(1, c.TEXT_DELTA, delta="dot: "),
    frame_of(3, c.FILE_GENERATED, uri="/files/ab", mimeType="image/png"),
    frame_of(3, c.TEXT_DELTA, delta="tick "),
    frame_of(3, c.REASONING_DELTA, delta="hmm"),
    frame_of(3, c.TEXT_DELTA, delta="tock"),
    frame_of(7, c.AGENT_RUN_END, output="A dot: tick tock"),
]
#: Its log: each segment aggregated before the next durable crumb.
LOG = [LIVE[0], frame_of(2, c.TEXT_DELTA, delta="A dot: "), LIVE[3], frame_of(4, c.TEXT_DELTA, delta="tick "),
       frame_of(5, c.REASONING_DELTA, delta="hmm"), frame_of(6, c.TEXT_DELTA, delta="tock"), LIVE[7]]  # fmt: skip


def sse_items(chunks):
    """``(id, result)`` of each SSE event of ``chunks``."""
    items = []
    for chunk in chunks:
        lines = chunk.decode().split("\n")
        event_id = next((line[4:] for line in lines if line.startswith("id: ")), None)
        data = next(line[6:] for line in lines if line.startswith("data: "))
        items.append((event_id, json.loads(data)["result"]))
    return items


def folded(results):
    """The text of each artifact, folded as a client folds updates: ``append`` adds, else replaces."""
    artifacts = {}
    for result in results:
        if result.get("kind") == "artifact-update" and "text" in result["artifact"]["parts"][0]:
            artifact = result["artifact"]
            held = artifacts.get(artifact["artifactId"], "") if result.get("append") else ""
            artifacts[artifact["artifactId"]] = held + artifact["parts"][0]["text"]
    return artifacts


def test_a_resubscribe_at_any_id_appends_only_the_text_its_client_lacks():
    """The stream of the live frames, cut after each event with an id; resubscribed there from
    the log (the translator brought to the seq, then the log past it): each artifact's text once."""
    live = StreamEncoder(v03, 7, RUN, "s")
    framed = sse_items([chunk for frame in LIVE for chunk in live.crumb(frame)])
    whole = [result for _, result in framed]
    assert folded(whole) == {f"{RUN}-text-1": "A dot: tick tock"}
    for index, (event_id, _) in enumerate(framed[:-1]):
        if event_id is None:
            continue
        position = ShownText.from_id(event_id)
        resumed = StreamEncoder(v03, 7, RUN, "s", position=position)
        for frame in LOG:
            if frame.seq <= position.after:
                resumed.translator(frame.crumb)
        rest = [result for frame in LOG if frame.seq > position.after for _, result in sse_items(resumed.crumb(frame))]
        assert folded(whole[: index + 1] + rest) == folded(whole), event_id
