"""Checks of the one canonical crumb stream, shared by the tests of every kind of run."""

from bread_sync.crumbs import TERMINAL, TEXT_DELTA, Frame, to_wire_crumb


class Recorder:
    """Subscribes to a bread's listeners and its transport for one run id."""

    def __init__(self, bread, run_id: str):
        self.listened: list[Frame] = []
        self.carried: list[Frame] = []
        bread.on("crumb", lambda f: f.run_id == run_id and self.listened.append(f))
        self.subscription = bread.transport.subscribe(run_id, 0, self.carried.append)


def expected_log(live: list[Frame]) -> list[tuple[str, dict]]:
    """What the log must hold for these live frames: deltas aggregated before each durable."""
    rows, text = [], []
    for frame in live:
        if frame.type == TEXT_DELTA:
            text.append(frame.crumb["delta"])
            continue
        if text:
            rows.append((TEXT_DELTA, "".join(text)))
            text = []
        rows.append((frame.type, frame.wire))
    return rows


def assert_canonical(bread, run_id: str, recorder: Recorder, yielded: list[dict]) -> list[Frame]:
    """Listeners, transport and yielded crumbs agree; the log replays them with deltas
    aggregated; durable seqs run 1..n without gaps; deltas carry the watermark."""
    live = recorder.listened
    assert [f.crumb for f in live] == yielded
    assert [(f.seq, f.wire) for f in recorder.carried] == [(f.seq, f.wire) for f in live]

    log = bread.store.get_crumbs(run_id)
    assert [f.seq for f in log] == list(range(1, len(log) + 1))
    actual = [(f.type, f.crumb["delta"] if f.type == TEXT_DELTA else f.wire) for f in log]
    assert actual == expected_log(live)

    watermark, logged = 0, iter(f for f in log if f.type != TEXT_DELTA)
    for frame in live:
        if frame.type == TEXT_DELTA:
            assert frame.seq == watermark, "a live delta carries the last durable seq"
        else:
            entry = next(logged)
            assert (frame.seq, frame.wire) == (entry.seq, entry.wire) and frame.seq > watermark
            watermark = frame.seq
    terminals = [f for f in log if f.type in TERMINAL]
    assert len(terminals) <= 1
    return log


def wire(crumb: dict) -> dict:
    return to_wire_crumb(crumb)
