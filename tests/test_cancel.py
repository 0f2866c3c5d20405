"""Cancel tokens, the registry, cancels across processes sharing a store, interrupted runs."""

import json
import subprocess
import sys
import threading
import time

import pytest

from bread_sync import Agent, BreadError, CancelToken, Config, tool
from bread_sync.cancel import CancelRegistry
from bread_sync.engine import recovery
from bread_sync.errors import STORE_BUSY
from bread_sync.loading import resolve
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.stores import STORES, memory

from .canonical import Recorder
from .dying import Died, failing_at_the_end


def test_a_token_is_thread_safe_and_calls_back_once():
    token, calls = CancelToken(), []
    token.on_cancel(lambda: calls.append(1))
    threads = [threading.Thread(target=token.cancel) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert token.cancelled and calls == [1]
    token.on_cancel(lambda: calls.append(2))  # already cancelled: at once
    assert calls == [1, 2]


def test_the_registry_cancels_only_live_runs():
    reg, token = CancelRegistry(), CancelToken()
    reg.register("r", token)
    assert reg.cancel("r") and token.cancelled
    reg.unregister("r", token)
    assert not reg.cancel("r") and "r" not in reg


def start_in_thread(bread, agent_id, input, **kwargs):
    crumbs, first = [], threading.Event()

    def drive():
        for crumb in bread.run(agent_id, input, **kwargs):
            crumbs.append(crumb)
            first.set()

    thread = threading.Thread(target=drive)
    thread.start()
    assert first.wait(10), "the run never started"
    return thread, crumbs


def test_cancel_interrupts_a_provider_read_within_one_step(bread):
    # Each tick waits 30 s: only a cancel that reaches into the provider's wait ends it soon.
    thread, crumbs = start_in_thread(bread, "slow", {"count": 5, "delayMs": 30_000}, run_id="r1")
    started = time.monotonic()
    assert bread.cancel("r1")
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 5
    assert crumbs[-1]["type"] == "agent:error" and crumbs[-1]["error"].code == "RUN_CANCELLED"
    assert [c["type"] for c in crumbs].count("text:delta") == 1
    assert bread.store.get_run("r1")["status"] == "cancelled"
    assert "r1" not in bread.cancels


def test_cancel_during_a_tool_stops_before_the_next_model_turn(make_bread):
    token = CancelToken()

    @tool
    def stop(input, ctx) -> str:
        """Cancels its own run."""
        token.cancel()
        return "done"

    agent = Agent(id="stopper", model=script.provider([call("stop", {}), say("never said")]), tools=[stop])
    bread = make_bread(Config(agents=[agent]))
    types = [c["type"] for c in bread.run("stopper", signal=token)]
    assert types[-3:] == ["tool:call", "tool:result", "agent:error"]
    assert "text:delta" not in types


def test_cancelling_a_paused_run_voids_its_checkpoint(bread):
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    recorder = Recorder(bread, paused.run_id)
    assert bread.cancel(paused.run_id)
    log = bread.store.get_crumbs(paused.run_id)
    assert log[-1].crumb["error"]["code"] == "RUN_CANCELLED" and log[-2].type == "human:required"
    assert recorder.carried[-1].seq == log[-1].seq  # the passive tail hears it too
    assert bread.store.get_run(paused.run_id)["status"] == "cancelled"
    try:
        bread.resume(paused.checkpoint["checkpointId"], {"approved": True})
    except BreadError as exc:
        assert exc.code == "CHECKPOINT_ALREADY_RESUMED"
    else:
        raise AssertionError("a voided checkpoint resumed")
    assert not bread.cancel(paused.run_id)


def test_unknown_and_finished_runs_cannot_be_cancelled(bread):
    done = bread.run("echo", "hi", mode="sync")
    assert not bread.cancel(done.run_id)
    assert not bread.cancel("run_unknown")


def test_a_cancel_recorded_by_another_process_is_honoured_by_the_owner(make_bread):
    store = memory.store()
    owner = make_bread(store=store, cancel_poll_seconds=0.05)
    other = make_bread(store=store)
    thread, crumbs = start_in_thread(owner, "slow", {"count": 5, "delayMs": 30_000}, run_id="r2")
    assert other.cancel("r2")  # not live in `other`: recorded in the store
    thread.join(5)
    assert not thread.is_alive()
    assert crumbs[-1]["error"].code == "RUN_CANCELLED"


def ended(bread, run_id: str) -> list[str]:
    """The types of a run's log once it ended (a tail, bounded in time)."""
    deadline = time.monotonic() + 10
    for frame in bread.tail(run_id, heartbeat=0.05):
        assert time.monotonic() < deadline, "the run did not end"
        if frame is not None and frame.type in ("agent:run:end", "agent:error"):
            break
    return [f.type for f in bread.store.get_crumbs(run_id)]


def test_a_run_whose_owner_died_is_carried_on_at_start_up(make_bread):
    store = memory.store()
    dead = make_bread(store=store)
    run = dead.run("slow", {"count": 3, "delayMs": 0}, run_id="r3")
    next(run)  # agent:run:start is logged; then the process "dies"
    store.update_run("r3", leaseUntil=0.0)
    dead.cancels.unregister("r3", dead.cancels._tokens["r3"])  # as if the process vanished
    survivor = make_bread(store=store)
    assert survivor.start()
    log = ended(survivor, "r3")
    assert log == ["agent:run:start", "agent:run:continued", "text:delta", "agent:run:end"]
    assert store.get_run("r3")["status"] == "completed"
    run.close()  # the zombie stops pulling late: the log stays as the survivor left it
    assert len(store.get_crumbs("r3")) == 4


def test_an_abandoned_run_ends_interrupted_not_running_forever(bread):
    run = bread.run("slow", {"count": 3, "delayMs": 0})
    next(run)
    run.close()
    assert bread.store.get_run(run.run_id)["status"] == "interrupted"
    assert bread.store.get_crumbs(run.run_id)[-1].crumb["error"]["code"] == "RUN_INTERRUPTED"


def test_an_abandoned_run_is_never_recorded_interrupted_without_its_terminal_crumb(bread, monkeypatch):
    run = bread.run("slow", {"count": 3, "delayMs": 0})
    next(run)
    failing_at_the_end(bread.store, monkeypatch)
    with pytest.raises(Died):
        run.close()
    monkeypatch.undo()

    assert [frame.type for frame in bread.store.get_crumbs(run.run_id)] == ["agent:run:start"]
    assert bread.store.get_run(run.run_id)["status"] == "running"  # left for a sweep once its lease lapses


def test_an_abandon_the_store_refuses_is_said_not_raised_from_close(bread, monkeypatch, caplog):
    run = bread.run("slow", {"count": 3, "delayMs": 0})
    next(run)
    failing_at_the_end(bread.store, monkeypatch, lambda: BreadError(STORE_BUSY, "the store is busy"))
    run.close()
    monkeypatch.undo()

    assert f"run {run.run_id}: abandoned, its end not logged (STORE_BUSY)" in caplog.text
    assert bread.store.get_run(run.run_id)["status"] == "running"  # left for a sweep once its lease lapses


def test_a_zombie_owner_stops_once_its_run_was_carried_on_elsewhere(make_bread):
    store = memory.store()
    zombie = make_bread(store=store)
    run = zombie.run("slow", {"count": 3, "delayMs": 0}, run_id="r4")
    next(run)
    store.update_run("r4", leaseUntil=0.0)
    survivor = make_bread(store=store).start()
    carried = ended(survivor, "r4")
    rest = list(run)  # the zombie wakes up: its next durable crumb finds the seq taken
    assert [c["type"] for c in rest].count("agent:run:end") == 0
    assert [f.type for f in store.get_crumbs("r4")] == carried == [
        "agent:run:start", "agent:run:continued", "text:delta", "agent:run:end"
    ]  # fmt: skip


TIMED_WAITS_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, time
import gevent
import gevent.timeout
from bread_sync.cancel import CancelToken

made = []
original = gevent.timeout.Timeout.__init__
gevent.timeout.Timeout.__init__ = lambda self, *a, **k: made.append(1) or original(self, *a, **k)
token, out = CancelToken(), {}
started = time.monotonic()
out["timed_out"] = [token.wait(0.01) for _ in range(5)]
out["waited"] = time.monotonic() - started
gevent.spawn_later(0.02, token.cancel)
started = time.monotonic()
out["cancelled"] = token.wait(30)
out["woken_after"] = time.monotonic() - started
out["links_left"] = token._event.linkcount()
out["timeouts_made"] = len(made)
print(json.dumps(out))
"""


def test_under_gevent_a_timed_wait_sleeps_on_a_timer_and_a_cancel_wakes_it():
    # A model that sleeps between deltas waits on its token each time: no gevent Timeout for it.
    done = subprocess.run([sys.executable, "-c", TIMED_WAITS_UNDER_GEVENT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["timed_out"] == [False] * 5 and out["waited"] >= 0.045
    assert out["cancelled"] is True and out["woken_after"] < 20
    assert out["links_left"] == 0
    assert out["timeouts_made"] == 0


@pytest.mark.parametrize("store_name", ["memory", "sqlite", "postgres"])
def test_a_paused_run_is_never_recorded_cancelled_without_its_terminal_crumb(make_bread, store_name, tmp_path,
                                                                             request, monkeypatch):  # fmt: skip
    # A tail of a paused run learns of its end from the log (Postgres' listener hears appends
    # only): a record marked cancelled before a process died writing the crumb left it waiting.
    opts = {"sqlite": {"path": tmp_path / "bread.db"}, "postgres": {"url": None}}.get(store_name, {})
    if store_name == "postgres":
        opts["url"] = request.getfixturevalue("postgres_url")
    bread = make_bread(store=resolve(store_name, STORES, "store", **opts))
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    failing_at_the_end(bread.store, monkeypatch)
    with pytest.raises(Died):
        bread.cancel(paused.run_id)
    monkeypatch.undo()

    assert bread.store.get_crumbs(paused.run_id)[-1].type == "human:required"  # the crumb died with it
    assert bread.store.get_run(paused.run_id)["status"] == "paused"  # so no record says the run ended
    # Its checkpoint is void (no resume can take it): a cancel again finishes what that one began.
    assert bread.cancel(paused.run_id) is True
    assert_ended_cancelled_once(bread, paused.run_id)


def assert_ended_cancelled_once(bread, run_id: str) -> None:
    log = bread.store.get_crumbs(run_id)
    assert [frame.type for frame in log].count("agent:error") == 1 and log[-1].type == "agent:error"
    assert log[-1].crumb["error"]["code"] == "RUN_CANCELLED"
    assert [frame.seq for frame in log] == list(range(1, len(log) + 1))
    assert bread.store.get_run(run_id)["status"] == "cancelled"


@pytest.mark.parametrize("store_name", ["memory", "sqlite"])
def test_two_cancels_finishing_an_unfinished_one_end_the_run_once(make_bread, store_name, tmp_path, monkeypatch):
    opts = {"sqlite": {"path": tmp_path / "bread.db"}}.get(store_name, {})
    bread = make_bread(store=resolve(store_name, STORES, "store", **opts))
    paused = bread.run("writer", {"topic": "bread"}, mode="sync")
    store = bread.store
    store.claim_checkpoint(store.get_run(paused.run_id)["checkpointId"], status="void")  # a cancel that died
    cancel_remote, raced = recovery._cancel_remote, []

    def another_cancel_ends_it_meanwhile(runtime, record):
        if not raced:  # this cancel has checked the record; the other commits the run's end now
            raced.append("under way")
            raced.append(bread.cancel(record["id"]))
        cancel_remote(runtime, record)

    monkeypatch.setattr(recovery, "_cancel_remote", another_cancel_ends_it_meanwhile)
    assert bread.cancel(paused.run_id) is True  # it finds the seq taken: the end is the other's
    monkeypatch.undo()

    assert raced == ["under way", True]
    assert_ended_cancelled_once(bread, paused.run_id)
