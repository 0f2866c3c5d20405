"""Resumable AG-UI streams in process: ``id: <seq>`` on the last event of each durable crumb, and
GET <path>/runs/<runId>/stream after a Last-Event-ID, valid on its own."""

from __future__ import annotations

from zlib import crc32

import pytest

from bread_sync.crumbs import Frame
from bread_sync.demo import config as demo_config
from bread_sync.protocols.ag_ui import ag_ui, create_ag_ui_transformer
from bread_sync.protocols.ag_ui.plugin import _stream
from bread_sync.protocols.ag_ui.translator import encode
from bread_sync.server import create_server
from bread_sync.wire.replay import ShownText

from .ag_ui_rules import check_stream, decode_sse, decode_sse_ids


def turn(text, thread="t1"):
    return {"threadId": thread, "runId": "r1", "messages": [{"id": "m", "role": "user", "content": text}]}


@pytest.fixture
def served(make_bread):
    def make(**server):
        plugins = [ag_ui(agent_id="echo"), ag_ui(agent_id="manager", path="/ag-ui/manager")]
        bread = make_bread(demo_config().model_copy(update={"plugins": plugins}), transport="http-sse", server=server)
        return bread, create_server(bread).test_client()

    return make


def test_the_last_event_of_each_durable_crumb_carries_its_seq(served):
    bread, client = served()
    answer = client.post("/ag-ui/manager", json=turn("go"))
    framed = decode_sse_ids(answer.get_data(as_text=True))
    ids = [int(seq) for seq, _ in framed if seq is not None and ":" not in seq]
    log = bread.store.get_crumbs(answer.headers["Bread-Run-Id"])
    assert len(ids) > 5 and ids == sorted(set(ids)) and set(ids) <= {frame.seq for frame in log if frame.durable}
    assert framed[0][0] == "1" and framed[-1][0] == str(log[-1].seq)  # RUN_STARTED and RUN_FINISHED


def test_a_deltas_event_carries_the_text_held_past_the_seq(served):
    _, client = served()
    framed = decode_sse_ids(client.post("/ag-ui/manager", json=turn("go")).get_data(as_text=True))
    held, seq = "", "0"
    for event_id, event in framed:
        if event["type"] in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            held += event["delta"]
            assert event_id == f"{seq}:{len(held)}:{crc32(held.encode()):08x}"
        elif event_id is not None:
            held, seq = "", event_id
    assert held == "" and any(":" in (event_id or "") for event_id, _ in framed)


