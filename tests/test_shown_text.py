"""``ShownText``, sans-IO: the ids a bridge's events carry say how much of a segment its client
holds, and a stream resumed at any of them repeats none of it and loses none."""

from __future__ import annotations

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
        got.append(seen.unseen(frame))
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
            out.append(seen.unseen(accepted))

    for source in order:
        frame = next(live_frames, None) if source == LIVE else log_frames.pop(0) if log_frames else None
        if frame is None:
            continue
        while source == LIVE and frame.durable and log_frames and log_frames[0].seq < frame.seq:
            take(log_frames.pop(0), LOG)  # the tail fills a hole in the live frames from the log
        take(frame, source)
    return [frame for frame in out if frame is not None]


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


def test_the_id_counts_the_characters_past_the_last_position():
    seen = ShownText()
    seen.unseen(Frame("r", 3, {"type": "tool:call", "runId": "r"}))
    assert seen.event_id == "3"
    seen.unseen(delta(3, "héllo"))
    seen.unseen(delta(3, "!", REASONING_DELTA))
    assert seen.event_id == "3:6"
    seen.unseen(delta(4, "héllo!"))  # a log's aggregate is a position of its own
    assert seen.event_id == "4"


def test_text_held_that_never_comes_again_is_not_skipped_past_a_durable_frame():
    """The client held text a dead process streamed; the log goes on with agent:run:continued
    and the call made again, whose text is all new to the client."""
    seen = ShownText.from_id("5:12")
    continued = Frame("r", 6, {"type": AGENT_RUN_CONTINUED, "runId": "r", "afterSeq": 6})
    assert seen.unseen(continued) is continued
    assert seen.unseen(delta(6, "all of it")).crumb["delta"] == "all of it"
    assert seen.event_id == "6:9"


@pytest.mark.parametrize("raw", ["", "-1", "1:", ":3", "1:2:3", "1.0", "x", "1:-2", "٣", "1 :2"])
def test_an_id_it_did_not_make_is_refused(raw):
    with pytest.raises(ValueError):
        ShownText.from_id(raw)
