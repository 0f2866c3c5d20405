"""The console's notice of a run left queued (bread_sync/server/console.py): said once when the
run is still queued, never after the run went on or ended, and read only while nothing came."""

from __future__ import annotations

import io
import threading
import time

from bread_sync.client import create_agent_client, local
from bread_sync.server.console import Console, QueuedNotice
from bread_sync.transports import stdout

DEADLINE = 10.0
QUEUED = {"status": "queued"}
LINE = "waiting: run run_q is still queued, taken by no worker yet"


def notice_timers():
    return [thread for thread in threading.enumerate() if thread.name.startswith("queued-notice-")]


def poll(check, what):
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def test_a_run_still_queued_is_said_once_on_stderr(capsys):
    with QueuedNotice("run_q", lambda run_id: QUEUED, after=0):
        poll(lambda: not notice_timers(), "the timer's end")
    said = capsys.readouterr().err
    assert said.startswith(LINE) and said.count("\n") == 1


def test_a_record_read_as_the_follow_ends_is_never_said_after_it(capsys):
    reading, read_on = threading.Event(), threading.Event()

    def read_slowly(run_id):  # an HTTP request with --url, answered after the run ended
        reading.set()
        read_on.wait(DEADLINE)
        return QUEUED

    notice = QueuedNotice("run_q", read_slowly, after=0).__enter__()
    assert reading.wait(DEADLINE)
    ending = threading.Thread(target=notice.__exit__)
    ending.start()
    poll(notice.done.is_set, "the follow's end")
    read_on.set()
    ending.join(DEADLINE)
    poll(lambda: not notice_timers(), "the timer's end")
    assert capsys.readouterr().err == ""


class Terminal(io.StringIO):
    """stdout, noting as each piece is shown whether a notice's timer still waits."""

    def __init__(self):
        super().__init__()
        self.timers_waiting: list[bool] = []

    def write(self, text):
        self.timers_waiting.append(bool(notice_timers()))
        return super().write(text)


def test_a_run_that_goes_on_stops_the_notice_before_it_is_shown(make_bread):
    terminal = Terminal()
    with create_agent_client(local.transport(make_bread())) as client:
        console = Console(client, stdout.transport(terminal, color=False))
        outcome = console.follow(client.thread().send("echo", "hi"))
    assert (outcome.status, terminal.getvalue()) == ("completed", "hi\n")
    assert terminal.timers_waiting and not any(terminal.timers_waiting)
