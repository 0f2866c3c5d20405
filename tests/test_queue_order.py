"""What users of a queue expect (issue 27 item 4), in-process on Huey's memory storage, each
message executed by the test: a session's queued runs go in their order, waiting in the queue and
not in a process; an agent's cap holds at the claim and a run past it waits queued; a delayed run
is not claimed before its time; a schedule's tick opens one run however many workers tick, on a
clock the test drives. Across real processes: tests/integration/test_queue_order.py."""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from bread_sync import crumbs as c
from bread_sync.demo import config as demo_config
from bread_sync.engine.queued import drive_queued, open_queued
from bread_sync.errors import QUEUE_UNAVAILABLE, BreadError
from bread_sync.executors import huey as huey_executor
from bread_sync.schedules import Schedule
from bread_sync.stores.sqlite import store as sqlite_store

DEADLINE = 10.0


@pytest.fixture
def queue():
    return huey_executor.executor()


def _config(**agent_updates):
    """The demo config with its echo agent changed as given."""
    config = demo_config()
    agents = [dataclasses.replace(a, **agent_updates) if a.id == "echo" else a for a in config.agents]
    return config.model_copy(update={"agents": agents})


def _queued(bread, **options) -> str:
    run = bread.run("echo", "hello there", **options)
    run.drain()  # its opening; the rest is a worker's
    assert bread.store.get_run(run.run_id)["status"] == "queued"
    return run.run_id


def _execute_pending(queue, bread) -> list:
    """Execute every message in the queue once (a worker's turn), due or not: Huey's clock is
    moved on to a held message's ``eta`` (the run's claim decides on the real one); the messages."""
    queue.consumer(bread, workers=1, worker_type="thread")
    messages = _messages(queue)
    for message in messages:
        queue.huey.execute(message, timestamp=message.eta)
    return messages


def _messages(queue) -> list:
    """The messages in the queue and those Huey holds for later, taken out."""
    pending = [queue.huey.dequeue() for _ in range(queue.huey.pending_count())]
    return pending + queue.huey.read_schedule(datetime(9999, 1, 1))


def _ended(bread, run_id) -> bool:
    return bread.store.get_run(run_id)["status"] == "completed"


def test_a_sessions_queued_runs_wait_in_the_queue_and_go_in_their_order(make_bread, queue):
    bread = make_bread(executor=queue)
    first = _queued(bread, session="ses_1")
    second = _queued(bread, session="ses_1", session_policy="enqueue")  # opened at once: no wait here
    third = _queued(bread, session="ses_1", session_policy="enqueue")
    queue.consumer(bread, workers=1, worker_type="thread")
    messages = _messages(queue)
    ended = []
    for _ in range(5):  # delivered in reverse: the later runs go back to the queue, for a later try
        for message in reversed(messages):
            queue.huey.execute(message, timestamp=message.eta)
            ended += [run_id for run_id in (first, second, third) if _ended(bread, run_id) and run_id not in ended]
        messages = _messages(queue)
        assert all(message.eta is not None for message in messages)
    assert ended == [first, second, third]
    assert all(bread.store.get_crumbs(run_id)[-1].type == c.AGENT_RUN_END for run_id in ended)


def test_an_agents_cap_holds_at_the_claim_and_a_run_past_it_waits_queued(make_bread, queue):
    bread = make_bread(_config(max_concurrent_runs=1), executor=queue)
    first, second = _queued(bread), _queued(bread)
    queue.consumer(bread, workers=1, worker_type="thread")
    queue.huey.dequeue()  # first's message: claimed by hand and left running
    opened = open_queued(bread, first)
    assert bread.store.get_run(first)["status"] == "running"
    queue.huey.execute(queue.huey.dequeue())  # second's: past the cap, back in the queue for later
    assert bread.store.get_run(second)["status"] == "queued"
    for _ in opened.crumbs:
        pass
    assert len(_execute_pending(queue, bread)) == 1
    assert _ended(bread, first) and _ended(bread, second)


def test_with_the_inline_executor_a_capped_agents_runs_wait_and_all_complete(make_bread):
    bread = make_bread(_config(max_concurrent_runs=1))
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda n: bread.run("echo", f"run {n}").result(), range(3)))
    assert [result.output for result in results] == ["run 0", "run 1", "run 2"]


def test_a_delayed_run_is_not_claimed_before_its_time(make_bread, queue):
    bread = make_bread(executor=queue)
    after = datetime.now(UTC) + timedelta(seconds=0.5)
    run_id = _queued(bread, after=after)
    assert bread.store.get_run(run_id)["notBefore"] == after.timestamp()
    _execute_pending(queue, bread)  # too early: held for its time
    assert bread.store.get_run(run_id)["status"] == "queued"
    (held,) = _execute_pending(queue, bread)
    assert held.eta is not None and abs(held.eta.replace(tzinfo=UTC) - after) < timedelta(seconds=1.5)
    deadline = time.monotonic() + DEADLINE
    while not _ended(bread, run_id) and time.monotonic() < deadline:
        _execute_pending(queue, bread)
        time.sleep(0.05)
    assert _ended(bread, run_id)
    ended_at = datetime.fromisoformat(bread.store.get_run(run_id)["updatedAt"])
    assert ended_at >= after


