"""The client's app-facing half, the same over every transport: threads, runs, watching.

``client.thread(id).send(agent, input)`` starts a run and returns a :class:`ThreadRun`: iterate
it for its frames as they come, or ``wait_until_idle()`` for how it stopped (ended or paused).
A pause is answered with ``run.respond(...)`` (or ``thread.respond(...)``), which returns the
continuation. ``thread.watch()`` yields a snapshot of the thread, then the crumbs of its active
run as they come; a gap or a broken stream is repaired from a fresh snapshot, after which the
active run's stream replays from its start (so a snapshot always resets what a watcher holds).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from ..crumbs import AGENT_ERROR, AGENT_RUN_END, HUMAN_REQUIRED, TERMINAL, Frame
from ..errors import CHECKPOINT_NOT_FOUND, NOT_SUPPORTED, BreadError
from ..wire.replay import LiveText
from .contract import ACTIVE, AgentClientTransport, RunStream, ThreadState, optional

#: Seconds between looks for a thread's next run while none is active.
WATCH_INTERVAL_SECONDS = 1.0
#: How long one request of ``BackgroundRun.wait`` waits at most (the server's bound is 60 s).
WAIT_SECONDS = 30.0


def create_agent_client(transport: AgentClientTransport) -> AgentClient:
    """The client facade over ``transport`` (``client.http.transport(...)``,
    ``client.local.transport(bread)`` or your own)."""
    return AgentClient(transport)


class AgentClient:
    def __init__(self, transport: AgentClientTransport):
        self.transport = transport

    def thread(self, thread_id: str | None = None) -> Thread:
        """A thread (a bread session) by id; a new id when None. Nothing is sent yet."""
        return Thread(self, thread_id or f"ses_{uuid.uuid4().hex}")

    def run(self, run_id: str, after: int = 0) -> ThreadRun:
        """An existing run, followed from ``after`` through its pauses to its end."""
        return ThreadRun(self, self.transport.stream_run(run_id, after), stop_at_pause=False)

    def respond(self, checkpoint_id: str, response: Any) -> ThreadRun:
        """Answer the pause of ``checkpoint_id``, whoever started its run; the continuation."""
        return ThreadRun(self, self.transport.respond_to_action(checkpoint_id, response))

    def manifest(self) -> dict[str, Any]:
        return self.transport.get_manifest()

    def threads(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return self.transport.list_threads(tags)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class Outcome:
    """How a run stopped: ``completed``, ``failed``, ``cancelled`` or ``paused`` (``pause`` is
    the ``human:required`` crumb), with its output or error and the text it streamed as the log
    has it (without the text a model call streamed before its process died: a continuation made
    that call again)."""

    run_id: str
    status: str
    output: Any = None
    error: BreadError | None = None
    pause: dict[str, Any] | None = None
    text: str = ""


class ThreadRun:
    """One run as this client follows it. Iterate it once for its frames (durable crumbs once
    each, in order); :meth:`wait_until_idle` reads what is left."""

    def __init__(self, client: AgentClient, stream: RunStream, stop_at_pause: bool = True):
        self.client = client
        self.run_id = stream.run_id
        self._stream = stream
        self._stop_at_pause = stop_at_pause
        self._frames = self._read()
        self._text = LiveText()  # what a continuation says was lost is dropped from it
        self.last: Frame | None = None  # the last durable crumb read

    def __iter__(self) -> Iterator[Frame]:
        return self._frames

    def _read(self) -> Iterator[Frame]:
        try:
            for item in self._stream:
                if item.__class__ is not Frame:
                    continue  # a gap: the durable crumbs it lost are in the log, not here
                self._text.take(item)
                if item.durable:
                    self.last = item
                yield item
                if item.crumb["type"] in TERMINAL or self._stop_at_pause and item.crumb["type"] == HUMAN_REQUIRED:
                    return
        finally:
            self._stream.close()

    def wait_until_idle(self) -> Outcome:
        """Read the run to its end, or its pause; how it stopped."""
        for _ in self._frames:
            pass
        return self.outcome()

    def outcome(self) -> Outcome:
        text, last = self._text.text, self.last
        kind = last.crumb["type"] if last is not None else None
        if kind == AGENT_RUN_END:
            return Outcome(self.run_id, "completed", output=last.crumb.get("output"), text=text)
        if kind == AGENT_ERROR:
            error = last.crumb["error"]
            status = "cancelled" if error.code == "RUN_CANCELLED" else "failed"
            return Outcome(self.run_id, status, error=error, text=text)
        if kind == HUMAN_REQUIRED:
            return Outcome(self.run_id, "paused", pause=dict(last.crumb), text=text)
        return Outcome(self.run_id, "running", text=text)

    def respond(self, response: Any) -> ThreadRun:
        """Answer the pause this run stopped at; the continuation."""
        pause = self.outcome().pause
        if pause is None:
            raise BreadError(CHECKPOINT_NOT_FOUND, f"run {self.run_id} is not paused")
        return self.client.respond(pause["checkpointId"], response)

    def cancel(self) -> bool:
        """Cancel the run; False when it is unknown or already over."""
        return self.client.transport.stop_run(self.run_id)

    def close(self) -> None:
        """Stop reading (the run goes on): its connection, if it has one, is released."""
        self._frames.close()
        self._stream.close()


class BackgroundRun:
    """A run started with ``background=True``: nothing reads it until asked. :meth:`wait` for
    how it stopped, :meth:`follow` its crumbs, or :meth:`cancel` it."""

    def __init__(self, client: AgentClient, run_id: str):
        self.client = client
        self.run_id = run_id

    def wait(self, timeout: float | None = None) -> Outcome:
        """Wait until the run ends or pauses (at most ``timeout`` seconds; None: as long as it
        takes) and say how it stopped: ``queued`` or ``running`` when the time ran out first.
        Asked of the server WAIT_SECONDS at a time."""
        wait_run = _background(self.client.transport, "wait_run")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = WAIT_SECONDS if deadline is None else min(WAIT_SECONDS, max(deadline - time.monotonic(), 0.0))
            report = wait_run(self.run_id, left)
            if report["status"] not in ("queued", "running") or (deadline is not None and left < WAIT_SECONDS):
                return _outcome_of(report)

    def follow(self, after: int = 0) -> ThreadRun:
        """The run's crumbs from ``after``, through its pauses to its end."""
        return self.client.run(self.run_id, after)

    def cancel(self) -> bool:
        """Cancel the run; False when it is unknown or already over."""
        return self.client.transport.stop_run(self.run_id)


