"""Following a run: log replay, live frames, runs executing in another process, dedup."""

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bread_sync import BreadError
from bread_sync.crumbs import REASONING_DELTA, TEXT_DELTA, Frame
from bread_sync.engine.opening import run_record
from bread_sync.stores import memory
from bread_sync.tails import follower as follower_module
from bread_sync.transports import stream
from bread_sync.wire.replay import LIVE, LOG, Dedup


def durables(frames):
    return [(f.seq, f.type) for f in frames if f is not None and f.durable]


def text_of(frames, kind=TEXT_DELTA):
    return "".join(f.crumb["delta"] for f in frames if f is not None and f.type == kind)


def test_tail_of_a_finished_run_replays_its_log_and_ends(bread):
    done = bread.run("echo", "a b c", mode="sync")
    frames = list(bread.tail(done.run_id))
    assert frames == bread.store.get_crumbs(done.run_id)
    assert list(bread.tail(done.run_id, after=frames[-1].seq)) == []


def test_tail_after_a_position_replays_only_what_follows(bread):
    done = bread.run("echo", "a b c", mode="sync")
    assert [f.seq for f in bread.tail(done.run_id, after=1)] == [2, 3]


def test_an_unknown_run_is_not_found_before_iteration(bread):
    with pytest.raises(BreadError) as caught:
        bread.tail("run_nope")
    assert caught.value.code == "RUN_NOT_FOUND"


def test_a_transport_only_tail_of_an_unknown_run_is_not_looked_up_and_ends_at_the_safety_net(bread, monkeypatch):
    """A run route tails the run it just made with replay=False: no store read for it there."""
    monkeypatch.setattr(follower_module, "SAFETY_NET_SECONDS", 0.05)
    bread.follower.interval = 0.01
    looked_up = []
    get_run = bread.store.get_run
    bread.store.get_run = lambda run_id: looked_up.append(run_id) or get_run(run_id)
    frames = bread.tail("run_nope", heartbeat=5, replay=False)
    assert looked_up == []
    assert list(frames) == []  # the follower found no such run: the tail ends, holding nothing


def drive_in_thread(run):
    thread = threading.Thread(target=lambda: list(run))
    thread.start()
    return thread


def test_a_tail_opened_mid_run_gets_every_crumb_once(bread):
    run = bread.run("slow", {"count": 40, "delayMs": 2}, run_id="mid")
    next(run), next(run)  # started, one tick out
    driver = drive_in_thread(run)
    frames = list(bread.tail("mid"))
    driver.join(10)
    log = bread.store.get_crumbs("mid")
    assert durables(frames) == durables(log)
    assert text_of(frames) == "".join(f"tick {n} " for n in range(1, 41))


def test_a_tail_stays_open_across_a_pause_and_relays_a_resume_from_another_process(make_bread):
    store = memory.store()
    a = make_bread(store=store, transport=stream.transport())
    b = make_bread(store=store, transport=stream.transport())  # another process: no shared transport
    paused = a.run("writer", {"topic": "bread"}, mode="sync")
    b.follower.interval = 0.01
    got, ended = [], threading.Event()

    def follow():
        got.extend(b.tail(paused.run_id, heartbeat=5))
        ended.set()

    threading.Thread(target=follow).start()
    a.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    assert ended.wait(10)
    assert durables(got) == durables(store.get_crumbs(paused.run_id))
    assert got[-1].type == "agent:run:end" and "Published." in text_of(got)


def test_a_tail_yields_heartbeats_while_idle(bread):
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    frames = bread.tail(paused.run_id, heartbeat=0.01)
    replayed = [next(frames) for _ in range(len(bread.store.get_crumbs(paused.run_id)))]
    assert replayed[-1].type == "human:required"
    assert next(frames) is None
    frames.close()


def test_a_tail_can_stop_at_the_pause(bread):
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    assert list(bread.tail(paused.run_id, through_pause=False))[-1].type == "human:required"


# -- the dedup rule, over every way two sources can interleave ----------------------------------


DELTA_KINDS = {1: TEXT_DELTA, 2: REASONING_DELTA}  # True == 1


