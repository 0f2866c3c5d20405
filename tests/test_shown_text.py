"""``ShownText``, sans-IO: the ids a bridge's events carry say how much of a segment its client
holds, and a stream resumed at any of them repeats none of it and loses none."""

from __future__ import annotations

from zlib import crc32

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bread_sync.crumbs import AGENT_RUN_CONTINUED, REASONING_DELTA, TEXT_DELTA, Frame
from bread_sync.wire.replay import LIVE, LOG, Dedup, ShownText

from .test_tail import build_run, durables, text_of


def read_to(frames, count):
    """What a client got of a stream's first ``count`` frames, and the id it resumes with."""
    seen, got = ShownText(), []
    for frame in frames[:count]:
        got += seen.unseen(frame)[1]
    return got, seen.event_id


def resumed(live, log, event_id, order):
    """A stream resumed at ``event_id``: the server's tail from its seq (log past it, live frames
    the transport still has, merged by the dedup rule in the order given), then the skip."""
    seen = ShownText.from_id(event_id)
    after = seen.after
    live_frames = iter([f for f in live if f.seq > after or (f.seq == after and not f.durable)])
    log_frames = [f for f in log if f.seq > after]
    dedup, out = Dedup(after), []

    def take(frame, source):
        accepted = dedup.accept(frame, source)
        if accepted is not None:
            out.extend(seen.unseen(accepted)[1])

    for source in order:
        frame = next(live_frames, None) if source == LIVE else log_frames.pop(0) if log_frames else None
        if frame is None:
            continue
        while source == LIVE and frame.durable and log_frames and log_frames[0].seq < frame.seq:
            take(log_frames.pop(0), LOG)  # the tail fills a hole in the live frames from the log
        take(frame, source)
    return out


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(0, 2), min_size=1, max_size=25).map(lambda s: [*s, 0]), data=st.data())
def test_a_stream_resumed_at_any_id_holds_each_durable_and_all_text_once(shape, data):
    live, log = build_run(shape)
    first = data.draw(st.sampled_from([live, log]))  # the run's own stream, or a replay of its log
    got, event_id = read_to(first, data.draw(st.integers(0, len(first))))
    order = data.draw(st.permutations([LIVE] * len(live) + [LOG] * len(log)))
    rest = resumed(live, log, event_id, order)
    delivered = [f for f in got if f is not None] + rest
    assert durables(delivered) == durables(log)
    assert text_of(delivered) == text_of(live)
    assert text_of(delivered, REASONING_DELTA) == text_of(live, REASONING_DELTA)


def delta(seq, text, kind=TEXT_DELTA):
    return Frame("r", seq, {"type": kind, "runId": "r", "delta": text})


def test_the_id_counts_the_characters_past_the_last_position_and_their_checksum():
    seen = ShownText()
    seen.unseen(Frame("r", 3, {"type": "tool:call", "runId": "r"}))
    assert seen.event_id == "3"
    seen.unseen(delta(3, "héllo"))
    seen.unseen(delta(3, "!", REASONING_DELTA))
    assert seen.event_id == f"3:6:{crc32('héllo!'.encode()):08x}"
    seen.unseen(delta(4, "héllo!"))  # a log's aggregate is a position of its own
    assert seen.event_id == "4"


def resume(event_id, frames):
    seen = ShownText.from_id(event_id)
    return [[f.crumb["delta"] for f in part] for frame in frames for part in seen.unseen(frame)]


def test_the_text_held_is_taken_silently_and_the_rest_sent():
    held = f"5:4:{crc32(b'abcd'):08x}"
    taken = resume(held, [delta(5, "ab"), delta(5, "cdef"), delta(5, "g")])
    assert taken == [[], [], ["ab", "cd"], ["ef"], [], ["g"]]  # (held, sent) for each frame


def test_text_sent_again_that_is_not_the_clients_is_sent_rather_than_skipped():
    """The transport no longer held the segment's start: what it sends again begins later, and
    skipping the client's count of characters would lose text the client never had."""
    held = f"5:4:{crc32(b'abcd'):08x}"
    assert resume(held, [delta(5, "cd"), delta(5, "ef"), delta(5, "g")]) == [[], [], [], ["cd", "ef"], [], ["g"]]


def test_text_held_that_never_comes_again_is_not_skipped_past_a_durable_frame():
    """The client held text a dead process streamed; the log goes on with agent:run:continued
    and the call made again, whose text is all new to the client."""
    seen = ShownText.from_id(f"5:12:{crc32(b'lost to a crash'[:12]):08x}")
    continued = Frame("r", 6, {"type": AGENT_RUN_CONTINUED, "runId": "r", "afterSeq": 6})
    assert seen.unseen(continued) == ((), (continued,))
    assert seen.unseen(delta(6, "all of it"))[1][0].crumb["delta"] == "all of it"
    assert seen.event_id == f"6:9:{crc32(b'all of it'):08x}"


@pytest.mark.parametrize(
    "raw", ["", "-1", "1:", ":3", "1:2", "1:2:3", "1:2:0000000g", "1:2:ABCDEF01", "1.0", "x", "٣", "1 :2:00000000"]
)
def test_an_id_it_did_not_make_is_refused(raw):
    with pytest.raises(ValueError):
        ShownText.from_id(raw)