def _outcome_of(report: dict[str, Any]) -> Outcome:
    status, error = report["status"], report.get("error")
    if status == "interrupted":  # as a stream reads its agent:error
        status = "failed"
    pause = report.get("checkpoint") if status == "paused" else None
    failure = BreadError.from_wire(error) if error else None
    return Outcome(report["id"], status, output=report.get("output"), error=failure, pause=pause)


def _background(transport: AgentClientTransport, name: str) -> Any:
    method = optional(transport, name)
    if method is None:
        raise BreadError(NOT_SUPPORTED, f"this client transport cannot run in the background: it has no {name}")
    return method


@dataclass
class ThreadEvent:
    """What ``watch`` yields: a ``snapshot`` (``state``), or a ``crumb`` of a run (``frame``)."""

    kind: str
    state: ThreadState | None = None
    frame: Frame | None = None
    run_id: str | None = field(default=None)


class _Repair(Exception):
    """The watched stream lost frames: read the thread afresh."""


class Thread:
    def __init__(self, client: AgentClient, thread_id: str):
        self.client = client
        self.id = thread_id

    @property
    def transport(self) -> AgentClientTransport:
        return self.client.transport

    def state(self) -> ThreadState:
        """The thread's snapshot; empty before its first run."""
        return self.transport.get_thread_state(self.id) or ThreadState(self.id)

    @overload
    def send(
        self,
        agent_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        skill: str | None = None,
        background: Literal[False] = False,
    ) -> ThreadRun: ...

    @overload
    def send(
        self,
        agent_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        skill: str | None = None,
        background: Literal[True],
        webhook: dict[str, Any] | None = None,
    ) -> BackgroundRun: ...

    def send(
        self,
        agent_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        skill: str | None = None,
        background: bool = False,
        webhook: dict[str, Any] | None = None,
    ) -> ThreadRun | BackgroundRun:
        """Start a run of ``agent_id`` in this thread. With your own ``run_id``, sending again
        follows the run the first send started instead of starting another. With
        ``background=True`` the server answers at once (``Prefer: respond-async``) and this
        returns a :class:`BackgroundRun` to ``wait()`` for; ``webhook`` (``{"url", "secret"?}``)
        has the server POST the run's report at each pause and at its end."""
        if not background:
            if webhook is not None:
                raise ValueError("webhook= goes with background=True")
            return ThreadRun(self.client, self.transport.send(self.id, agent_id, input, run_id=run_id, skill=skill))
        send = _background(self.transport, "send_background")
        started = send(self.id, agent_id, input, run_id=run_id, skill=skill, webhook=webhook)
        return BackgroundRun(self.client, started)

    def regenerate(self, *, run_id: str | None = None) -> ThreadRun:
        """Run the thread's last run's agent again on the same input."""
        return ThreadRun(self.client, self.transport.regenerate(self.id, run_id=run_id))

    def respond(self, response: Any, checkpoint_id: str | None = None) -> ThreadRun:
        """Answer the thread's pending pause (or the checkpoint named); the continuation."""
        if checkpoint_id is None:
            active = self.state().active_run
            checkpoint_id = active and active.get("checkpointId")
            if not checkpoint_id:
                raise BreadError(CHECKPOINT_NOT_FOUND, f"thread {self.id} has no pending pause")
        return self.client.respond(checkpoint_id, response)

    def stop(self) -> bool:
        """Cancel the thread's active run; False when it has none."""
        return self.transport.stop_thread(self.id)

    def delete(self) -> None:
        self.transport.delete_thread(self.id)

    def watch(
        self, interval: float = WATCH_INTERVAL_SECONDS, stop: threading.Event | None = None
    ) -> Iterator[ThreadEvent]:
        """A snapshot, then the crumbs of the thread's runs as they come, for as long as the
        caller reads (or until ``stop`` is set, which another thread may do). Between runs the
        thread is looked at every ``interval`` seconds; any change the crumbs did not carry (a
        run's end, a run started and finished between looks) comes as a fresh snapshot."""
        stop = stop or threading.Event()
        own = optional(self.transport, "watch_thread")
        if own is not None:
            yield from own(self.id, interval, stop)
            return
        yield from _Watch(self, interval, stop).events()


