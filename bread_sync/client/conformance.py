"""The conformance suite of a client transport, as a pytest plugin, run through the facade.

Define a fixture ``agent_client_transport`` in a ``conftest.py`` that yields your transport,
connected to a bread_sync serving the demo agents (``bread_sync.demo:config``), and run::

    pytest -p bread_sync.client.conformance

Beside each ``conftest.py`` that names that fixture the plugin adds these tests: send, retried
send, watch (a snapshot, then live events), a pause and its response, stop, files, typed errors,
and the repair of a watch after a gap (injected by wrapping your transport).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import install_hint

try:
    import pytest
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(f"the conformance suite runs under pytest: {install_hint('test')}") from exc

from ..crumbs import Frame
from ..errors import (
    AGENT_NOT_FOUND,
    CHECKPOINT_ALREADY_RESUMED,
    CHECKPOINT_NOT_FOUND,
    FILE_NOT_FOUND,
    INPUT_INVALID,
    NOT_SUPPORTED,
    RUN_CANCELLED,
    RUN_NOT_FOUND,
    BreadError,
)
from ..wire.replay import Gap, LiveText
from .facade import AgentClient, ThreadEvent, ThreadRun, create_agent_client

FIXTURE = "agent_client_transport"
#: Seconds any one wait of the suite may take.
DEADLINE = 20.0
#: A watch looks for a thread's next run this often here.
WATCH_INTERVAL = 0.05
PNG = b"\x89PNG\r\n\x1a\n"
#: The demo's slow agent ticks this often: slow enough that a watch sees its run while it runs.
SLOW_MS = 150


# -- the plugin --------------------------------------------------------------------------------


class _Suite(pytest.Module):
    """This module's tests, collected beside a conftest that defines the transport fixture (so
    that fixture, and the conftest's others, reach them)."""

    def _getobj(self) -> Any:
        import sys

        return sys.modules[__name__]


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    if file_path.name == "conftest.py" and FIXTURE in file_path.read_text(encoding="utf-8"):
        return _Suite.from_parent(parent, path=file_path, name="conformance")
    return None


@pytest.fixture
def agent_client(agent_client_transport: Any) -> Iterator[AgentClient]:
    yield create_agent_client(agent_client_transport)


# -- helpers -----------------------------------------------------------------------------------


def shape(frames: list[Frame]) -> list[tuple[str, int | None]]:
    """The durable crumbs by type and seq, and the text as one entry."""
    durable = [(f.type, f.seq) for f in frames if f.durable]
    return [*durable, ("text", text_of(frames))]


def text_of(frames: list[Frame]) -> str:
    """The text a client shows of ``frames``: a continuation's lost text dropped."""
    held = LiveText()
    for frame in frames:
        held.take(frame)
    return held.text


def log_of(client: AgentClient, run_id: str) -> list[Frame]:
    """A finished run's whole log, through the transport's own replay."""
    return list(bounded(iter(client.run(run_id)), "the run's replay"))


def bounded(items: Iterator[Any], what: str) -> Iterator[Any]:
    """``items`` read on a thread of their own, each within DEADLINE (a watch is stopped by its
    ``stop`` event, so its thread ends too)."""
    box: queue.Queue = queue.Queue()
    done = object()

    def pump() -> None:
        try:
            for item in items:
                box.put(item)
        except BaseException as exc:  # handed to the test's thread
            box.put(exc)
        box.put(done)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        while True:
            try:
                item = box.get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"nothing came of {what} within {DEADLINE:g} s") from None
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # closed early (a watch, once its stop is set): its reader is done before the transport closes
        reader.join(DEADLINE)


def events_until_end(watch: Iterator[ThreadEvent]) -> list[ThreadEvent]:
    """Watch events (read through :func:`bounded`) up to the snapshot after a run's end."""
    seen: list[ThreadEvent] = []
    for event in watch:
        seen.append(event)
        ended = any(e.kind == "crumb" and e.frame.type in ("agent:run:end", "agent:error") for e in seen)
        if ended and event.kind == "snapshot":
            return seen
    raise AssertionError(f"the watch ended before the run did: {[e.kind for e in seen]}")


