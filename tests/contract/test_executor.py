"""The executor seam's contract, over every executor: a queued run submitted is driven once to
its end or pause, from its opening crumb, however often it is submitted; a run opened under
the executor streams the same crumbs to its caller. Huey's queue here is its memory storage,
its tasks executed by a thread of the test as a consumer's worker would."""

from __future__ import annotations

import threading
import time

import pytest

from bread_sync import crumbs as c
from bread_sync.executors import huey as huey_executor
from bread_sync.executors import inline

DEADLINE = 30


@pytest.fixture(params=["inline", "huey"])
def bread(request, make_bread):
    if request.param == "inline":
        yield make_bread()
        return
    executor = huey_executor.executor()
    bread = make_bread(executor=executor)
    executor.consumer(bread, workers=1, worker_type="thread")
    stop = threading.Event()
    worker = threading.Thread(target=_consume, args=(executor.huey, stop), daemon=True)
    worker.start()
    yield bread
    stop.set()
    worker.join(DEADLINE)


def _consume(huey, stop: threading.Event) -> None:
    while not stop.is_set():
        task = huey.dequeue()
        if task is None:
            stop.wait(0.01)
        else:
            huey.execute(task)


def _types(crumbs) -> list[str]:
    return [crumb["type"] for crumb in crumbs if crumb["type"] != c.TEXT_DELTA]


def _log(bread, run_id: str) -> list[str]:
    frames = bread.store.get_crumbs(run_id)
    assert [frame.seq for frame in frames] == list(range(1, len(frames) + 1))
    return _types(frame.crumb for frame in frames)


def test_a_run_and_its_resume_stream_the_same_crumbs_with_either_executor(bread):
    run = bread.run("writer", {"topic": "bread"})
    paused = _types(run)
    assert paused[0] == c.AGENT_RUN_START and paused[-1] == c.HUMAN_REQUIRED
    checkpoint_id = bread.store.get_run(run.run_id)["checkpointId"]
    resumed = _types(bread.resume(checkpoint_id, {"approved": True}))
    assert resumed[0] == c.HUMAN_RESUMED and resumed[-1] == c.AGENT_RUN_END
    assert _log(bread, run.run_id) == paused + resumed
    assert bread.store.get_run(run.run_id)["status"] == "completed"


def test_a_queued_run_submitted_twice_is_driven_once(bread, make_bread):
    queue = huey_executor.executor()  # never consumed: the run stays queued
    opener = make_bread(executor=queue, store=bread.store)
    run = opener.run("echo", "hello there")
    run.drain()  # its opening: the rest is a worker's
    assert bread.store.get_run(run.run_id)["status"] == "queued"
    executor = bread.executor if bread.executor.queues else inline.executor()
    executor.submit(bread, run.run_id)
    executor.submit(bread, run.run_id)
    deadline = time.monotonic() + DEADLINE
    while bread.store.get_run(run.run_id)["status"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.01)
    log = _log(bread, run.run_id)
    assert log.count(c.AGENT_RUN_START) == 1 and log[-1] == c.AGENT_RUN_END and log.count(c.AGENT_RUN_END) == 1
