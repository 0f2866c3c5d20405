"""A worker's graceful stop, in process: the runner closes, runs that finish in time finish, the
rest stop at a step boundary and are handed over (for another process to carry on), and one
stuck in a step is left for another process to carry on once this one is gone.
(tests/integration/test_lifecycle.py does the same to a real gunicorn server with SIGTERM.)
Last, real servers stopped by SIGTERM and SIGINT say nothing alarming as they exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from bread_sync import Agent, Config
from bread_sync.agents import subagent
from bread_sync.errors import TOO_MANY_RUNS, BreadError
from bread_sync.loops import Loop
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.server.lifecycle import Lifecycle
from bread_sync.server.runner import Runner
from tests.integration.fault_config import config as fault_config
from tests.integration.servers import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: The two ways to serve with bread_sync's gunicorn settings; ``{port}`` is filled in.
SERVERS = {
    "gunicorn": [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-w", "1", "-b", "127.0.0.1:{port}", "wsgi:app"],
    "bread-sync start": [str(BIN / "bread-sync"), "start", "--port", "{port}", "--workers", "1"],
}
DEADLINE = 30.0  # seconds for a server to exit; generous for a loaded CI machine


@pytest.fixture
def bread(make_bread):
    return make_bread(Config(agents=fault_config().agents))


def drive(bread, runner: Runner, agent: str, body: dict) -> str:
    with runner.slot() as slot:
        run = bread.run(agent, body, signal=slot.token)
        slot.drive(run)
    return run.run_id


def status(bread, run_id: str) -> str:
    return bread.store.get_run(run_id)["status"]


def last(bread, run_id: str) -> dict:
    return bread.store.get_crumbs(run_id)[-1].crumb


def test_a_closed_runner_starts_no_run():
    runner = Runner(max_runs=5, timeout=None)
    runner.close()
    with pytest.raises(BreadError) as caught:
        runner.slot()
    assert caught.value.code == TOO_MANY_RUNS and "shutting down" in caught.value.message


def handed_over(bread, run_id: str) -> bool:
    """Whether a run was left for the next process to carry on at once: running, no owner, no lease."""
    record = bread.store.get_run(run_id)
    return (record["status"], record["owner"], record["leaseUntil"]) == ("running", None, 0.0)


def test_stop_finishes_short_runs_hands_long_ones_over_and_leaves_stuck_ones(bread, make_bread):
    runner = Runner(max_runs=10, timeout=None)
    short = drive(bread, runner, "stepper", {"count": 2, "delayMs": 50})
    long = drive(bread, runner, "slow", {"count": 1000, "delayMs": 20})
    stuck = drive(bread, runner, "stuck", {"seconds": 4})
    time.sleep(0.3)  # the stuck run is inside its tool by now

    began = time.monotonic()
    Lifecycle(bread, runner, graceful_timeout=3.0).stop(3.0)
    took = time.monotonic() - began

    assert took < 3.0
    assert status(bread, short) == "completed"
    assert handed_over(bread, long) and last(bread, long)["type"] == "agent:run:start"  # its ticks are text
    assert status(bread, stuck) == "running" and bread.store.get_run(stuck)["owner"] == bread.owner
    assert last(bread, stuck)["type"] == "tool:call"  # its outcome unknown once this process is gone
    with pytest.raises(BreadError):
        runner.slot()

    successor = make_bread(store=bread.store).start()  # its sweep carries the run handed over on, at once
    deadline = time.monotonic() + DEADLINE
    for frame in successor.tail(long, heartbeat=0.05):
        assert time.monotonic() < deadline, "the run was not carried on"
        if frame is not None and frame.type == "agent:run:continued":
            break
    assert frame.crumb["reason"] == "shutdown" and frame.crumb["afterSeq"] == 1
    assert successor.cancel(long)


def test_a_stop_without_drain_hands_over_at_once(bread):
    runner = Runner(max_runs=10, timeout=None)
    run_id = drive(bread, runner, "slow", {"count": 1000, "delayMs": 20})  # 20 s of ticks
    deadline = time.monotonic() + 10.0
    while bread.store.get_run(run_id)["owner"] is None:  # under way: driven here, under its lease
        assert time.monotonic() < deadline
        time.sleep(0.01)

    began = time.monotonic()
    Lifecycle(bread, runner, graceful_timeout=30.0).stop(20.0, drain=False)

    assert time.monotonic() - began < 10.0  # a drain would wait out its 20 s for the run
    assert handed_over(bread, run_id)


def test_a_second_stop_waits_for_the_first(bread):
    runner = Runner(max_runs=10, timeout=None)
    drive(bread, runner, "slow", {"count": 1000, "delayMs": 20})
    life = Lifecycle(bread, runner, graceful_timeout=2.0)
    first = threading.Thread(target=life.stop, args=(2.0,))
    first.start()
    time.sleep(0.05)

    life.stop(5.0)  # returns when the first one is done, without stopping anything twice

    assert life.done.is_set()
    first.join(5)


def test_the_late_sweep_marks_a_run_whose_owner_died(make_bread):
    bread = make_bread(Config(agents=fault_config().agents, lease_seconds=0.2))
    now = time.time()
    bread.store.create_run({
        "id": "orphan", "agentId": "echo", "sessionId": "s", "status": "running", "checkpointId": None,
        "owner": "a-process-that-died", "leaseUntil": now + 0.3, "cancelRequested": False,
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
    })  # fmt: skip
    assert bread.sweep_interrupted() == 0  # what the start-up sweep finds: its lease still runs
    life = Lifecycle(bread, Runner(max_runs=1, timeout=None), graceful_timeout=1.0)

    life.sweep_later()

    deadline = time.monotonic() + 5
    while status(bread, "orphan") == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status(bread, "orphan") == "interrupted"
    assert last(bread, "orphan")["error"]["code"] == "RUN_INTERRUPTED"


def test_a_run_stopped_inside_a_subagent_is_handed_over_without_a_tool_error(make_bread):
    # A shutdown stops a run through its token with RUN_INTERRUPTED, as a timeout does with
    # RUN_TIMEOUT: a delegation re-raises it (engine.RUN_ENDING), so the parent stops there
    # rather than taking it for the tool's error and going on to its next step.
    boss = Agent(id="boss", model=script.provider([call("slow", {"count": 1000, "delayMs": 20}), say("done")]),
                 tools=[subagent("slow")])  # fmt: skip
    bread = make_bread(Config(agents=[*fault_config().agents, boss]))
    runner = Runner(max_runs=10, timeout=None)
    run_id = drive(bread, runner, "boss", "go")
    time.sleep(0.2)  # inside the subagent's ticks by now

    Lifecycle(bread, runner, graceful_timeout=30.0).stop(1.5, drain=False)

    types = [f.type for f in bread.store.get_crumbs(run_id)]
    assert handed_over(bread, run_id) and "agent:error" not in types
    assert "tool:error" not in types and "subagent:run:end" not in types, types


@pytest.fixture
def serve(tmp_path):
    """Start a server (a key of SERVERS) on a free port; its output goes to a log file. Every
    process still running is killed, with its workers, when the test ends."""
    started = []

    def start(command: str) -> tuple[subprocess.Popen, int, Path]:
        port, log = free_port(), tmp_path / f"server-{len(started)}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BREAD_", "GUNICORN_", "WEB_"))}
        env.update(BREAD_DB=str(tmp_path / "bread.db"), BREAD_INSTANCE=str(tmp_path), PYTHONUNBUFFERED="1")
        args = [arg.format(port=port) for arg in SERVERS[command]]
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        started.append(proc)
        wait_until_serving(proc, port, log)
        return proc, port, log

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started, nothing else
            proc.wait(DEADLINE)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", SERVERS)
def test_a_server_stops_without_a_traceback(serve, command, signum):
    proc, port, log = serve(command)
    answer = httpx.post(f"http://127.0.0.1:{port}/agents/echo/run", json={"input": "hi"}, timeout=DEADLINE)
    assert answer.status_code == 200 and '"agent:run:end"' in answer.text

    proc.send_signal(signum)

    assert proc.wait(DEADLINE) == 0
    text = log.read_text()
    assert "Worker exiting" in text  # gunicorn waits for its workers: what they printed is in
    assert "Exception ignored" not in text and "Traceback" not in text, text


def test_a_loop_handed_over_mid_iteration_goes_on_with_that_iteration_and_its_records_end_right(make_bread):
    lingering = Agent(id="lingering", model=script.provider([say(["tick "] * 50, delay=0.02)]),
                      loop=Loop(max_iterations=2))  # fmt: skip
    config = Config(agents=[lingering])
    bread = make_bread(config)
    runner = Runner(max_runs=10, timeout=None)
    run_id = drive(bread, runner, "lingering", "go")
    deadline = time.monotonic() + DEADLINE
    while "loop:iteration:start" not in [f.type for f in bread.store.get_crumbs(run_id)]:
        assert time.monotonic() < deadline, "the loop's first iteration did not start"
        time.sleep(0.01)

    Lifecycle(bread, runner, graceful_timeout=30.0).stop(1.5, drain=False)
    assert handed_over(bread, run_id)

    successor = make_bread(config, store=bread.store).start()  # its sweep carries the loop on
    for frame in successor.tail(run_id, heartbeat=0.05):
        assert time.monotonic() < deadline, "the loop was not carried on to its end"
        if frame is not None and frame.type == "agent:run:end":
            break
    types = [f.type for f in successor.store.get_crumbs(run_id)]
    assert types.count("agent:run:continued") == 1 and types.count("loop:iteration:start") == 2, types
    (record,) = successor.store.list_loops()
    assert (record["status"], record["iterations"]) == ("completed", 2)
    iterations = successor.store.get_loop(record["id"])["iterations"]
    assert [(i["index"], i["status"]) for i in iterations] == [(1, "completed"), (2, "completed")]
