"""The transport contract of the client (client-transports.md's ``AgentClientTransport``, in
snake_case) and the shapes it hands over."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..crumbs import AGENT_RUN_START, Frame
from ..errors import NOT_SUPPORTED, RUN_NOT_FOUND, BreadError

#: A run record's statuses while the run is not over.
ACTIVE = ("running", "paused")


@dataclass
class ThreadState:
    """A thread's authoritative snapshot: its session (None before its first run) and its runs'
    records, oldest first, as ``GET /sessions/<id>`` and ``GET /runs?session=<id>`` answer."""

    thread_id: str
    session: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.session["messages"]) if self.session else []

    @property
    def active_run(self) -> dict[str, Any] | None:
        """The oldest run not over (running, or paused for a human)."""
        return next((run for run in self.runs if run["status"] in ACTIVE), None)


@dataclass
class StoredFile:
    data: bytes
    mime_type: str
    name: str | None = None


class RunStream(Protocol):
    """One run's frames as they come (and a ``tails.Gap`` where some were lost), each durable
    crumb once and in order, text under the documented dedup rule."""

    run_id: str

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class AgentClientTransport(Protocol):
    """What a transport does; the facade gives it its meaning. ``send`` and
    ``respond_to_action`` return the run's stream up to its end or its next pause;
    ``stream_run`` follows a run through its pauses to its end (bread's watch channel).

    Optional: ``watch_thread(thread_id, interval, stop)``, an iterator of
    :class:`~bread_sync.client.facade.ThreadEvent` the facade uses instead of its own; and
    ``watch_thread_heads``. Neither built-in transport has them (``optional`` finds them).
    Background runs need ``send_background(thread_id, agent_id, input, *, run_id, skill,
    webhook) -> run_id`` and ``wait_run(run_id, timeout) -> report`` (the run's record with
    ``output``, ``error``, ``checkpoint``), which both built-in transports have.
    """

    def get_manifest(self) -> dict[str, Any]: ...
    def list_threads(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]: ...
    def rename_thread(self, thread_id: str, title: str) -> Any: ...
    def delete_thread(self, thread_id: str) -> None: ...
    def get_thread_state(self, thread_id: str) -> ThreadState | None: ...
    def send(
        self, thread_id: str, agent_id: str, input: Any, *, run_id: str | None = None, skill: str | None = None
    ) -> RunStream: ...
    def regenerate(self, thread_id: str, *, run_id: str | None = None) -> RunStream: ...
    def stop_thread(self, thread_id: str) -> bool: ...
    def stop_run(self, run_id: str) -> bool: ...
    def respond_to_action(self, checkpoint_id: str, response: Any) -> RunStream: ...
    def write_tool_data(self, *args: Any, **kwargs: Any) -> Any: ...
    def recall_queued_item(self, *args: Any, **kwargs: Any) -> Any: ...
    def execute_command(self, *args: Any, **kwargs: Any) -> Any: ...
    def get_run(self, run_id: str) -> dict[str, Any] | None: ...
    def stream_run(self, run_id: str, after: int = 0) -> RunStream: ...
    def upload_file(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]:
        """Store a file to reference in a run's input: ``{id, uri, mimeType, size}``."""

    def create_file_url(self, file_id: str) -> str | None: ...
    def read_file(self, file_id: str) -> StoredFile: ...
    def close(self) -> None: ...


def optional(transport: Any, name: str) -> Any:
    """An optional operation of ``transport`` (``watch_thread``, ``watch_thread_heads``), or None."""
    method = getattr(transport, name, None)
    return method if callable(method) else None


class Unsupported:
    """The operations of the reference that bread has no counterpart for, for a transport to
    inherit: each raises ``NOT_SUPPORTED`` naming itself, never a silent no-op."""

    def rename_thread(self, *args: Any, **kwargs: Any) -> Any:
        raise not_supported("rename_thread", "a session has no title")

    def write_tool_data(self, *args: Any, **kwargs: Any) -> Any:
        raise not_supported("write_tool_data", "tools take their data from the run, not from the client")

    def recall_queued_item(self, *args: Any, **kwargs: Any) -> Any:
        raise not_supported("recall_queued_item", "bread has no queue of messages")

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        raise not_supported("execute_command", "bread has no commands")


def not_supported(operation: str, why: str) -> BreadError:
    return BreadError(NOT_SUPPORTED, f"{operation} is not supported: {why}")


def last_turn(transport: AgentClientTransport, thread_id: str) -> tuple[str, Any]:
    """What ``regenerate`` sends again: the agent of the thread's last run and the input its
    ``agent:run:start`` recorded."""
    state = transport.get_thread_state(thread_id)
    if state is None or not state.runs:
        raise BreadError(RUN_NOT_FOUND, f"thread {thread_id} has no run to regenerate")
    last = state.runs[-1]
    stream = transport.stream_run(last["id"])
    try:
        start = next((item for item in stream if isinstance(item, Frame)), None)
    finally:
        stream.close()
    if start is None or start.type != AGENT_RUN_START:
        raise BreadError(RUN_NOT_FOUND, f"run {last['id']} has no start to send again")
    return last["agentId"], start.crumb["input"]