class _Watch:
    def __init__(self, thread: Thread, interval: float, stop: threading.Event):
        self.thread, self.interval, self.stop = thread, interval, stop
        self.over: set[str] = set()  # runs this watch followed to their end

    def events(self) -> Iterator[ThreadEvent]:
        state = self.thread.state()
        yield ThreadEvent("snapshot", state=state)
        while not self.stop.is_set():
            run = next((r for r in state.runs if r["status"] in ACTIVE and r["id"] not in self.over), None)
            if run is None:
                if self.stop.wait(self.interval):
                    return
            else:
                try:
                    yield from self._follow(run["id"])
                except _Repair:
                    pass
                except BreadError:  # the stream broke past its reconnects: look again shortly
                    self.stop.wait(self.interval)
            fresh = self.thread.state()
            if fresh != state or run is not None:
                yield ThreadEvent("snapshot", state=fresh)
            state = fresh

    def _follow(self, run_id: str) -> Iterator[ThreadEvent]:
        stream = self.thread.transport.stream_run(run_id, 0)
        try:
            for item in stream:
                if item.__class__ is not Frame:
                    raise _Repair()
                yield ThreadEvent("crumb", frame=item, run_id=run_id)
                if item.crumb["type"] in TERMINAL:
                    self.over.add(run_id)
        finally:
            stream.close()
