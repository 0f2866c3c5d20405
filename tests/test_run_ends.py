"""How a library caller's run ends when the caller stops at its edges: at its terminal crumb (a
``for`` loop that breaks there, never asking for the next item), or before its first crumb
(closed never iterated). Either way its clean-up is done at once, not by a later let go or a
recovery sweep: its span ended, its metrics counted, its record and session claim released (a
paused run stays paused and resumable)."""

from __future__ import annotations

import threading

import pytest

otel = pytest.importorskip("bread_sync.tracing.otel")
pytest.importorskip("prometheus_client")
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from bread_sync.engine.opening import opening_at_once  # noqa: E402
from bread_sync.engine.queued import drive_queued  # noqa: E402
from bread_sync.executors import huey as huey_executor  # noqa: E402
from bread_sync.metrics import prometheus  # noqa: E402

from .waiting import wait_for  # noqa: E402

#: The lease keeper passes only every 40 s: no let go of this process's ends any run here.
QUIET_KEEPER = {"cancel_poll_seconds": 60.0, "lease_seconds": 120.0}


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def observed(make_bread, exporter):
    """A Bread on the demo agents, its runs traced into ``exporter`` and counted in the metrics."""
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread = make_bread(server={"metrics": True}, **QUIET_KEEPER)
    bread.tracer = otel.tracer(spans)
    return bread


def finished(agent: str, status: str) -> float:
    """How many runs of ``agent`` the process's metrics counted finished with ``status``."""
    labels = {"agent": agent, "status": status}
    return prometheus.metrics().registry.get_sample_value("bread_runs_finished_total", labels) or 0.0


def run_status_of_span(exporter, agent: str) -> str | None:
    """The status the run span of ``agent`` ended with; None while it has not ended."""
    ended = [span for span in exporter.get_finished_spans() if span.name == f"invoke_agent {agent}"]
    return ended[0].attributes["bread.run.status"] if ended else None


@pytest.mark.parametrize(
    ("agent", "input", "last", "status"),
    [("echo", "hi", "agent:run:end", "completed"), ("writer", {"topic": "rye"}, "human:required", "paused")],
)
def test_a_run_its_caller_leaves_at_its_last_crumb_is_finished_as_that_crumb_is_handed_out(
    observed, exporter, agent, input, last, status
):
    before = finished(agent, status)
    run = observed.run(agent, input)
    for crumb in run:
        if crumb["type"] == last:
            break  # neither asks for the next item nor closes: the run is kept, unclosed

    assert run_status_of_span(exporter, agent) == status
    assert finished(agent, status) == before + 1
    assert not observed.leases._held  # nothing is left for a let go, though the run is still referenced
    assert observed.store.get_run(run.run_id)["status"] == status
    if last == "human:required":  # its clean-up is done, and it stays paused and resumable
        assert observed.store.get_checkpoint(crumb["checkpointId"])["status"] == "pending"
        resumed = observed.resume(crumb["checkpointId"], {"approved": True}, mode="sync")
        assert resumed.status == "completed"


def test_a_run_closed_before_its_first_crumb_ends_at_once(observed, exporter):
    before = finished("slow", "interrupted")
    run = observed.run("slow", {"count": 3, "delayMs": 0}, session="s1")
    run.close()

    assert observed.store.get_run(run.run_id)["status"] == "interrupted"
    assert [frame.crumb["error"]["code"] for frame in observed.store.get_crumbs(run.run_id)] == ["RUN_INTERRUPTED"]
    assert observed.store.claim_session("s1", "another run") is None  # its claim released
    assert run_status_of_span(exporter, "slow") == "interrupted"
    assert finished("slow", "interrupted") == before + 1
    assert not observed.leases._held
    assert list(run) == []  # closed: nothing more to iterate


def test_a_continuation_closed_before_its_first_crumb_ends_at_once(observed):
    paused = observed.run("writer", {"topic": "rye"}, mode="sync")
    resumed = observed.resume(paused.checkpoint["checkpointId"], {"approved": True})
    resumed.close()

    assert observed.store.get_run(paused.run_id)["status"] == "interrupted"
    last = observed.store.get_crumbs(paused.run_id)[-1].crumb
    assert (last["type"], last["error"]["code"]) == ("agent:error", "RUN_INTERRUPTED")
    assert observed.store.get_checkpoint(paused.checkpoint["checkpointId"])["status"] != "pending"