def settled(client: AgentClient, run_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        record = client.transport.get_run(run_id)
        if record is not None and record["status"] == status:
            return record
        time.sleep(WATCH_INTERVAL)
    raise AssertionError(f"run {run_id} did not become {status} within {DEADLINE:g} s")


def raises(code: str, call: Any) -> BreadError:
    with pytest.raises(BreadError) as caught:
        result = call()
        if isinstance(result, ThreadRun):
            result.wait_until_idle()
    assert caught.value.code == code, caught.value
    return caught.value


class _GapOnce:
    """The transport under test, but the first run stream it opens loses what follows its
    first frame: the stream says so with a gap, as a server whose log cannot replay would."""

    def __init__(self, transport: Any):
        self._transport = transport
        self._gapped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def stream_run(self, run_id: str, after: int = 0) -> Any:
        stream = self._transport.stream_run(run_id, after)
        if self._gapped:
            return stream
        self._gapped = True
        return _Gapped(stream)


class _Gapped:
    def __init__(self, stream: Any):
        self._stream, self.run_id = stream, stream.run_id

    def __iter__(self) -> Iterator[Any]:
        for item in self._stream:
            yield item
            yield Gap(item.seq + 2)
            return

    def close(self) -> None:
        self._stream.close()


# -- the suite ---------------------------------------------------------------------------------


def test_send_streams_a_run_to_its_end_as_its_log_has_it(agent_client):
    run = agent_client.thread().send("echo", "conformance says hello")
    frames = list(bounded(iter(run), "the run"))
    assert frames[0].type == "agent:run:start" and frames[-1].type == "agent:run:end", [f.type for f in frames]
    assert {f.run_id for f in frames} == {run.run_id}
    assert text_of(frames) == "conformance says hello"
    outcome = run.outcome()
    assert (outcome.status, outcome.output, outcome.text) == ("completed", "conformance says hello", text_of(frames))
    assert shape(frames) == shape(log_of(agent_client, run.run_id))


def test_a_send_retried_with_its_run_id_follows_the_first_run(agent_client):
    thread, run_id = agent_client.thread(), f"run_{uuid.uuid4().hex}"
    first = thread.send("echo", "only once", run_id=run_id).wait_until_idle()
    again = thread.send("echo", "only once", run_id=run_id).wait_until_idle()
    assert (first.run_id, again.run_id, again.status, again.output) == (run_id, run_id, "completed", "only once")
    assert [r["id"] for r in thread.state().runs] == [run_id]


def test_watch_gives_a_snapshot_then_the_live_events_in_order(agent_client):
    thread = agent_client.thread()
    thread.send("echo", "before the watch").wait_until_idle()
    stop = threading.Event()
    watch = bounded(thread.watch(interval=WATCH_INTERVAL, stop=stop), "the watch")
    try:
        first = next(watch)
        assert first.kind == "snapshot" and [r["status"] for r in first.state.runs] == ["completed"]
        assert [m["role"] for m in first.state.messages][:1] == ["user"]
        run = thread.send("slow", {"count": 3, "delayMs": SLOW_MS})
        run.close()  # the watch reads it
        events = events_until_end(watch)
    finally:
        stop.set()
        watch.close()
    crumbs = [e.frame for e in events if e.kind == "crumb"]
    assert {e.run_id for e in events if e.kind == "crumb"} == {run.run_id}
    assert shape(crumbs) == shape(log_of(agent_client, run.run_id))
    assert text_of(crumbs) == "tick 1 tick 2 tick 3 "
    last = events[-1].state
    assert [r["status"] for r in last.runs] == ["completed", "completed"] and last.active_run is None


def test_a_pause_is_answered_and_the_run_goes_on(agent_client):
    thread = agent_client.thread()
    run = thread.send("writer", {"topic": "conformance"})
    paused = run.wait_until_idle()
    assert paused.status == "paused", paused
    assert (paused.pause["kind"], paused.pause["toolName"], paused.pause["input"]) == (
        "approval",
        "publish",
        {"title": "conformance"},
    )
    active = thread.state().active_run
    assert (active["id"], active["status"], active["checkpointId"]) == (
        run.run_id,
        "paused",
        paused.pause["checkpointId"],
    )
    continuation = thread.respond({"approved": True})
    frames = list(bounded(iter(continuation), "the continuation"))
    assert continuation.run_id == run.run_id
    assert [f.type for f in frames if f.durable] == ["human:resumed", "tool:result", "agent:run:end"]
    assert frames[0].seq > run.last.seq
    assert continuation.outcome().output == "Published."
    raises(CHECKPOINT_ALREADY_RESUMED, lambda: run.respond({"approved": True}))


def test_stop_cancels_a_run(agent_client):
    run = agent_client.thread().send("slow", {"count": 200, "delayMs": 50})
    assert next(iter(run)).type == "agent:run:start"
    assert run.cancel() is True
    outcome = run.wait_until_idle()
    assert (outcome.status, outcome.error.code) == ("cancelled", RUN_CANCELLED)
    settled(agent_client, run.run_id, "cancelled")
    assert run.cancel() is False


def test_stop_thread_cancels_its_active_run(agent_client):
    thread = agent_client.thread()
    run = thread.send("slow", {"count": 200, "delayMs": 50})
    assert thread.stop() is True
    assert run.wait_until_idle().status == "cancelled"
    assert thread.stop() is False


def test_files_a_run_makes_are_read_back(agent_client):
    run = agent_client.thread().send("artist")
    assert run.wait_until_idle().status == "completed"
    made = [f for f in log_of(agent_client, run.run_id) if f.type == "file:generated"]
    assert len(made) == 1 and made[0].crumb["mimeType"] == "image/png"
    stored = agent_client.transport.read_file(made[0].crumb["uri"])
    assert (stored.data[:8], stored.mime_type, stored.name) == (PNG, "image/png", "dot.png")
    assert agent_client.transport.create_file_url(made[0].crumb["uri"]) is not None
    missing = "/files/" + "0" * 32
    assert agent_client.transport.create_file_url(missing) is None
    raises(FILE_NOT_FOUND, lambda: agent_client.transport.read_file(missing))


def test_a_file_uploaded_is_read_back_by_its_reference(agent_client):
    uploaded = agent_client.transport.upload_file(PNG + b"rest", "image/png", "up.png")
    assert (uploaded["uri"], uploaded["mimeType"], uploaded["size"]) == (f"/files/{uploaded['id']}", "image/png", 12)
    stored = agent_client.transport.read_file(uploaded["uri"])
    assert (stored.data, stored.mime_type, stored.name) == (PNG + b"rest", "image/png", "up.png")


def test_errors_are_typed(agent_client):
    thread = agent_client.thread()
    raises(AGENT_NOT_FOUND, lambda: thread.send("no-such-agent", "hi"))
    raises(INPUT_INVALID, lambda: thread.send("counter", {"until": "many"}))
    raises(CHECKPOINT_NOT_FOUND, lambda: thread.respond({"approved": True}, checkpoint_id="cp_missing"))
    raises(CHECKPOINT_NOT_FOUND, lambda: thread.respond({"approved": True}))
    raises(RUN_NOT_FOUND, lambda: list(agent_client.run("run_missing")))
    assert agent_client.transport.get_run("run_missing") is None
    assert thread.state().runs == []


@pytest.mark.parametrize("operation", ["rename_thread", "write_tool_data", "recall_queued_item", "execute_command"])
def test_what_bread_cannot_do_is_refused_by_name(agent_client, operation):
    error = raises(NOT_SUPPORTED, lambda: getattr(agent_client.transport, operation)("x"))
    assert operation in error.message


def test_a_watch_repairs_a_gap_from_a_fresh_snapshot(agent_client):
    thread = agent_client.thread()
    gapped = create_agent_client(_GapOnce(agent_client.transport)).thread(thread.id)
    stop = threading.Event()
    watch = bounded(gapped.watch(interval=WATCH_INTERVAL, stop=stop), "the watch")
    try:
        assert next(watch).kind == "snapshot"
        run = thread.send("slow", {"count": 3, "delayMs": SLOW_MS})
        run.close()  # the watch reads it
        events = events_until_end(watch)
    finally:
        stop.set()
        watch.close()
    kinds = [e.kind for e in events]
    gap = kinds.index("crumb")  # the stream lost what followed its first frame...
    repair = kinds.index("snapshot", gap)  # ...so a fresh snapshot came, and the run afresh
    after_repair = [e.frame for e in events[repair + 1 :] if e.kind == "crumb"]
    assert shape(after_repair) == shape(log_of(agent_client, run.run_id)), kinds


def test_threads_are_listed_read_and_deleted(agent_client):
    thread = agent_client.thread()
    assert thread.state().session is None
    thread.send("echo", "remember me").wait_until_idle()
    state = thread.state()
    assert state.session["id"] == thread.id and state.messages[0]["content"] == "remember me"
    assert thread.id in [t["id"] for t in agent_client.threads()]
    thread.delete()
    assert thread.state().session is None
    assert "echo" in [a["id"] for a in agent_client.manifest()["agents"]]


def test_regenerate_runs_the_last_input_again(agent_client):
    thread = agent_client.thread()
    first = thread.send("echo", "say it twice").wait_until_idle()
    again = thread.regenerate().wait_until_idle()
    assert again.run_id != first.run_id and (again.status, again.output) == ("completed", "say it twice")
