"""Human-in-the-loop over HTTP, across processes that share one SQLite file and nothing else."""

from __future__ import annotations

import threading

from .client import (
    HUMAN_REQUIRED,
    RUN_END,
    TRANSPORTS,
    Tail,
    assert_continuation,
    assert_log,
    durable_seqs,
    failure_of,
    log_of,
    new_client,
    passive_url,
    pause_writer,
    resume,
)


def test_tail_on_another_process_follows_the_pause_and_the_resume(http, server, peer, wire):
    run_id, checkpoint_id, first_leg = pause_writer(http, server.url, wire)

    tail = Tail(passive_url(peer.url, run_id), wire)
    tail.start()
    tail.wait_for(lambda e: e.type == HUMAN_REQUIRED, 10, "the replayed pause")
    assert tail.status == 200

    continuation = resume(http, server.url, checkpoint_id, {"approved": True}, wire)
    relayed = tail.finish(15)

    assert_continuation(continuation, run_id)
    # The tail was open across the pause: it relayed what came after it, then closed.
    crumbs = [e for e in relayed if e.kind == "crumb"]
    assert [e.kind for e in relayed if e.kind != "crumb"] == (["retry"] if wire == "sse" else [])
    assert crumbs[-1].type == RUN_END and relayed[-1] == crumbs[-1]
    types = [e.type for e in crumbs]
    assert types.index("human:resumed") > types.index(HUMAN_REQUIRED)

    log = log_of(http, peer.url, run_id, wire)
    assert_log(log, run_id)
    seqs = [e.seq for e in crumbs]
    assert seqs == sorted(set(seqs)), f"a seq twice or out of order: {seqs}"
    # The peer does not run this run and shares no transport: all it has is the store's log.
    assert [(e.seq, e.data) for e in crumbs] == [(e.seq, e.data) for e in log]
    # What the run and resume responses carried agrees with the log at every durable seq.
    logged = {e.seq: e.data for e in log}
    for event in first_leg.events + continuation.events:
        if event.durable:
            assert logged[event.seq] == event.data
    assert durable_seqs(first_leg.events + continuation.events) == [1, 3, 4, 5, 6, 7, 8, 9, 11]
    assert [logged[2]["delta"], logged[10]["delta"]] == ["Drafting a post about bread.", "Published."]


def test_resume_after_restart_continues_the_log(http, start_server, wire):
    transport = TRANSPORTS[wire]
    first = start_server("first", transport=transport)
    with new_client() as client:
        run_id, checkpoint_id, _ = pause_writer(client, first.url, wire)
    first.stop()

    second = start_server("restarted", db=first.db, transport=transport)
    continuation = resume(http, second.url, checkpoint_id, {"approved": True}, wire)

    assert_continuation(continuation, run_id)
    log = log_of(http, second.url, run_id, wire)
    assert_log(log, run_id)
    assert len(log) == 11
    assert [e.type for e in log][6:8] == [HUMAN_REQUIRED, "human:resumed"]

    again = resume(http, second.url, checkpoint_id, {"approved": True}, wire)
    assert failure_of(again, wire)["code"] == "CHECKPOINT_ALREADY_RESUMED"
    assert len(log_of(http, second.url, run_id, wire)) == 11, "a refused resume logged something"


def test_unknown_checkpoint_fails_in_the_stream(http, server, wire):
    stream = resume(http, server.url, "cp_does_not_exist", {"approved": True}, wire)

    assert failure_of(stream, wire)["code"] == "CHECKPOINT_NOT_FOUND"


def test_one_resume_wins_across_processes(http, server, peer, wire):
    run_id, checkpoint_id, _ = pause_writer(http, server.url, wire)
    ready = threading.Barrier(2, timeout=10)
    answers: dict[str, object] = {}

    def resume_on(name: str, base: str) -> None:
        try:
            with new_client() as client:
                ready.wait()
                answers[name] = resume(client, base, checkpoint_id, {"approved": True}, wire)
        except BaseException as exc:  # reported below, on the test's thread
            answers[name] = exc

    threads = [threading.Thread(target=resume_on, args=(n, s.url)) for n, s in (("a", server), ("b", peer))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(t.is_alive() for t in threads) and sorted(answers) == ["a", "b"], answers
    for answer in answers.values():
        if isinstance(answer, BaseException):
            raise answer

    winners = [s for s in answers.values() if s.crumbs and s.crumbs[0].type == "human:resumed"]
    losers = [s for s in answers.values() if s not in winners]
    assert len(winners) == 1 and len(losers) == 1, [s.types for s in answers.values()]
    assert_continuation(winners[0], run_id)
    assert failure_of(losers[0], wire)["code"] == "CHECKPOINT_ALREADY_RESUMED"
    log = log_of(http, server.url, run_id, wire)
    assert_log(log, run_id)
    assert [e.type for e in log].count("human:resumed") == 1


def test_malformed_response_does_not_burn_the_checkpoint(http, server, wire):
    run_id, checkpoint_id, _ = pause_writer(http, server.url, wire)

    refused = resume(http, server.url, checkpoint_id, "yes", wire)
    assert failure_of(refused, wire)["code"] == "INVALID_REQUEST"

    assert_continuation(resume(http, server.url, checkpoint_id, {"approved": True}, wire), run_id)
    assert_log(log_of(http, server.url, run_id, wire), run_id)
