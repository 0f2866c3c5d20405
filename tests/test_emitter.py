"""The choke point's templated wire for text deltas is the JSON a generic encode would give."""

import json

from hypothesis import given
from hypothesis import strategies as st

from bread_sync.crumbs import REASONING_DELTA, TEXT_DELTA, dumps
from bread_sync.engine.emitter import Emitter
from bread_sync.stores import has_crumb_log, last_seqs, memory

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()))  # lone surrogates and controls too


@given(run_id=ANY_TEXT.filter(bool), deltas=st.lists(ANY_TEXT, min_size=1, max_size=5))
def test_delta_frames_and_their_aggregate_carry_the_json_of_their_crumb(run_id, deltas):
    store = memory.store()
    published = []
    emitter = Emitter(run_id, store, published.append)
    for delta in deltas:
        emitter.emit({"type": TEXT_DELTA, "runId": run_id, "delta": delta})
    emitter.emit({"type": "agent:run:end", "runId": run_id, "output": None})
    aggregated = store.get_crumbs(run_id)[0]
    for frame in [*published, aggregated]:
        if frame.type == TEXT_DELTA:
            assert frame.wire == dumps(frame.crumb)
            assert json.loads(frame.wire) == frame.crumb
    assert aggregated.crumb["delta"] == "".join(deltas)


def test_a_delta_with_more_fields_is_encoded_whole():
    emitter = Emitter("run_1", memory.store(), lambda frame: None)
    crumb = {"type": TEXT_DELTA, "runId": "run_1", "delta": "hi", "agentId": "a"}
    assert json.loads(emitter.emit(crumb).wire) == crumb


class LogOnly:
    """A third-party store with the crumb log's first methods and neither batch nor last_seqs."""

    def __init__(self):
        self._store = memory.store()
        self.append_crumbs, self.get_crumbs, self.last_seq = (
            self._store.append_crumbs,
            self._store.get_crumbs,
            self._store.last_seq,
        )
        self.touched = []

    def touch_session(self, session_id):
        self.touched.append(session_id)


def test_a_store_without_batch_or_last_seqs_still_serves_the_choke_point_and_the_follower():
    store = LogOnly()
    assert has_crumb_log(store)
    emitter = Emitter("r1", store, lambda frame: None)
    emitter.defer(lambda: store.touch_session("s1"))
    emitter.emit({"type": "agent:run:start", "runId": "r1"})
    assert store.touched == ["s1"] and store.last_seq("r1") == 1
    assert last_seqs(store, ["r1", "r2"]) == {"r1": 1}


def test_each_run_of_deltas_of_one_type_is_logged_as_an_entry_of_its_own_in_order():
    store = memory.store()
    emitter = Emitter("r", store, lambda frame: None)
    for kind, delta in [
        (REASONING_DELTA, "Thin"),
        (REASONING_DELTA, "king."),
        (TEXT_DELTA, "Yes"),
        (REASONING_DELTA, "!"),
    ]:
        frame = emitter.emit({"type": kind, "runId": "r", "delta": delta})
        assert (frame.seq, json.loads(frame.wire)) == (0, frame.crumb)  # live: the watermark, templated
    assert emitter.next_seq == 4
    emitter.emit({"type": "agent:run:end", "runId": "r", "output": "Yes"})
    logged = [(f.seq, f.type, f.crumb.get("delta")) for f in store.get_crumbs("r")]
    assert logged == [
        (1, REASONING_DELTA, "Thinking."),
        (2, TEXT_DELTA, "Yes"),
        (3, REASONING_DELTA, "!"),
        (4, "agent:run:end", None),
    ]


def test_a_watcher_is_told_of_each_durable_crumb_once_logged_and_never_of_a_delta():
    store = memory.store()
    seen = []
    emitter = Emitter("run_1", store, lambda frame: None)
    emitter.watch(lambda crumb: seen.append((crumb["type"], store.last_seq("run_1"))))
    emitter.emit({"type": "agent:run:start", "runId": "run_1"})
    for delta in ("a", "b"):
        emitter.emit({"type": TEXT_DELTA, "runId": "run_1", "delta": delta})
    emitter.emit({"type": REASONING_DELTA, "runId": "run_1", "delta": "c"})
    emitter.emit({"type": "agent:run:end", "runId": "run_1", "output": None})
    # each after its commit: the log holds it (and the aggregated deltas before it) already
    assert seen == [("agent:run:start", 1), ("agent:run:end", 4)]