def text_of(events):
    return "".join(e["delta"] for e in events if e["type"] in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"))


def test_a_stream_resumed_at_any_id_repeats_no_text_the_client_holds(served):
    """A client that read up to any event with an id, a delta's included, and resumes there
    holds the run's text once: the resumed stream skips what it holds, valid on its own."""
    _, client = served()
    answer = client.post("/ag-ui/manager", json=turn("go"))
    run_id, framed = answer.headers["Bread-Run-Id"], decode_sse_ids(answer.get_data(as_text=True))
    whole = [event for _, event in framed]
    inside_a_segment = 0
    for index, (event_id, _) in enumerate(framed[:-1]):
        if event_id is None:
            continue
        inside_a_segment += ":" in event_id
        resumed = client.get(f"/ag-ui/manager/runs/{run_id}/stream", headers={"Last-Event-ID": event_id})
        events = decode_sse(resumed.get_data(as_text=True))
        check_stream(events)
        assert text_of(whole[: index + 1]) + text_of(events) == text_of(whole), event_id
    assert inside_a_segment > 3


OPENERS = ("STEP_STARTED", "TOOL_CALL_START", "TEXT_MESSAGE_START")


def comparable(events):
    """Events as a replay and a live stream both say them: a message's text in one delta (the
    log keeps it aggregated), and no run ids (the live stream echoes the client's)."""
    out = []
    for event in events:
        event = {k: v for k, v in event.items() if k not in ("runId", "threadId")}
        last = out[-1] if out else None
        if event["type"] == "TEXT_MESSAGE_CONTENT" and last and last["type"] == event["type"]:
            last["delta"] += event["delta"]
        else:
            out.append(event)
    return out


def test_a_stream_resumed_at_each_id_is_valid_and_loses_nothing(served):
    _, client = served()
    answer = client.post("/ag-ui/manager", json=turn("go"))
    run_id, framed = answer.headers["Bread-Run-Id"], decode_sse_ids(answer.get_data(as_text=True))
    whole = [event for _, event in framed]
    reopened_any = False
    for index, (seq, _) in enumerate(framed[:-1]):
        if seq is None:
            continue
        resumed = client.get(f"/ag-ui/manager/runs/{run_id}/stream", headers={"Last-Event-ID": seq})
        events = decode_sse(resumed.get_data(as_text=True))
        check_stream(events)
        assert events[0] == {"type": "RUN_STARTED", "threadId": "t1", "runId": run_id, "protocolVersion": "1.0"}
        opened = 1
        while events[opened]["type"] in OPENERS and events[opened] in whole[: index + 1]:
            opened += 1
        reopened_any |= opened > 1
        assert comparable(events[opened:]) == comparable(whole[index + 1 :]), seq
    assert reopened_any  # some id fell inside a step


def test_a_message_open_at_the_id_is_reopened_under_its_id():
    past = [
        {"type": "agent:run:start", "runId": "run-x", "sessionId": "s"},
        {"type": "pipeline:step:start", "runId": "run-x", "stepName": "draft"},
        {"type": "text:delta", "runId": "run-x", "delta": "half"},
        {"type": "file:generated", "runId": "run-x", "uri": "file://a", "mimeType": "image/png"},
    ]
    live, replayed = create_ag_ui_transformer(), create_ag_ui_transformer()
    sent = [event for crumb in past for event in live(crumb)]
    for crumb in past:
        replayed(crumb)
    reopened = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in replayed.reopen()]
    start = next(e for e in sent if e.type == "TEXT_MESSAGE_START")
    assert [e["type"] for e in reopened] == ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START"]
    assert reopened[2]["messageId"] == start.message_id and reopened[1]["stepName"] == "draft"
    rest = [live({"type": "text:delta", "runId": "run-x", "delta": " more"})[0],
            *live({"type": "agent:run:end", "runId": "run-x", "output": "half more"})]  # fmt: skip
    check_stream([*reopened, *[e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in rest]])
    assert create_ag_ui_transformer().reopen() == []


def test_the_resumable_stream_answers_like_the_passive_route(served):
    refused = set()
    bread, client = served(authorize_run=lambda identity, run_id: run_id not in refused)
    answer = client.post("/ag-ui/run", json=turn("a b"))
    run_id = answer.headers["Bread-Run-Id"]
    check_stream(decode_sse(answer.get_data(as_text=True)))  # to the run's end
    last = bread.store.last_seq(run_id)
    url = f"/ag-ui/run/runs/{run_id}/stream"
    assert client.get(url, headers={"Last-Event-ID": str(last)}).status_code == 204
    assert client.get(url, headers={"Last-Event-ID": str(last + 1)}).status_code == 204
    whole = decode_sse(client.get(url).get_data(as_text=True))  # no Last-Event-ID: from the start
    check_stream(whole)
    assert whole[-1]["result"] == "a b"
    assert client.get(url, headers={"Last-Event-ID": "x"}).get_json()["error"]["code"] == "INVALID_REQUEST"
    assert client.get("/ag-ui/run/runs/run_nope/stream").get_json()["error"]["code"] == "RUN_NOT_FOUND"
    refused.add(run_id)
    assert client.get(url).status_code == 403


def test_a_mounts_stream_answers_another_agents_run_as_one_that_is_not_there(served):
    bread, client = served()
    other = client.post("/agents/writer/run", json={"input": {"topic": "rye"}})
    run_id = other.headers["Bread-Run-Id"]
    other.get_data()
    unknown = client.get("/ag-ui/run/runs/run_nope/stream")
    answer = client.get(f"/ag-ui/run/runs/{run_id}/stream")
    assert unknown.status_code == answer.status_code == 404
    assert unknown.get_json()["error"]["code"] == answer.get_json()["error"]["code"] == "RUN_NOT_FOUND"
    assert client.get(f"/ag-ui/manager/runs/{run_id}/stream").status_code == 404


