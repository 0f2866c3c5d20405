"""A server's life around its runs, with real processes: graceful shutdown on SIGTERM, the
start-up sweep of runs whose server died, and log lines that carry the run id."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack

import httpx2 as httpx

from bread_sync.stores.sqlite import store as sqlite_store

from ..waiting import wait_for
from .client import (
    RUN_END,
    Tail,
    assert_log,
    log_of,
    new_client,
    open_stream,
    passive_url,
    run,
    run_error_of,
)
from .test_faults import AT_ONCE_SECONDS, FAULT_ENV, LONG_LEASE, LONG_STEPPING, faulty

#: servers.py starts gunicorn with --graceful-timeout 5.
GRACEFUL_SECONDS = 5.0
TICKS = {"count": 1000, "delayMs": 50}
#: A gevent worker looks whether it was told to stop once a second, then closes its listener.
CLOSED_AFTER_SECONDS = 1.5


def stored_log(store, run_id: str) -> list[tuple[int, str]]:
    return [(f.seq, f.type) for f in store.get_crumbs(run_id)]


def test_sigterm_lets_short_runs_finish_and_hands_the_rest_to_the_next_server(http, start_server):
    server = faulty(start_server, "graceful")
    with ExitStack() as stack:

        def start(agent: str, body: dict):
            client = stack.enter_context(new_client())
            return stack.enter_context(open_stream(client, "POST", f"{server.url}/agents/{agent}/run", "sse",
                                                   body={"input": body}, seconds=20))  # fmt: skip

        short = start("stepper", {"count": 4, "delayMs": 100})  # about a second: it finishes
        ticking = start("slow", TICKS)  # stops at its next step
        stuck = start("stuck", {"seconds": 60})  # deaf inside a tool: left as it is
        with new_client() as client, open_stream(client, "POST", f"{server.url}/agents/slow/run", "sse",
                                                 body={"input": TICKS}) as dropped:  # fmt: skip
            dropped.until(lambda e: e.type == "text:delta", "the first tick")  # then its client goes away
        for stream in (short, ticking, stuck):
            stream.until(lambda e: e.type == "agent:run:start", "the start")
        stuck.until(lambda e: e.type == "tool:call", "the stuck tool call")
        tail = Tail(passive_url(server.url, ticking.run_id), "sse", seconds=20)
        tail.start()
        tail.wait_for(lambda e: e.type == "text:delta", 10, "a live tick")
        sent = time.monotonic()

        server.terminate()

        time.sleep(CLOSED_AFTER_SECONDS)
        try:
            httpx.get(f"{server.url}/health", timeout=1.0)
            raise AssertionError("the server still accepted a connection after SIGTERM")
        except httpx.ConnectError:
            pass  # refused: the listening socket is closed
        short.rest()
        for stream in (ticking, stuck):
            try:
                stream.rest()
            except httpx.TransportError:
                pass  # the worker exits with the run handed over: its response has no end
        assert server.wait(GRACEFUL_SECONDS + 5) == 0
        took = time.monotonic() - sent
        tail.join(5)  # cut off as the worker exits, the run handed over: it carries no end
        assert not tail.is_alive()
        tail_events = tail.events

    assert took < GRACEFUL_SECONDS + 1.0, f"the server took {took:.1f} s to stop"
    assert short.last_crumb.type == RUN_END, short.types
    for stream in (ticking, stuck):
        assert not {"agent:run:end", "agent:error"} & set(stream.types), stream.types
    assert not {"agent:run:end", "agent:error"} & {e.type for e in tail_events}
    store = sqlite_store(server.db)
    try:
        records = {r["id"]: r for r in store.list_runs()}
        assert records[short.run_id]["status"] == "completed"
        for run_id in (ticking.run_id, dropped.run_id):  # handed over at a step
            assert (records[run_id]["status"], records[run_id]["owner"]) == ("running", None), records[run_id]
        assert records[stuck.run_id]["status"] == "running"  # still inside its tool as its worker was ended
        assert stored_log(store, stuck.run_id)[-1][1] == "tool:call"
    finally:
        store.close()

    # With no sibling, the next server to start carries them on, from where each was left.
    successor = faulty(start_server, "successor", db=server.db)
    for stream, reason in ((ticking, "shutdown"), (dropped, "shutdown"), (stuck, "owner-died")):
        tail = Tail(passive_url(successor.url, stream.run_id), "sse", seconds=20)
        tail.start()
        continued = tail.wait_for(lambda e: e.type == "agent:run:continued", AT_ONCE_SECONDS, "the continuation")
        assert continued.data["reason"] == reason
        if stream is stuck:  # its nap's outcome is unknown: a human decides whether to nap again
            paused = tail.wait_for(lambda e: e.type == "human:required", AT_ONCE_SECONDS, "the question")
            assert paused.data["outcomeUnknown"] is True and paused.data["toolName"] == "nap"
        # (a thousand ticks, or a sixty-second nap, are not this test's to wait for)
        assert http.post(f"{successor.url}/runs/{stream.run_id}/cancel").status_code == 200
        tail.finish(AT_ONCE_SECONDS)
        assert_log(log_of(http, successor.url, stream.run_id, "sse"), stream.run_id)


def test_a_server_restarted_within_the_lease_carries_on_the_dead_ones_runs_not_a_live_siblings(http, start_server):
    sibling = faulty(start_server, "sibling", env=LONG_LEASE)
    first = faulty(start_server, "died", db=sibling.db, env=LONG_LEASE)  # two servers on one file
    with ExitStack() as stack:

        def stepping(server):
            client = stack.enter_context(new_client())
            stream = stack.enter_context(open_stream(client, "POST", f"{server.url}/agents/stepper/run", "sse",
                                                     body={"input": LONG_STEPPING}, seconds=60))  # fmt: skip
            stream.until(lambda e: e.type == "tool:result", "the first step")
            return stream

        alive, dead = stepping(sibling), stepping(first)
        first.kill()  # master and worker at once: nobody is left to mark anything

        second = faulty(start_server, "restarted", db=sibling.db, env=LONG_LEASE)

        # The new worker swept before it served: the run is carried on there.
        tail = Tail(passive_url(second.url, dead.run_id), "sse")
        tail.start()
        continued = tail.wait_for(lambda e: e.type == "agent:run:continued", AT_ONCE_SECONDS, "the continuation")
        assert continued.data["reason"] == "owner-died"
        assert http.post(f"{second.url}/runs/{dead.run_id}/cancel").status_code == 200  # a minute of steps
        tail.finish(AT_ONCE_SECONDS)
        log = log_of(http, second.url, dead.run_id, "sse")
        assert_log(log, dead.run_id)
        assert [e.type for e in log].count("agent:run:continued") == 1

        # The sibling's run went on past the sweep, and a cancel through the new server is its owner's to honour.
        assert http.get(f"{second.url}/runs/{alive.run_id}").json()["status"] == "running"
        assert http.post(f"{second.url}/runs/{alive.run_id}/cancel").status_code == 200
        alive.rest()
    assert run_error_of(alive, "sse")["code"] == "RUN_CANCELLED"
    assert http.get(f"{second.url}/runs/{alive.run_id}").json()["status"] == "cancelled"


def test_json_log_lines_carry_the_run_its_session_and_agent_of_a_failing_tool(http, start_server):
    server = start_server("json-logs", env={**FAULT_ENV, "BREAD_LOG_FORMAT": "json"})

    failed = run(http, server.url, "broken", {"input": "go", "session": {"id": "ses_logged"}}, "sse")

    assert failed.last_crumb.type == RUN_END  # a failing tool is a tool:error, not the run's end
    assert "tool:error" in failed.types

    def failure_line():
        for line in server.log(limit=10**9).splitlines():
            if line.startswith("{") and "tool explode failed" in line:
                return json.loads(line)
        return None

    entry = wait_for(failure_line, 5, "the failure's log line")
    assert (entry["run_id"], entry["session_id"], entry["agent_id"]) == (failed.run_id, "ses_logged", "broken")
    assert entry["level"] == "ERROR" and "RuntimeError: step 1 broke" in entry["exception"]
    assert any(json.loads(line)["message"].startswith("Booting worker") for line in server.log().splitlines()
               if line.startswith("{"))  # fmt: skip