def test_a_delayed_run_inline_runs_at_its_time(make_bread):
    bread = make_bread()
    after = datetime.now(UTC) + timedelta(seconds=0.3)
    result = bread.run("echo", "later", after=after).result()
    assert result.output == "later"
    assert datetime.fromisoformat(bread.store.get_run(result.run_id)["updatedAt"]) >= after


def test_a_naive_after_is_refused_with_the_fix(make_bread):
    with pytest.raises(ValueError, match="timezone-aware"):
        make_bread().run("echo", "x", after=datetime.now())


def test_a_schedule_ticks_once_per_tick_however_many_workers_tick(make_bread, tmp_path):
    config = demo_config().model_copy(update={"schedules": [Schedule("echo", "tick tock", cron="*/5 * * * *")]})
    workers = []
    for _ in range(2):
        queue = huey_executor.executor()
        bread = make_bread(config, store=sqlite_store(tmp_path / "shared.db"), executor=queue)
        queue.consumer(bread, workers=1, worker_type="thread")
        workers.append(queue)
    noon = datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC)
    opened = [queue.tick(noon) for queue in workers] + [queue.tick(noon + timedelta(minutes=1)) for queue in workers]
    assert sum(len(ids) for ids in opened) == 1  # 12:00, however often it is ticked
    later = [queue.tick(noon + timedelta(minutes=5)) for queue in workers]
    assert sum(len(ids) for ids in later) == 1  # 12:05
    (first,), (second,) = [ids for ids in opened + later if ids]
    bread = make_bread(config, store=sqlite_store(tmp_path / "shared.db"))
    records = [bread.store.get_run(run_id) for run_id in (first, second)]
    assert [r["status"] for r in records] == ["queued", "queued"]  # ordinary runs, for a worker
    assert records[0]["sessionId"] != records[1]["sessionId"]
    drive_queued(bread, first)
    assert bread.store.get_run(first)["status"] == "completed"


def test_a_cron_must_have_five_fields():
    with pytest.raises(ValueError, match="five fields"):
        Schedule("echo", cron="*/5 * *")


def test_huey_ticks_the_schedules_every_minute_in_a_worker(make_bread, queue):
    config = demo_config().model_copy(update={"schedules": [Schedule("echo", "tick", cron="0 * * * *")]})
    bread = make_bread(config, executor=queue)
    queue.consumer(bread, workers=1, worker_type="thread")
    queue.now = lambda: datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
    (tick,) = queue.huey.read_periodic(datetime(2026, 12, 4, 12, 1))
    queue.huey.execute(tick)
    (run,) = bread.store.list_runs()
    assert run["status"] == "queued"


def test_a_run_is_refused_unopened_while_its_redis_queue_does_not_answer(make_bread):
    bread = make_bread(executor=huey_executor.executor(url="redis://127.0.0.1:1/0"))
    with pytest.raises(BreadError) as caught:
        bread.run("echo", "hello")
    assert (caught.value.code, caught.value.status) == (QUEUE_UNAVAILABLE, 503)
    assert bread.store.list_runs() == []


def test_a_submission_past_the_redis_queues_connections_waits_for_one_rather_than_failing(redis_url):
    queue = huey_executor.executor(url=redis_url)
    pool = queue.huey.storage.conn.connection_pool
    held = [pool.get_connection() for _ in range(pool.max_connections)]
    try:
        with ThreadPoolExecutor(1) as submitter:
            submitted = submitter.submit(queue.submit, None, "run_1")
            deadline = time.monotonic() + DEADLINE
            while not submitted.done() and not _waiting_for_a_connection(pool):
                assert time.monotonic() < deadline, "the submission neither waited nor ended"
                time.sleep(0.005)  # a pause between polls, bounded by the deadline
            pool.release(held.pop())
            submitted.result(timeout=DEADLINE)  # redis-py's default pool raised MaxConnectionsError
        assert queue.huey.pending_count() == 1
    finally:
        for conn in held:
            pool.release(conn)
        pool.disconnect()  # the pool's connections, all open: left to the collector they warn in a later test


def _waiting_for_a_connection(pool) -> bool:
    return bool(pool.pool.not_empty._waiters)  # BlockingConnectionPool's queue of free connections


def test_a_run_queued_when_its_submission_fails_is_submitted_again_by_a_sweep(make_bread, queue, monkeypatch):
    bread = make_bread(executor=queue, lease_seconds=0.05)
    monkeypatch.setattr(queue, "_drive", _unreachable)
    run_id = _queued(bread)  # its opening logged, its message lost with the queue
    monkeypatch.undo()
    deadline = time.monotonic() + DEADLINE
    while bread.sweep_interrupted() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_execute_pending(queue, bread)) == 1
    assert _ended(bread, run_id)


def _unreachable(*args, **kwargs):
    raise ConnectionError("the queue is down")