def build_run(shape):
    """Live frames and log entries of a run made of segments (1 or True: a text delta, 2: a
    reasoning delta) and durable crumbs (0 or False), aggregated as the choke point does."""
    live, log, seq, segments = [], [], 0, []
    for i, step in enumerate(shape):
        if step:
            kind, delta = DELTA_KINDS[step], f"<{i}>"
            live.append(Frame("r", seq, {"type": kind, "runId": "r", "delta": delta}))
            if segments and segments[-1][0] == kind:
                segments[-1][1].append(delta)
            else:
                segments.append((kind, [delta]))
            continue
        for kind, parts in segments:
            seq += 1
            log.append(Frame("r", seq, {"type": kind, "runId": "r", "delta": "".join(parts)}))
        segments = []
        seq += 1
        frame = Frame("r", seq, {"type": "tool:call", "runId": "r", "n": i})
        log.append(frame)
        live.append(frame)
    return live, log


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.booleans(), min_size=1, max_size=30).map(lambda s: [*s, False]), data=st.data())
def test_dedup_delivers_every_durable_once_and_all_text_once(shape, data):
    live, log = build_run(shape)
    order = data.draw(st.permutations([LIVE] * len(live) + [LOG] * len(log)))
    sources = {LIVE: iter(live), LOG: iter(log)}
    dedup = Dedup(0)
    out = [dedup.accept(next(sources[source]), source) for source in order]
    delivered = [f for f in out if f is not None]
    assert durables(delivered) == [(f.seq, f.type) for f in log if f.type != TEXT_DELTA]
    assert text_of(delivered) == text_of(live)


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(0, 2), min_size=1, max_size=30).map(lambda s: [*s, 0]), data=st.data())
def test_dedup_delivers_reasoning_once_beside_text_by_the_same_rule(shape, data):
    live, log = build_run(shape)
    order = data.draw(st.permutations([LIVE] * len(live) + [LOG] * len(log)))
    sources = {LIVE: iter(live), LOG: iter(log)}
    dedup = Dedup(0)
    out = [dedup.accept(next(sources[source]), source) for source in order]
    delivered = [f for f in out if f is not None]
    assert durables(delivered) == durables(log)
    assert text_of(delivered) == text_of(live)
    assert text_of(delivered, REASONING_DELTA) == text_of(live, REASONING_DELTA)


# -- a transport that dropped frames --------------------------------------------------------------


def test_a_live_frame_past_a_hole_is_preceded_by_what_the_log_has_in_between(bread):
    # The run executes "here" (registered), so the store follower leaves it to the transport;
    # the transport (the outside world: Redis coming back) carries frames 1 and 6 only.
    from bread_sync.cancel import CancelToken

    run_id, token = "holes", CancelToken()
    bread.store.create_run({
        "id": run_id, "agentId": "echo", "sessionId": "s", "status": "running", "checkpointId": None,
        "owner": bread.owner, "leaseUntil": 4e9, "cancelRequested": False,
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
    })  # fmt: skip
    live, log = build_run([False, True, True, False, False, True, False])
    frames = [Frame(run_id, f.seq, {**f.crumb, "runId": run_id}) for f in log]
    frames[-1] = Frame(run_id, frames[-1].seq, {"type": "agent:run:end", "runId": run_id, "output": "ok"})
    bread.store.append_crumbs(run_id, frames)
    bread.cancels.register(run_id, token)
    try:
        tail = bread.tail(run_id, 0, replay=False)
        bread.transport.publish(frames[0])
        bread.transport.publish(frames[-1])
        got = list(tail)
    finally:
        bread.cancels.unregister(run_id, token)
    assert [(f.seq, f.type) for f in got] == [(f.seq, f.type) for f in frames]


def test_a_long_catch_up_is_read_in_pages_and_misses_nothing(bread):
    from bread_sync.tails.tail import REPLAY_PAGE

    total = 2 * REPLAY_PAGE + 3
    bread.store.create_run({**run_record(bread, "long", "echo", "s"), "status": "completed"})
    frames = [Frame("long", seq, {"type": "tool:call", "runId": "long", "n": seq}) for seq in range(1, total)]
    bread.store.append_crumbs("long", [*frames, Frame("long", total, {"type": "agent:run:end", "runId": "long"})])
    replayed = list(bread.tail("long"))
    assert [f.seq for f in replayed] == list(range(1, total + 1))
    assert list(bread.tail("long", after=REPLAY_PAGE)) == replayed[REPLAY_PAGE:]


def count_log_reads(bread):
    reads = []
    get_crumbs = bread.store.get_crumbs
    bread.store.get_crumbs = lambda run_id, *a, **k: reads.append(run_id) or get_crumbs(run_id, *a, **k)
    return reads


