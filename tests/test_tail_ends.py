"""A tail ends when its run ends, whatever position it starts from.

Found by the hostile-input work (docs/reliability.md): a tail that starts at or past the run's
terminal seq drops that crumb as already seen, so nothing ever ends it. The HTTP route refuses
a position past the log's end (400), which covers a hostile client; what is left is the window
between the terminal crumb's commit and the run record's update, when a client that got the
terminal crumb and reconnects at once (as EventSource does when a connection drops) sends a
position the log has while the record still says ``running``: tails/tail.py ends such a tail too.
"""

from __future__ import annotations

import time

from bread_sync.crumbs import Frame

END_SECONDS = 2.0


def running_run_whose_log_has_ended(bread, run_id: str) -> None:
    """A run in the window: its terminal crumb is logged, its record not yet updated."""
    bread.store.create_run({
        "id": run_id, "agentId": "echo", "sessionId": "s", "status": "running", "checkpointId": None,
        "owner": "another-process", "leaseUntil": time.time() + 600, "cancelRequested": False,
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
    })  # fmt: skip
    bread.store.append_crumbs(run_id, [
        Frame(run_id, 1, {"type": "agent:run:start", "runId": run_id, "agentId": "echo", "input": "hi"}),
        Frame(run_id, 2, {"type": "agent:run:end", "runId": run_id, "output": "hi"}),
    ])  # fmt: skip


def ends_within(tail, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    for item in tail:
        if item is None and time.monotonic() > deadline:
            return False
    return True


def test_a_tail_from_before_the_terminal_crumb_ends(bread):
    running_run_whose_log_has_ended(bread, "r")
    tail = bread.tail("r", 1, heartbeat=0.05)
    next(tail)  # the replay: it delivers the terminal crumb, and the tail ends there

    assert ends_within(tail, END_SECONDS)


def test_a_tail_from_the_terminal_seq_ends_once_the_record_says_finished(bread):
    running_run_whose_log_has_ended(bread, "r")
    tail = bread.tail("r", 2, heartbeat=0.05)
    assert next(tail) is None  # nothing to replay: it waits for live frames

    bread.store.update_run("r", status="completed", owner=None)  # the driver finishes its record

    assert ends_within(tail, END_SECONDS)
