"""The reconnecting stream reader: frames once and in order across reconnects, on both wires,
whatever the split of the bytes; the heartbeat timeout; the run's end and pause."""

from __future__ import annotations

import time

import pytest

from bread_sync.crumbs import Frame, error_crumb
from bread_sync.errors import PROTOCOL_DECODE_ERROR, RUN_CANCELLED, UNKNOWN_PROVIDER, BreadError
from bread_sync.wire import NDJSON, SSE, sse_retry
from bread_sync.wire.reader import MAX_LINE_BYTES, RunStreamReader
from bread_sync.wire.replay import Gap

RUN = "run_1"
WIRES = {"sse": SSE, "ndjson": NDJSON}


def crumb(seq: int, type_: str, **payload) -> Frame:
    return Frame(RUN, seq, {"type": type_, "runId": RUN, **payload})


def delta(seq: int, text: str) -> Frame:
    return crumb(seq, "text:delta", delta=text)


START = crumb(1, "agent:run:start", agentId="a", sessionId="s", input="hi")
CALL = crumb(3, "tool:call", toolCallId="c1", toolName="t", input={})
END = crumb(4, "agent:run:end", output="Hello world")


def body(wire, frames) -> bytes:
    return b"".join(wire.frame(f) if isinstance(f, Frame) else f for f in frames)


def read(reader: RunStreamReader, wire, data: bytes, splits=(), now=0.0) -> list:
    """Connect ``reader`` and feed it ``data`` cut at ``splits``."""
    reader.connect(wire.content_type, now)
    cuts = [0, *splits, len(data)]
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        out += reader.feed(data[a:b], now)
    return out


def texts(items) -> list:
    return [(i.seq, i.type, i.crumb.get("delta")) if isinstance(i, Frame) else i for i in items]


@pytest.fixture(params=sorted(WIRES))
def wire(request):
    return WIRES[request.param]


def test_one_stream_whole_split_at_every_byte_and_byte_by_byte(wire):
    frames = [START, delta(1, "Hel"), delta(1, "lo wörld"), CALL, END]
    data = body(wire, [wire.passive_prelude, frames[0], wire.heartbeat, *frames[1:]])
    expected = texts(frames)
    for cut in range(len(data) + 1):
        assert texts(read(RunStreamReader(), wire, data, [cut])) == expected, cut
    assert texts(read(RunStreamReader(), wire, data, range(1, len(data)))) == expected
    reader = RunStreamReader()
    read(reader, wire, data)
    assert (reader.ended, reader.error, reader.position, reader.last_event_id, reader.run_id) == (
        True, None, 4, "4", RUN,
    )  # fmt: skip