def reads_within(reads, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not reads:
        time.sleep(0.01)
    return bool(reads)


def test_the_follower_leaves_a_run_started_here_to_the_transport(bread):
    """The response that starts a run tails it with replay=False: once the run has ended here
    (no longer live, its frames still queued for that response) the store is not read for it
    every interval, only at the safety net's pace (2 s)."""
    bread.follower.interval = 0.01
    reads = count_log_reads(bread)
    run = bread.run("echo", "a b c", run_id="here")
    frames = bread.tail("here", heartbeat=5, replay=False)
    run.drain()  # ended here; what follows the start crumb waits in the tail's inbox
    assert next(frames).type == "agent:run:start"  # the tail is now watched by the follower
    assert not reads_within(reads, 0.5)  # 50 follower intervals
    assert list(frames)[-1].type == "agent:run:end"


def test_the_follower_looks_at_a_run_that_no_process_here_runs_every_interval_in_one_read(bread):
    bread.follower.interval = 0.01
    paused = bread.run("writer", {"topic": "x"}, mode="sync")
    frames = bread.tail(paused.run_id, heartbeat=0.05)  # passive, through the pause
    while next(frames).type != "human:required":
        pass
    reads, looks = count_log_reads(bread), []
    last_seqs = bread.store.last_seqs
    bread.store.last_seqs = lambda run_ids: looks.append(list(run_ids)) or last_seqs(run_ids)
    assert next(frames) is None  # past the replay: a heartbeat, and the tail is watched
    assert reads_within(looks, 0.5) and looks[0] == [paused.run_id]
    assert reads == []  # nothing new: its log is not read
    frames.close()


def test_the_tail_of_a_run_started_here_that_another_process_took_over_ends_with_its_interruption(
    make_bread, monkeypatch
):
    monkeypatch.setattr(follower_module, "SAFETY_NET_SECONDS", 0.05)
    store = memory.store()
    here = make_bread(store=store, transport=stream.transport())
    there = make_bread(store=store, transport=stream.transport())  # another process
    here.follower.interval = 0.01
    run = here.run("slow", {"count": 100, "delayMs": 5}, run_id="taken")
    frames = here.tail("taken", heartbeat=5, replay=False)
    driver = threading.Thread(target=run.drain)
    driver.start()
    assert next(frames).type == "agent:run:start"
    there.interrupt(store.get_run("taken"))  # as if this process's lease had lapsed
    got = list(frames)
    driver.join(10)
    assert got[-1].crumb["type"] == "agent:error" and got[-1].crumb["error"]["code"] == "RUN_INTERRUPTED"


def test_a_batched_tail_hands_over_the_same_frames_in_lists(bread):
    bread.store.create_run({**run_record(bread, "long", "echo", "s"), "status": "completed"})
    frames = [Frame("long", seq, {"type": "tool:call", "runId": "long", "n": seq}) for seq in range(1, 700)]
    bread.store.append_crumbs("long", [*frames, Frame("long", 700, {"type": "agent:run:end", "runId": "long"})])
    lists = list(bread.tail("long", batched=True))
    assert [len(items) for items in lists] == [500, 200]  # a replay page at a time
    assert [f for items in lists for f in items] == list(bread.tail("long"))
    run = bread.run("slow", {"count": 300, "delayMs": 0}, run_id="live")
    live = bread.tail("live", heartbeat=5, replay=False, batched=True)
    run.drain()  # everything is queued before the tail takes any of it
    got = list(live)
    assert [len(items) for items in got] == [256, 46]  # at most BATCH at once
    assert [f for items in got for f in items][-1].type == "agent:run:end"


def test_a_follower_pass_the_store_cannot_answer_is_tried_again(make_bread):
    """A store that does not answer for a while (Postgres restarting: STORE_UNAVAILABLE) holds
    the tail up, and the follower reads on once it answers, missing nothing."""
    from bread_sync.errors import STORE_UNAVAILABLE

    store = memory.store()
    a = make_bread(store=store, transport=stream.transport())
    b = make_bread(store=store, transport=stream.transport())  # another process: no shared transport
    paused = a.run("writer", {"topic": "bread"}, mode="sync")
    b.follower.interval = 0.01
    refusals, last_seqs = [], store.last_seqs

    def flaky(run_ids):
        if len(refusals) < 3:
            refusals.append(run_ids)
            raise BreadError(STORE_UNAVAILABLE, "the Postgres store does not answer; retry later")
        return last_seqs(run_ids)

    frames = b.tail(paused.run_id, heartbeat=0.05)
    while next(frames) is not None:  # the replay, up to the pause; then the tail is watched
        pass
    store.last_seqs = flaky
    a.resume(paused.checkpoint["checkpointId"], {"approved": True}, mode="sync")
    got, deadline = [], time.monotonic() + 10
    for frame in frames:  # heartbeats (None) every 0.05 s bound each wait
        got += [frame] if frame is not None else []
        assert time.monotonic() < deadline, "the tail never ended: the follower stopped"
    assert len(refusals) == 3
    assert got[-1].type == "agent:run:end"
    resumed_at = [f.seq for f in store.get_crumbs(paused.run_id) if f.type == "human:required"][-1]
    assert durables(got) == durables(store.get_crumbs(paused.run_id, after=resumed_at))
