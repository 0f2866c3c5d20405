"""Run owners: what an owner string names, whether that process is known to be gone, and what a
Bread does with a run whose owner is gone (start-up, a tail, a cancel, a session claim).

The processes are real (children of this test process), read through the real /proc: only
another host is made up, by writing its name into an owner string.
"""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from bread_sync import BreadError
from bread_sync.crumbs import Frame
from bread_sync.engine import owners
from bread_sync.engine.opening import run_record
from bread_sync.stores.sqlite import store as sqlite_store

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="owners are told apart through /proc")


def me() -> owners.Owner:
    return owners.parse(owners.this_process("test"))


def owner_of(pid: int, start: int | None = None, host: str | None = None, kernel: str | None = None) -> str:
    """The owner string that process ``pid`` of this host writes (or one with a field changed)."""
    if start is None:
        start = owners.parse_stat(Path(f"/proc/{pid}/stat").read_text())[1]
    return f"{host or me().host}:{pid}:{start}:{kernel or me().kernel}:tag"


@pytest.fixture
def sleeper():
    """A live process of this host, ended (and reaped) after the test."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait(5)


def ended_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)  # reaped: no process has this pid now
    return proc.pid


# -- the owner string ----------------------------------------------------------------------------


def test_this_process_names_its_host_pid_and_start_time():
    stat = Path("/proc/self/stat").read_text()
    written = owners.this_process("t1")

    assert written.endswith(":t1")
    assert me() == owners.Owner(socket.gethostname(), os.getpid(), owners.parse_stat(stat)[1], me().kernel)


def test_the_start_time_is_read_past_a_command_name_with_spaces_and_parentheses():
    fields = " ".join(str(n) for n in range(4, 53))  # fields 4.. after the state
    line = f"4242 (a (b) c) ) S {fields}\n"

    assert owners.parse_stat(line) == ("S", 22)


@pytest.mark.parametrize(
    "legacy",
    [
        None,
        "",
        "another-process",
        "host:1:a",
        "{host}:{pid}:deadbeef",  # what owners looked like before: host:pid:hex
        "{host}:{pid}:{start}:tag",  # no kernel
        "{host}:{pid}:{start}:{kernel}",  # no tag
        "{host}:0:{start}:{kernel}:tag",
        "{host}:٣:{start}:{kernel}:tag",  # a digit, but not an ASCII one
        "{host}:{pid}:-1:{kernel}:tag",
        "{host}:{pid}:{start}:{kernel}:tag:more",
        "{host}:{pid}:{start}:not-a-kernel:tag",
    ],
)
def test_an_owner_in_another_format_goes_by_the_lease(legacy):
    owner = legacy and legacy.format(host=me().host, pid=ended_pid(), start=1, kernel=me().kernel)

    assert owners.parse(owner) is None
    assert not owners.is_dead_local(owner)


# -- liveness ------------------------------------------------------------------------------------


def test_this_very_process_is_alive():
    assert not owners.is_dead_local(owners.this_process("another-bread"))


def test_an_earlier_process_with_this_pid_is_dead():
    assert owners.is_dead_local(owner_of(os.getpid(), start=me().start - 1))


def test_a_live_process_of_this_host_is_alive(sleeper):
    assert not owners.is_dead_local(owner_of(sleeper.pid))


def test_a_pid_that_another_process_took_since_is_dead(sleeper):
    real_start = owners.parse_stat(Path(f"/proc/{sleeper.pid}/stat").read_text())[1]

    assert owners.is_dead_local(owner_of(sleeper.pid, start=real_start - 1))


def test_a_pid_no_process_has_is_dead():
    assert owners.is_dead_local(owner_of(ended_pid(), start=1))


def test_a_killed_process_not_yet_reaped_is_dead(sleeper):
    owner = owner_of(sleeper.pid)
    os.kill(sleeper.pid, signal.SIGKILL)
    stat = Path(f"/proc/{sleeper.pid}/stat")
    deadline = time.monotonic() + 5
    while owners.parse_stat(stat.read_text())[0] != "Z" and time.monotonic() < deadline:
        os.sched_yield()  # the kernel makes it a zombie at once, for its parent (this test) to reap
    assert owners.parse_stat(stat.read_text())[0] == "Z"

    assert owners.is_dead_local(owner)


@pytest.mark.parametrize("field", ["host", "kernel"])
def test_a_process_elsewhere_goes_by_the_lease_even_with_a_pid_unknown_here(field):
    elsewhere = {"host": "another-host", "kernel": "0badcafe.4026531836"}[field]

    assert not owners.is_dead_local(owner_of(ended_pid(), start=1, **{field: elsewhere}))


FORKED = textwrap.dedent(
    """
    import os
    from bread_sync import Config, create_bread
    bread = create_bread(Config(store="memory"))
    before = bread.owner
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(write, bread.owner.encode())
        os._exit(0)
    os.waitpid(child, 0)
    print(before, os.read(read, 1000).decode(), child)
    """
)


def test_a_worker_forked_after_its_bread_was_made_names_itself():
    out = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    before, after, child = out.stdout.split()

    assert owners.parse(before).pid != owners.parse(after).pid == int(child)
    assert before.rpartition(":")[2] == after.rpartition(":")[2]  # the same Bread


# -- what a Bread does with a run whose owner is gone ---------------------------------------------

#: Far longer than any test here: only the owner's liveness can end these runs in time.
LEASE_SECONDS = 600
ENDED_WITHIN_SECONDS = 10.0

SIBLING = textwrap.dedent(
    """
    import sys
    from bread_sync import create_bread
    from bread_sync.demo import config
    from bread_sync.stores import sqlite

    bread = create_bread(config().model_copy(update={"store": sqlite.store(sys.argv[1]), "lease_seconds": 600}))
    run = bread.run("slow", {"count": 1000, "delayMs": 50}, run_id="sibling-run")
    next(run)
    print("running", flush=True)
    for _ in run:
        pass
    """
)


@pytest.fixture(params=["memory", "sqlite"])
def bread(request, make_bread, tmp_path):
    store = sqlite_store(tmp_path / "bread.db") if request.param == "sqlite" else "memory"
    return make_bread(store=store, lease_seconds=LEASE_SECONDS)


def running_run(bread, run_id: str, owner: str, session: str = "s") -> None:
    """A run record and start crumb as ``owner`` left them, its lease still far from over."""
    bread.store.create_run({**run_record(bread, run_id, "echo", session), "owner": owner})
    bread.store.claim_session(session, run_id)
    bread.store.append_crumbs(run_id, [Frame(run_id, 1, {"type": "agent:run:start", "runId": run_id,
                                                         "agentId": "echo", "input": "hi"})])  # fmt: skip


def follow(tail, seconds: float = ENDED_WITHIN_SECONDS) -> list:
    """The crumbs of a tail (made with a heartbeat) up to its end; fails past ``seconds``."""
    deadline, crumbs = time.monotonic() + seconds, []
    for item in tail:
        if item is None:
            assert time.monotonic() < deadline, f"the tail did not end within {seconds:g} s: {crumbs}"
        else:
            crumbs.append(item.crumb)
    return crumbs


def error_code(crumb: dict) -> str:
    error = crumb["error"]  # a BreadError as this process published it, a dict as the log has it
    return error.code if isinstance(error, BreadError) else error["code"]


def carried_on(bread, run_id: str) -> list[str]:
    """The types of a run's log once it ended, carried on once by some process; fails unless
    it completed."""
    crumbs = follow(bread.tail(run_id, heartbeat=0.05))
    assert crumbs[-1]["type"] == "agent:run:end", crumbs
    assert bread.store.get_run(run_id)["status"] == "completed"
    log = [f.type for f in bread.store.get_crumbs(run_id)]
    assert log.count("agent:run:continued") == 1 and log.count("agent:run:end") == 1, log
    return log


def interrupted(bread, run_id: str) -> bool:
    log = bread.store.get_crumbs(run_id)
    last = log[-1]
    return bread.store.get_run(run_id)["status"] == "interrupted" and (
        last.type == "agent:error" and error_code(last.crumb) == "RUN_INTERRUPTED"
    )


def test_start_up_carries_on_the_runs_of_a_dead_process_of_this_host_and_no_others(bread, sleeper):
    running_run(bread, "dead", owner_of(ended_pid(), start=1), session="s1")
    running_run(bread, "live", owner_of(sleeper.pid), session="s2")
    running_run(bread, "elsewhere", owner_of(ended_pid(), start=1, host="another-host"), session="s3")
    running_run(bread, "legacy", f"{me().host}:{ended_pid()}:deadbeef", session="s4")

    bread.start()

    carried_on(bread, "dead")
    assert [bread.store.get_run(r)["status"] for r in ("live", "elsewhere", "legacy")] == ["running"] * 3


def test_two_processes_starting_at_once_carry_a_run_on_once(bread, make_bread):
    running_run(bread, "dead", owner_of(ended_pid(), start=1))
    others = [make_bread(store=bread.store, lease_seconds=LEASE_SECONDS) for _ in range(4)]
    together = threading.Barrier(len(others))

    def start(other):
        together.wait()
        other.start()

    threads = [threading.Thread(target=start, args=(other,)) for other in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    log = carried_on(bread, "dead")
    assert log == ["agent:run:start", "agent:run:continued", "text:delta", "agent:run:end"]


def test_a_tail_of_a_run_whose_owner_died_carries_it_on_at_once(bread):
    running_run(bread, "dead", owner_of(ended_pid(), start=1))

    crumbs = follow(bread.tail("dead", heartbeat=0.05))

    assert [c["type"] for c in crumbs] == ["agent:run:start", "agent:run:continued", "text:delta", "agent:run:end"]
    assert crumbs[1] == {"type": "agent:run:continued", "runId": "dead", "reason": "owner-died", "afterSeq": 1,
                         "attempt": 1}  # fmt: skip
    assert crumbs[-1]["output"] == "hi"


def test_a_cancel_of_a_run_whose_owner_died_ends_it_cancelled_without_carrying_it_on(bread):
    running_run(bread, "dead", owner_of(ended_pid(), start=1))

    assert bread.cancel("dead")

    log = bread.store.get_crumbs("dead")
    assert [f.type for f in log] == ["agent:run:start", "agent:error"]
    assert error_code(log[-1].crumb) == "RUN_CANCELLED" and bread.store.get_run("dead")["status"] == "cancelled"


def test_a_session_held_by_a_dead_process_stays_with_its_run_carried_on(bread):
    running_run(bread, "dead", owner_of(ended_pid(), start=1), session="shared")

    result = bread.run("echo", "again", session="shared", session_policy="enqueue", mode="sync")

    assert result.output == "again"  # once the dead process's run, carried on, let the session go
    carried_on(bread, "dead")


def test_a_siblings_run_is_left_alone_while_it_lives_and_carried_on_once_it_is_killed(make_bread, tmp_path):
    path = tmp_path / "bread.db"
    sibling = subprocess.Popen([sys.executable, "-c", SIBLING, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert sibling.stdout.readline() == "running\n"
        bread = make_bread(store=sqlite_store(path), lease_seconds=LEASE_SECONDS).start()
        tail = bread.tail("sibling-run", heartbeat=0.05)
        assert next(tail).type == "agent:run:start"  # the tail looked at the record, and left it
        assert bread.store.get_run("sibling-run")["status"] == "running"

        sibling.kill()
        deadline = time.monotonic() + ENDED_WITHIN_SECONDS
        while (item := next(tail)) is None or item.type != "agent:run:continued":
            assert time.monotonic() < deadline, "the run was not carried on"
        assert bread.cancel("sibling-run")  # its thousand ticks are not this test's to wait for
        crumbs = follow(tail)
    finally:
        sibling.kill()
        sibling.wait(10)
        sibling.stdout.close()

    assert item.crumb["reason"] == "owner-died" and error_code(crumbs[-1]) == "RUN_CANCELLED"
    assert [f.type for f in bread.store.get_crumbs("sibling-run")].count("agent:run:continued") == 1