@pytest.mark.parametrize(
    "second, shown",
    [
        # A passive stream replays the log: the segment's aggregate brings only its rest.
        ([crumb(2, "text:delta", delta="Hello world"), CALL, END], [" world"]),
        # A reconnect's transport re-sends the deltas of the segment in flight.
        ([delta(1, "Hel"), delta(1, "lo"), delta(1, " world"), CALL, END], [" world"]),
        ([delta(1, "Hello wo"), delta(1, "rld"), CALL, END], [" wo", "rld"]),
        # The start of the segment is no longer held: at least once, the documented rule.
        ([delta(1, "lo"), delta(1, " world"), CALL, END], ["lo", " world"]),
        # The durable crumbs already held come again: dropped by seq.
        ([START, crumb(2, "text:delta", delta="Hello world"), CALL, END], [" world"]),
    ],
)
def test_a_reconnect_brings_nothing_twice_and_loses_nothing_durable(wire, second, shown):
    before = [START, delta(1, "Hel"), delta(1, "lo")]
    first, rest = body(wire, before), body(wire, [wire.passive_prelude, *second])
    expected = [*shape(before), *[("text:delta", t, None) for t in shown], *shape([CALL, END])]
    for cut in range(len(rest) + 1):
        reader = RunStreamReader()
        items = read(reader, wire, first, [len(first) // 2])
        assert (reader.last_event_id, reader.ended) == ("1", False)
        items += read(reader, wire, rest, [cut])
        assert shape(items) == expected, cut
        assert reader.ended and reader.position == 4


def shape(frames) -> list:
    return [(f.type, f.crumb.get("delta"), f.seq if f.durable else None) for f in frames]


def thought(seq: int, text: str) -> Frame:
    return crumb(seq, "reasoning:delta", delta=text)


@pytest.mark.parametrize(
    "second",
    [
        # A passive stream replays the log: one entry per segment, each bringing only its rest.
        [crumb(2, "reasoning:delta", delta="Think"), crumb(3, "text:delta", delta="Hello")],
        # A reconnect's transport re-sends the deltas of the segments in flight, of both kinds.
        [thought(1, "Thin"), thought(1, "k"), delta(1, "Hel"), delta(1, "lo")],
    ],
)
def test_a_reconnect_brings_reasoning_and_text_once_each(wire, second):
    call, end = (
        crumb(4, "tool:call", toolCallId="c1", toolName="t", input={}),
        crumb(5, "agent:run:end", output="Hello"),
    )
    before = [START, thought(1, "Thin"), thought(1, "k"), delta(1, "Hel")]
    first, rest = body(wire, before), body(wire, [wire.passive_prelude, *second, call, end])
    for cut in range(len(rest) + 1):
        reader = RunStreamReader()
        items = read(reader, wire, first) + read(reader, wire, rest, [cut])
        deltas = [(f.type, f.crumb["delta"]) for f in items if not f.durable]
        assert "".join(d for kind, d in deltas if kind == "reasoning:delta") == "Think", cut
        assert "".join(d for kind, d in deltas if kind == "text:delta") == "Hello", cut
        assert [f.seq for f in items if f.durable] == [1, 4, 5] and reader.ended


def test_a_reader_starting_after_a_position_skips_what_it_holds(wire):
    reader = RunStreamReader(RUN, after=3)
    assert reader.last_event_id == "3"
    assert texts(read(reader, wire, body(wire, [START, CALL, END]))) == texts([END])


def test_the_heartbeat_timeout_counts_from_the_last_bytes_heard(wire):
    reader = RunStreamReader(heartbeat_timeout=45)
    assert not reader.timed_out(1000.0)  # not connected: nothing to time
    reader.connect(wire.content_type, now=0.0)
    assert reader.read_timeout(10.0) == 35.0
    assert reader.feed(wire.heartbeat, now=40.0) == []
    assert not reader.timed_out(85.0)
    assert reader.timed_out(85.5)
    assert reader.read_timeout(90.0) == 0.0
    assert not RunStreamReader(heartbeat_timeout=None).timed_out(1e9)


def test_a_pause_is_known_until_the_run_goes_on(wire):
    required = crumb(2, "human:required", checkpointId="cp", kind="approval", toolCallId="c", toolName="t", input={})
    reader = RunStreamReader()
    read(reader, wire, body(wire, [START, required]))
    assert (reader.paused, reader.pause.crumb["checkpointId"], reader.ended) == (True, "cp", False)
    read(reader, wire, body(wire, [crumb(3, "human:resumed", checkpointId="cp", response={})]))
    assert (reader.paused, reader.ended) == (False, False)


def test_an_error_end_is_delivered_once_on_both_wires(wire):
    failed = Frame(RUN, 2, error_crumb(RUN, BreadError(RUN_CANCELLED, "cancelled")))
    reader = RunStreamReader()
    items = read(reader, wire, body(wire, [START, failed]))  # SSE adds its error sidecar
    assert [i.type for i in items] == ["agent:run:start", "agent:error"]
    assert reader.ended and reader.error.code == RUN_CANCELLED


def test_a_failure_with_no_run_reads_the_same_on_both_wires(wire):
    reader = RunStreamReader(RUN)
    items = read(reader, wire, wire.failure(BreadError(UNKNOWN_PROVIDER, "no such provider"), RUN))
    assert [(i.seq, i.type, i.crumb["error"].code) for i in items] == [(0, "agent:error", UNKNOWN_PROVIDER)]
    assert reader.ended and reader.error.message == "no such provider"


def test_a_gap_is_passed_on_in_order(wire):
    reader = RunStreamReader(RUN, after=1)
    items = read(reader, wire, wire.gap(3, RUN) + wire.frame(CALL))
    assert items[0] == Gap(3) and texts(items[1:]) == texts([CALL])


def test_a_finished_run_with_nothing_more_has_ended():
    reader = RunStreamReader(RUN, after=4)
    reader.run_finished()
    assert reader.ended and reader.error is None


def test_the_servers_retry_sets_the_reconnect_delay():
    reader = RunStreamReader()
    read(reader, SSE, sse_retry(2500))
    assert reader.reconnect_delay == 2.5


@pytest.mark.parametrize(
    "content_type, data",
    [
        ("text/html", b""),
        (SSE.content_type, b"id: x\ndata: {}\n\n"),
        (SSE.content_type, b"id: 1\ndata: not json\n\n"),
        (NDJSON.content_type, b'{"v": 1, "type": "crumb"}\n'),
        # a delta of the reader's run, but not JSON: its fast path leaves it to the decoder
        (NDJSON.content_type, body(NDJSON, [delta(1, "x")]).replace(b'"seq":1', b'"seq":01')),
    ],
)
def test_what_is_not_a_run_stream_is_a_decode_error(content_type, data):
    reader = RunStreamReader(RUN)
    with pytest.raises(BreadError) as caught:
        reader.connect(content_type, 0.0)
        reader.feed(data, 0.0)
    assert caught.value.code == PROTOCOL_DECODE_ERROR


def test_feeding_before_connecting_is_a_programming_error():
    with pytest.raises(RuntimeError, match="connect"):
        RunStreamReader().feed(b"", 0.0)


def test_a_delta_line_whose_seq_no_int_can_hold_is_a_decode_error():
    reader = RunStreamReader("run_1", 0, None)
    reader.connect(NDJSON.content_type, 0.0)
    line = NDJSON.frame(Frame("run_1", 0, {"type": "text:delta", "runId": "run_1", "delta": "x"}))
    with pytest.raises(BreadError) as refused:
        reader.feed(line.replace(b'"seq":0', b'"seq":' + b"9" * 5000), 0.0)
    assert refused.value.code == PROTOCOL_DECODE_ERROR


def feed_in_chunks(reader: RunStreamReader, data: bytes, size: int) -> int:
    """Feed ``data`` in chunks of ``size`` bytes until the reader refuses one: the bytes it had
    taken before the chunk it refused."""
    taken = 0
    for start in range(0, len(data), size):
        reader.feed(data[start : start + size], 0.0)
        taken += size
    return taken


@pytest.mark.parametrize("bound, size", [(4096, 1), (4096, 7), (MAX_LINE_BYTES, 4096), (MAX_LINE_BYTES, 65_536)])
def test_a_line_past_the_bound_is_a_decode_error_before_more_than_a_chunk_past_it_is_held(wire, bound, size):
    reader = RunStreamReader(RUN, max_line_bytes=bound)
    reader.connect(wire.content_type, 0.0)
    endless = (b"data: " if wire is SSE else b"") + b"x" * (4 * MAX_LINE_BYTES)
    taken = 0
    with pytest.raises(BreadError) as refused:
        taken = feed_in_chunks(reader, endless, size)
    assert refused.value.code == PROTOCOL_DECODE_ERROR and str(bound) in refused.value.message
    # Refused with the first chunk that took the line past the bound: no more than the bound and
    # that chunk was held.
    assert taken <= bound


def test_a_line_as_long_as_the_bound_is_read():
    line = NDJSON.frame(delta(1, "x" * 5000))
    reader = RunStreamReader(RUN, max_line_bytes=len(line) - 1)  # its \n is not the line's
    items = read(reader, NDJSON, body(NDJSON, [START]) + line, range(1, 9000, 100))
    assert texts(items) == texts([START, delta(1, "x" * 5000)])
    with pytest.raises(BreadError) as refused:
        read(RunStreamReader(RUN, max_line_bytes=len(line) - 2), NDJSON, line)
    assert refused.value.code == PROTOCOL_DECODE_ERROR


def test_an_sse_event_of_many_short_lines_is_bounded_too():
    reader = RunStreamReader(RUN, max_line_bytes=4096)
    reader.connect(SSE.content_type, 0.0)
    with pytest.raises(BreadError) as refused:
        feed_in_chunks(reader, b"data: x\n" * 10_000, 64)
    assert refused.value.code == PROTOCOL_DECODE_ERROR


def test_a_long_line_costs_its_length_not_its_square(wire):
    """A line near the bound fed 64 bytes at a time: re-copying what is held with each chunk
    would take minutes of CPU (~10 GB copied); held as parts and joined once, milliseconds."""
    long = delta(1, "x" * (MAX_LINE_BYTES - 1000))
    data = body(wire, [START, long])
    reader = RunStreamReader(RUN)
    reader.connect(wire.content_type, 0.0)
    items, budget = [], time.process_time() + 2.0  # CPU time: a busy machine does not count
    for start in range(0, len(data), 64):
        items += reader.feed(data[start : start + 64], 0.0)
        assert time.process_time() < budget, f"2 s of CPU spent by byte {start} of {len(data)}"
    assert texts(items) == texts([START, long])
