"""Cancel is an explicit request, honoured within a step, from any process; a dropped
connection cancels nothing."""

from __future__ import annotations

import time
import uuid

from ..waiting import wait_for
from .client import (
    TEXT_DELTA,
    assert_error_body,
    assert_log,
    failure_of,
    log_of,
    open_stream,
    pause_writer,
    resume,
    run,
    run_error_of,
    text_of,
)

#: 1000 ticks 200 ms apart: 200 s unless something stops it.
LONG = {"count": 1000, "delayMs": 200}
CANCEL_SECONDS = 5.0


def start_slow(http, base: str, wire: str, ticks: dict):
    return open_stream(http, "POST", f"{base}/agents/slow/run", wire, body={"input": ticks}, seconds=15)


def read_first_tick(stream) -> None:
    assert stream.status == 200, stream.text
    tick = stream.until(lambda e: e.type == TEXT_DELTA, "the first tick")
    assert tick.data["delta"] == "tick 1 "


def assert_cancelled(http, base: str, stream, wire: str, seconds: float) -> None:
    assert seconds < CANCEL_SECONDS, f"the cancelled run took {seconds:.1f} s to end"
    assert run_error_of(stream, wire)["code"] == "RUN_CANCELLED"
    ticks = text_of(stream.events).split("tick ")[1:]
    assert 1 <= len(ticks) < 1 + CANCEL_SECONDS / 0.2, "the run went on ticking"
    assert http.get(f"{base}/runs/{stream.run_id}").json()["status"] == "cancelled"
    log = log_of(http, base, stream.run_id, wire)
    assert_log(log, stream.run_id)
    assert log[-1].type == "agent:error" and log[-1].data["error"]["code"] == "RUN_CANCELLED"


def test_cancel_ends_the_run_within_a_step(http, server, wire):
    with start_slow(http, server.url, wire, LONG) as stream:
        read_first_tick(stream)
        sent = time.monotonic()
        answer = http.post(f"{server.url}/runs/{stream.run_id}/cancel")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"ok": True, "runId": stream.run_id}
        stream.rest()
        seconds = time.monotonic() - sent

    assert_cancelled(http, server.url, stream, wire, seconds)
    assert_error_body(http.post(f"{server.url}/runs/{stream.run_id}/cancel"), 404, "RUN_NOT_FOUND")


def test_cancel_sent_to_another_process_is_honoured(http, server, peer, wire):
    with start_slow(http, server.url, wire, LONG) as stream:
        read_first_tick(stream)
        sent = time.monotonic()
        answer = http.post(f"{peer.url}/runs/{stream.run_id}/cancel")
        assert answer.status_code == 200, answer.text
        stream.rest()
        seconds = time.monotonic() - sent

    assert_cancelled(http, server.url, stream, wire, seconds)
    assert http.get(f"{peer.url}/runs/{stream.run_id}").json()["status"] == "cancelled"


def test_cancel_of_an_unknown_or_finished_run_is_404(http, server, wire):
    assert_error_body(http.post(f"{server.url}/runs/run-missing-{uuid.uuid4().hex}/cancel"), 404, "RUN_NOT_FOUND")

    finished = run(http, server.url, "echo", {"input": "done"}, wire)
    assert finished.last_crumb.type == "agent:run:end"
    assert_error_body(http.post(f"{server.url}/runs/{finished.run_id}/cancel"), 404, "RUN_NOT_FOUND")
    assert_log(log_of(http, server.url, finished.run_id, wire), finished.run_id)


def test_cancel_of_a_paused_run_ends_it_and_voids_its_checkpoint(http, server, wire):
    run_id, checkpoint_id, _ = pause_writer(http, server.url, wire)

    answer = http.post(f"{server.url}/runs/{run_id}/cancel")

    assert answer.status_code == 200, answer.text
    assert http.get(f"{server.url}/runs/{run_id}").json()["status"] == "cancelled"
    log = log_of(http, server.url, run_id, wire)
    assert_log(log, run_id)
    assert (log[-1].seq, log[-1].type, log[-1].data["error"]["code"]) == (8, "agent:error", "RUN_CANCELLED")
    refused = resume(http, server.url, checkpoint_id, {"approved": True}, wire)
    assert failure_of(refused, wire)["code"] in {"CHECKPOINT_ALREADY_RESUMED", "CHECKPOINT_NOT_FOUND"}
    assert len(log_of(http, server.url, run_id, wire)) == len(log)


def test_a_dropped_connection_does_not_stop_the_run(http, server, wire):
    with start_slow(http, server.url, wire, {"count": 20, "delayMs": 20}) as stream:
        read_first_tick(stream)
    run_id = stream.run_id  # the response is closed: the client went away mid-run

    def finished():
        record = http.get(f"{server.url}/runs/{run_id}").json()
        return record if record["status"] != "running" else None

    assert wait_for(finished, 15, "the run to finish")["status"] == "completed"
    log = log_of(http, server.url, run_id, wire)
    assert_log(log, run_id)
    ticks = "".join(f"tick {n} " for n in range(1, 21))
    assert text_of(log) == ticks
    assert (log[-1].type, log[-1].data["output"]) == ("agent:run:end", ticks)
