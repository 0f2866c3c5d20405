"""Run owners: what an owner string names, and whether that process is known to be gone.

The processes are real (children of this test process), read through the real /proc: only
another host is made up, by writing its name into an owner string.
"""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bread_sync import owners

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
