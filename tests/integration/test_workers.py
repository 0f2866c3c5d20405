"""Other worker setups: gthread workers, and two gevent workers on one SQLite file."""

from __future__ import annotations

import threading

from .client import (
    assert_continuation,
    assert_log,
    log_of,
    new_client,
    pause_writer,
    resume,
    run,
    text_of,
)

CONCURRENT_RUNS = 20


def test_gthread_worker_pauses_and_resumes(http, start_server):
    server = start_server("gthread", worker="gthread", threads=8, transport="http-chunked")

    run_id, checkpoint_id, _ = pause_writer(http, server.url, "ndjson")
    continuation = resume(http, server.url, checkpoint_id, {"approved": True}, "ndjson")

    assert_continuation(continuation, run_id)
    log = log_of(http, server.url, run_id, "ndjson")
    assert_log(log, run_id)
    assert len(log) == 11


def test_two_workers_serve_concurrent_runs_on_one_sqlite_file(http, start_server):
    server = start_server("two-workers", workers=2, transport="http-sse")
    inputs = [f"run {n} of {CONCURRENT_RUNS} says hello" for n in range(CONCURRENT_RUNS)]
    ready = threading.Barrier(CONCURRENT_RUNS, timeout=15)
    results: dict[int, object] = {}

    def one_run(n: int) -> None:
        try:
            with new_client() as client:  # a connection of its own
                ready.wait()
                results[n] = run(client, server.url, "echo", {"input": inputs[n]}, "sse")
        except BaseException as exc:  # reported below, on the test's thread
            results[n] = exc

    threads = [threading.Thread(target=one_run, args=(n,)) for n in range(CONCURRENT_RUNS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads), "a run did not finish in time"
    for n in range(CONCURRENT_RUNS):
        if isinstance(results[n], BaseException):
            raise results[n]

    run_ids = set()
    for n, stream in sorted(results.items()):
        assert stream.status == 200, stream.text
        assert stream.last_crumb.type == "agent:run:end", stream.types
        assert stream.last_crumb.data["output"] == inputs[n]
        log = log_of(http, server.url, stream.run_id, "sse")
        assert_log(log, stream.run_id)
        assert text_of(log) == inputs[n]
        run_ids.add(stream.run_id)
    assert len(run_ids) == CONCURRENT_RUNS
