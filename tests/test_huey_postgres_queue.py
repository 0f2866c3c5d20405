"""The Postgres queue (executors/postgres_queue.py): processes starting together against an empty
database each make Huey's tables or find them made, and share one queue."""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("huey")
pytest.importorskip("psycopg")

#: Enough processes making the tables at once to collide every time without the lock (measured:
#: 4 processes collided in 10 tries out of 10).
PROCESSES = 4
DEADLINE = 60
RUN_ID = "run-made-by-one-read-by-another"

# Each process imports first and says so, then makes its executor when told: the tables are
# made by every process within the same moment, not one import time apart.
STARTER = textwrap.dedent(
    """
    import sys
    from bread_sync.executors.huey import executor

    print("imported", flush=True)
    sys.stdin.readline()
    queue = executor(url=sys.argv[1])
    print("made", flush=True)
    command = sys.stdin.readline().strip()
    if command == "submit":
        queue.submit(None, sys.argv[2])
        print("submitted", flush=True)
    elif command == "read":
        task = queue.huey.dequeue()
        print(task.args[0] if task else "nothing", flush=True)
    """
)


class Starter:
    """One process running STARTER, told what to do a line at a time."""

    def __init__(self, url: str):
        args = [sys.executable, "-c", STARTER, url, RUN_ID]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)  # fmt: skip

    def tell(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def says(self) -> str:
        """Its next line ("" once it has exited); it prints one a step, so none waits buffered."""
        ready, _, _ = select.select([self.proc.stdout], [], [], DEADLINE)
        assert ready, f"no line within {DEADLINE} s"
        return self.proc.stdout.readline().strip()

    def finish(self) -> tuple[int, str]:
        """Its exit status and stderr, once it has exited (within the deadline)."""
        _, err = self.proc.communicate(timeout=DEADLINE)
        return self.proc.returncode, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()  # reaps it and closes its pipes


def test_processes_starting_together_on_an_empty_database_all_start_and_share_the_queue(postgres_url):
    starters = [Starter(postgres_url) for _ in range(PROCESSES)]
    try:
        assert [s.says() for s in starters] == ["imported"] * PROCESSES
        for starter in starters:
            starter.tell("go")
        failed = [s for s in starters if s.says() != "made"]
        assert not failed, f"{len(failed)} of {PROCESSES} failed to start:\n{failed[0].finish()[1]}"
        submitter, reader, *others = starters
        submitter.tell("submit")
        assert submitter.says() == "submitted"
        reader.tell("read")
        assert reader.says() == RUN_ID
        for starter in others:
            starter.tell("done")
        assert [s.finish() for s in starters] == [(0, "")] * PROCESSES
    finally:
        for starter in starters:
            starter.stop()