def crumb_frame(seq, kind, **fields):
    return Frame("run-r", seq, {"type": kind, "runId": "run-r", **fields})


#: A run's live stream: reasoning, then text, a file, more text, its end; and its log, each
#: segment aggregated before the next durable crumb.
THINKING = [
    crumb_frame(1, "agent:run:start", sessionId="s"),
    crumb_frame(1, "reasoning:delta", delta="Thi"),
    crumb_frame(1, "reasoning:delta", delta="nk."),
    crumb_frame(1, "text:delta", delta="Hel"),
    crumb_frame(1, "text:delta", delta="lo"),
    crumb_frame(4, "file:generated", uri="file://a", mimeType="image/png"),
    crumb_frame(4, "text:delta", delta=" mo"),
    crumb_frame(4, "text:delta", delta="re"),
    crumb_frame(6, "agent:run:end", output="Hello more"),
]
THINKING_LOG = [THINKING[0], crumb_frame(2, "reasoning:delta", delta="Think."), crumb_frame(3, "text:delta",
                delta="Hello"), THINKING[5], crumb_frame(5, "text:delta", delta=" more"), THINKING[8]]  # fmt: skip
#: A run whose process died while it streamed "Lost": carried on, the call made again.
CARRIED_ON = [
    crumb_frame(1, "agent:run:start", sessionId="s"),
    crumb_frame(1, "text:delta", delta="Lo"),
    crumb_frame(1, "text:delta", delta="st"),
    crumb_frame(2, "agent:run:continued", afterSeq=1, reason="owner-died"),
    crumb_frame(2, "text:delta", delta="Ne"),
    crumb_frame(2, "text:delta", delta="w"),
    crumb_frame(4, "agent:run:end", output="New"),
]
CARRIED_ON_LOG = [CARRIED_ON[0], CARRIED_ON[3], crumb_frame(3, "text:delta", delta="New"), CARRIED_ON[6]]


def said(events):
    """Each message's text, by message id, in the order the messages opened."""
    out = {}
    for event in events:
        if event["type"] in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            out[event["messageId"]] = out.get(event["messageId"], "") + event["delta"]
    return out


@pytest.mark.parametrize(
    ("live", "log", "messages", "lost"),
    [
        (THINKING, THINKING_LOG, {"rsn_run-r_1": "Think.", "msg_run-r_2": "Hello more"}, set()),
        (CARRIED_ON, CARRIED_ON_LOG, {"msg_run-r_1": "Lost", "msg_run-r_after1_1": "New"}, {"msg_run-r_1"}),
    ],
)
def test_reasoning_and_text_resumed_at_any_id_are_each_said_once_under_their_ids(live, log, messages, lost):
    """The stream body over the live frames, cut after each event with an id; resumed there from
    the log (a prelude of the log up to the seq, then the log past it): each reasoning and text
    message's text once, under the ids the live stream gave them; after a continuation, the text
    the dead process streamed (``lost``: never logged) stays as the client got it, and the new
    call's comes whole."""
    body = b"".join(_stream(iter([live]), create_ag_ui_transformer(), "run-r")).decode()
    framed = decode_sse_ids(body)
    whole = [event for _, event in framed]
    for index, (event_id, _) in enumerate(framed[:-1]):
        if event_id is None:
            continue
        position = ShownText.from_id(event_id)
        transformer = create_ag_ui_transformer()
        for frame in log:
            if frame.seq <= position.after:
                transformer(frame.crumb)
        prelude = [encode(event).encode() for event in transformer.reopen()]
        rest = [frame for frame in log if frame.seq > position.after]
        events = decode_sse(b"".join(_stream(iter([rest]), transformer, "run-r", prelude, position)).decode())
        check_stream(events)
        kept = said(whole[: index + 1])
        held = dict(kept)
        for message_id, text in said(events).items():
            held[message_id] = held.get(message_id, "") + text
        expected = {m: kept[m] if m in lost else text for m, text in messages.items() if m not in lost or m in kept}
        assert said(whole) == messages and held == expected, event_id