class FailsOnRunSpan(SpanProcessor):
    """A span processor of a third party that fails as a run's span ends: the run's clean-up,
    done as its last crumb is handed out, raises."""

    def on_end(self, span) -> None:
        if span.name.startswith("invoke_agent"):
            raise OSError("the collector went away")


@pytest.mark.parametrize(
    ("agent", "input", "last"), [("echo", "hi", "agent:run:end"), ("writer", {"topic": "rye"}, "human:required")]
)
def test_a_clean_up_that_fails_at_the_last_crumb_still_hands_the_crumb_out_and_is_logged(
    observed, agent, input, last, caplog
):
    spans = TracerProvider()
    spans.add_span_processor(FailsOnRunSpan())
    observed.tracer = otel.tracer(spans)

    seen = [crumb["type"] for crumb in observed.run(agent, input)]

    assert seen[-1] == last
    (failed,) = [record for record in caplog.records if record.exc_info and record.levelname == "ERROR"]
    assert "clean-up after its last crumb failed" in failed.getMessage()
    assert isinstance(failed.exc_info[1], OSError)


def test_a_queued_run_whose_close_fails_follows_nothing_more(make_bread):
    """Its driver's clean-up fails as the caller closes it in its opening: the follower of the
    rest is closed all the same, so iterating on does not follow the run's abandon."""
    bread = make_bread(executor=huey_executor.executor(), **QUIET_KEEPER)
    spans = TracerProvider()
    spans.add_span_processor(FailsOnRunSpan())
    bread.tracer = otel.tracer(spans)
    run = bread.run("echo", "hi")
    assert next(run)["type"] == "agent:run:start"

    with pytest.raises(OSError):  # the failure is the closing caller's to see
        run.close()

    assert list(run) == []


def test_a_run_opened_at_once_closed_before_its_first_crumb_writes_nothing(observed, exporter):
    """Its record and session claim were to come with its first crumb (the server's start,
    whose subscription failed, say), and its id reached no one: there is no run to end."""
    before = finished("slow", "interrupted")
    with opening_at_once():
        run = observed.run("slow", {"count": 3, "delayMs": 0})
    run.close()

    assert observed.store.get_run(run.run_id) is None
    assert observed.store.get_crumbs(run.run_id) == []
    assert observed.store.list_sessions() == []  # no session made, nor claimed
    assert run_status_of_span(exporter, "slow") == "interrupted"
    assert finished("slow", "interrupted") == before + 1
    assert not observed.leases._held


def test_a_continuation_closed_before_its_first_crumb_replaces_no_session_state(observed):
    paused = observed.run("writer", {"topic": "rye"}, session="s1", state={"v": 1}, mode="sync")
    traced_as = observed.store.get_run(paused.run_id)["trace"]
    resumed = observed.resume(paused.checkpoint["checkpointId"], {"approved": True}, state={"v": 2})
    resumed.close()

    assert observed.store.get_session("s1")["state"] == {"v": 1}  # no step of it ran
    # while its record names the span of the driving that logged its abandon, as any driving's
    assert observed.store.get_run(paused.run_id)["trace"] != traced_as


@pytest.mark.parametrize(
    ("agent", "input", "last"), [("echo", "hi", "agent:run:end"), ("writer", {"topic": "rye"}, "human:required")]
)
def test_a_queued_run_left_at_its_last_crumb_has_its_tail_closed_at_once(make_bread, agent, input, last):
    """Its rest is a tail of the log a worker writes: closed as that crumb is handed out, it
    leaves the follower at once, not at the follower's next pass (a tail dropped unclosed)."""
    bread = make_bread(executor=huey_executor.executor(), **QUIET_KEEPER)
    run = bread.run(agent, input)
    assert next(run)["type"] == "agent:run:start"
    worker = threading.Thread(target=drive_once_tailed, args=(bread, run.run_id))
    worker.start()

    for crumb in run:
        if crumb["type"] == last:
            break  # neither asks for the next item nor closes

    assert run.run_id not in bread.follower._watching
    worker.join()


def drive_once_tailed(bread, run_id: str) -> None:
    """A worker's driving of a queued run, once its caller's tail follows it (so the tail is
    live when the run ends, not a replay of the whole log)."""
    wait_for(lambda: run_id in bread.follower._watching, 10, "the caller's tail")
    drive_queued(bread, run_id)
