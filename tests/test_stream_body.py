"""stream_body, every stream's response body (the bread routes' and the AG-UI bridge's): its
prelude, each list encoded whole, heartbeats, a failure once open as the last chunks, the tail
closed at the end."""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import threading
import time

from bread_sync.cancel import CancelRegistry
from bread_sync.crumbs import Frame
from bread_sync.protocols.ag_ui import create_ag_ui_transformer
from bread_sync.protocols.ag_ui.plugin import _stream
from bread_sync.server import stream_body
from bread_sync.server.streams import WRITE_BYTES, writes
from bread_sync.stores import sqlite

from .ag_ui_rules import check_stream, decode_sse

DEADLINE = 10.0


class Tail:
    """A tail with ``batched=True``: its lists, then (with ``fail``) an error, as a broken one would."""

    def __init__(self, lists, fail=False):
        self.lists, self.fail, self.closed = list(lists), fail, False

    def __iter__(self):
        yield from self.lists
        if self.fail:
            raise RuntimeError("the tail broke")

    def close(self):
        self.closed = True


def test_the_prelude_then_each_list_encoded_whole_in_one_write_and_a_heartbeat_when_idle():
    tail = Tail([["a", "b"], None, [], ["c"]])
    body = stream_body(iter(tail), lambda items: [item.encode() for item in items], heartbeat=b":hb",
                       failure=lambda error: [b"failed"], prelude=[b"hello"])  # fmt: skip
    assert list(body) == [b"hello", b"ab", b":hb", b"c"]


def test_what_a_tail_brought_at_once_is_joined_into_writes_of_bounded_size():
    frames = [bytes([65 + i]) * 3000 for i in range(50)]
    big = b"z" * (WRITE_BYTES + 1)
    written = list(writes([*frames, big, b"end"]))
    assert b"".join(written) == b"".join([*frames, big, b"end"])
    assert big in written  # a chunk larger than a write goes alone, never split
    assert all(len(w) <= WRITE_BYTES for w in written if w != big)
    assert [len(w) // 3000 for w in written] == [21, 21, 8, 21, 0]  # 21 frames fit a write; big; "end"


def test_a_failure_once_open_is_the_last_chunks_and_the_tail_is_closed(caplog):
    tail = Tail([["a"]], fail=True)
    seen = []
    body = stream_body(tail, lambda items: [item.encode() for item in items], heartbeat=b":hb",
                       failure=lambda error: seen.append(error) or [b"failed:", error.code.encode()],
                       name="the test's stream")  # fmt: skip
    with caplog.at_level(logging.ERROR, "bread_sync.server"):
        assert list(body) == [b"a", b"failed:", b"INTERNAL"]
    assert tail.closed and seen[0].code == "INTERNAL"
    assert "the test's stream failed" in caplog.text and "the tail broke" in caplog.text


def test_an_ag_ui_stream_that_breaks_ends_valid_with_a_run_error(caplog):
    start = {"type": "agent:run:start", "runId": "r1", "agentId": "echo", "sessionId": "t", "input": "hi"}
    delta = {"type": "text:delta", "runId": "r1", "delta": "hi"}
    tail = Tail([[Frame("r1", 1, start), Frame("r1", 1, delta)]], fail=True)
    with caplog.at_level(logging.ERROR):
        events = decode_sse(b"".join(_stream(tail, create_ag_ui_transformer(), "r1")).decode())
    check_stream(events)
    assert [e["type"] for e in events][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[-1]["code"] == "INTERNAL" and tail.closed


def test_an_idle_stream_holds_none_of_its_replay_while_its_tail_waits(make_bread, tmp_path):
    """Thousands of idle streams of paused runs each held their replay (decoded crumbs) for as
    long as they idled: the body and the tail keep nothing already sent while they wait."""
    here, there = (make_bread(store=sqlite.store(tmp_path / "bread.db")) for _ in "ab")
    for bread in (here, there):  # two processes: the run's frames are in the store only
        bread.cancels = CancelRegistry()
    paused = there.run("writer", {"topic": "bread"}, mode="sync")
    lists = here.tail(paused.run_id, heartbeat=DEADLINE, batched=True)
    body = stream_body(lists, lambda items: [repr(item).encode() for item in items], heartbeat=b":hb",
                       failure=lambda error: [b"failed"])  # fmt: skip
    assert b"human:required" in next(body)  # the replay, sent
    rest = []
    waiting = threading.Thread(target=lambda: rest.extend(body))  # waits in the tail, then reads to the end
    waiting.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while replayed_frames(there, paused.run_id) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert replayed_frames(there, paused.run_id) == 0
    finally:
        there.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
        waiting.join(DEADLINE)
    assert b"agent:run:end" in b"".join(rest)


def replayed_frames(there, run_id: str) -> int:
    """The run's frames alive in this process but those the transport of the Bread that ran it keeps."""
    kept = {id(frame) for frame in there.transport.retained(run_id)}
    return sum(1 for o in gc.get_objects() if isinstance(o, Frame) and o.run_id == run_id and id(o) not in kept)


IDLE_STACKS = """
from gevent import monkey; monkey.patch_all()
import json, time
import gevent
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.server import stream_body
from bread_sync.tails.inbox import Inbox
from bread_sync.transports import stream

bread = create_bread(config().model_copy(update={"store": "memory", "transport": stream.transport()}))
paused = bread.run("writer", {"topic": "bread"}, mode="sync")

def served(body):  # what gunicorn does with a response body
    for _ in body:
        pass

def one_generator():  # the least a stream can be: one generator waiting in an inbox
    inbox = Inbox()
    while True:
        yield inbox.take(60)

lists = bread.tail(paused.run_id, heartbeat=60, batched=True)
body = stream_body(lists, lambda items: [b"x" for _ in items], heartbeat=b"", failure=lambda error: [])
streams = [gevent.spawn(served, body), gevent.spawn(served, one_generator())]

def waiting(greenlet):
    frame = greenlet.gr_frame
    while frame is not None and frame.f_code.co_name != "take":
        frame = frame.f_back
    return frame is not None

deadline = time.monotonic() + 30
while not all(map(waiting, streams)) and time.monotonic() < deadline:
    gevent.sleep(0.005)
print(json.dumps([g._stack_saved if waiting(g) else None for g in streams]))
"""


def test_an_idle_stream_waits_in_its_body_frame_with_no_generator_of_its_tail_between():
    """Each generator between gunicorn's loop over the body and the wait is a C-level frame of
    the interpreter that gevent saves with the greenlet's stack (0.4 kB) on every switch: an
    idle stream's greenlet saves no more than one waiting in a single generator."""
    done = subprocess.run([sys.executable, "-c", IDLE_STACKS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    body, least = json.loads(done.stdout)
    assert body is not None and least is not None, "the streams never waited in their inboxes"
    assert body <= least + 128, f"an idle stream saves {body} bytes of stack, one generator {least}"
