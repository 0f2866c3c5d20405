"""The store seam: the durable truth of runs (crumb log, run records, checkpoints, sessions).

A store module ``stores/<name>.py`` (or package: ``stores/sqlite/``) exports ``store(**opts)``.
Records are plain dicts with the camelCase keys the HTTP API serves. Timestamps are ISO-8601 UTC strings, except a run's
``leaseUntil``, which is epoch seconds in the store (:class:`RunRecord` serves it in ISO-8601).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

from ..clock import iso_from_epoch, now_iso
from ..crumbs import Frame

STORES = {
    "memory": "bread_sync.stores.memory",
    "sqlite": "bread_sync.stores.sqlite",
    "postgres": "bread_sync.stores.postgres",
}

#: ``queued`` (an addition, listed last): opened, waiting for a worker to claim it (executors/).
RUN_STATUSES = ("running", "paused", "completed", "failed", "cancelled", "interrupted", "queued")
FINISHED = frozenset({"completed", "failed", "cancelled", "interrupted"})


def _epoch(value: Any) -> Any:
    return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else value


class RunRecord(BaseModel):
    """A run's record. A store keeps it as a plain dict of these keys (``RunRow`` below); the routes
    answer it through this model, which writes ``leaseUntil`` in ISO-8601 like every other
    timestamp (the store keeps epoch seconds, to compare with the clock)."""

    id: str
    agentId: str
    sessionId: str
    status: Literal[RUN_STATUSES]  # type: ignore[valid-type]
    checkpointId: str | None
    owner: str | None
    leaseUntil: Annotated[
        float,
        BeforeValidator(_epoch),
        PlainSerializer(iso_from_epoch, return_type=str, when_used="json"),
        Field(description="Until when the owner's lease holds: ISO-8601 UTC on the wire."),
    ]
    cancelRequested: bool
    usage: dict[str, Any] | None = Field(
        None, description="The tokens the run's models used so far (its tasks' included); null while none reported."
    )
    createdAt: str
    updatedAt: str
    notBefore: Annotated[
        float | None,
        BeforeValidator(_epoch),
        PlainSerializer(lambda v: None if v is None else iso_from_epoch(v), return_type=str | None, when_used="json"),
        Field(description="A delayed run's time (its request's `after`): no worker claims it before; ISO-8601 UTC."),
    ] = None


#: A run record as a store holds and returns it: a dict of :class:`RunRecord`'s keys, and on the
#: run of a remote agent also these, which the routes do not serve: its remote run's id and the
#: remote seq of the last durable crumb its log holds (engine/relay.py). A store returns them
#: only on a record that has them.
RELAY_FIELDS = ("remoteRunId", "remoteSeq")
#: And on a traced run this one, not served either: the W3C headers (``traceparent``) of its
#: latest driving's span, written with that driving's first crumb; a webhook POST about the run
#: carries them (webhooks/sender.py), from whichever process sends it. Returned only when set.
TRACE_FIELD = "trace"
RunRow = dict[str, Any]


@runtime_checkable
class CrumbLog(Protocol):
    """The ordered, durable crumb log of each run. Seqs are unique per run."""

    def append_crumbs(self, run_id: str, frames: list[Frame]) -> None:
        """Write frames in one transaction; ``SEQ_CONFLICT`` (nothing written) if a seq is taken."""

    def get_crumbs(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Frame]:
        """Frames with seq > after in seq order; costs O(rows returned)."""

    def last_seq(self, run_id: str) -> int: ...

    # Optional, found by the helpers below (a store without them still works):

    def last_seqs(self, run_ids: list[str]) -> dict[str, int]:
        """The last seq of each run that has a log, in one read; costs O(runs), not O(rows)."""

    def batch(self) -> AbstractContextManager[None]:
        """The store calls made inside, in this thread, are written as one: others see all of
        them or none. An exception out of it undoes every call made in it (a refused write takes
        the crumb it was to be recorded with along): SQLite and Postgres roll back, the memory
        store undoes each write. Nested batches join the outer one."""

    def listen(self) -> AppendListener:
        """A listener that hears appends made by any process (Postgres: LISTEN/NOTIFY), for the
        log follower, which then reads a log when it grew instead of polling it."""


class AppendListener(Protocol):
    """What :meth:`CrumbLog.listen` gives: one caller's wake-up on appends."""

    def wait(self, timeout: float) -> set[str] | None:
        """Wait up to ``timeout`` seconds for appends; the run ids appended to since the last
        wait (empty: none), or None when some may have gone unheard (read every log)."""

    def close(self) -> None: ...


class RunStore(Protocol):
    """The run records: created once, read, listed, and updated only while they still hold what
    the caller read (``expect``), which is how processes agree on a run's owner and end."""

    def create_run(self, record: RunRow) -> bool:
        """Insert a run record; False (and no change) when the id exists."""

    def get_run(self, run_id: str) -> RunRow | None: ...

    def update_run(self, run_id: str, expect: dict[str, Any] | None = None, **fields: Any) -> bool:
        """Set fields (and ``updatedAt``) if every ``expect`` field matches; True if it did."""

    def list_runs(
        self, status: str | None = None, agent: str | None = None, session: str | None = None
    ) -> list[RunRow]: ...

    def cancel_requested(self, owner: str) -> list[str]:
        """Ids of running runs of ``owner`` that another process asked to cancel."""

    def claim_queued(
        self, run_id: str, owner: str, lease_until: float, now: float, most_running: int | None = None
    ) -> bool:
        """Claim the queued run ``run_id`` for ``owner`` (``queued`` to ``running`` under the lease)
        if it is due (no ``notBefore`` after ``now``) and, with ``most_running``, fewer of its
        agent's runs are running than that; True if it did. One winner however many try, on any
        host: an agent's cap holds across workers."""

    # Optional, found by :func:`page_runs` (a store without it pages through ``list_runs``):

    def page_runs(
        self,
        agent: str,
        session: str | None = None,
        statuses: list[str] | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[RunRow]:
        """Up to ``limit`` runs of ``agent`` (of ``session``, in ``statuses``, when given), the last
        updated first (then by id, descending), past the cursor ``after``: the ``(updatedAt, id)``
        of the last run of the page before; costs O(rows returned)."""


class CheckpointStore(Protocol):
    """A paused run's checkpoints: saved with its ``human:required`` crumb, claimed once."""

    def save_checkpoint(self, checkpoint: dict[str, Any]) -> None: ...

    def get_checkpoint(self, checkpoint_id: str) -> dict[str, Any] | None: ...

    def claim_checkpoint(self, checkpoint_id: str, status: str = "resumed") -> bool:
        """Atomically move a ``pending`` checkpoint to ``status``; one caller ever wins."""


class SessionStore(Protocol):
    """The sessions: their history, tags and state, written with the crumb that reports them."""

    def touch_session(
        self, session_id: str, tags: dict[str, str] | None = None, state: dict[str, Any] | None = None
    ) -> None:
        """Create the session, or merge tags into it and mark it active; a ``state`` given
        replaces the session's (a new session's is ``{}``)."""

    def append_messages(self, session_id: str, messages: list[dict[str, Any]]) -> None: ...

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """``{id, tags, createdAt, updatedAt, state, messages}``."""

    def list_sessions(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Sessions whose tags include every given pair, without their messages."""

    def delete_session(self, session_id: str) -> bool: ...

    def cleanup_sessions(self, older_than_days: float | None = None, tags: dict[str, str] | None = None) -> int:
        """Delete sessions idle longer than ``older_than_days`` (and matching ``tags``)."""


class SessionClaims(Protocol):
    """One run at a time per session, across processes sharing the store (engine/sessions.py)."""

    def claim_session(self, session_id: str, run_id: str, take_from: str | None = None) -> str | None:
        """Atomically make ``run_id`` the session's one running run; None on success, else the
        holder. ``take_from`` replaces that holder (and only that one) when it is stale."""

    def release_session(self, session_id: str, run_id: str) -> None:
        """Let go of the session if ``run_id`` holds it."""


class LoopStore(Protocol):
    """A loop's record and its iterations, for the loop routes."""

    def save_loop(self, record: dict[str, Any]) -> None:
        """Insert or replace a LoopRecord ``{id, agentId, sessionId, runId, status, iterations,
        maxIterations, createdAt, updatedAt}``."""

    def save_loop_iteration(self, loop_id: str, iteration: dict[str, Any]) -> None:
        """Insert or replace iteration ``{index, status, output, startedAt, endedAt}``."""

    def list_loops(
        self, session: str | None = None, agent: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]: ...

    def get_loop(self, loop_id: str) -> dict[str, Any] | None:
        """``{"loop": LoopRecord, "iterations": [LoopIteration, ...]}`` in index order."""


class TaskRunStore(Protocol):
    """The records of task calls, for the task routes (optional: :func:`records_task_runs`)."""

    def save_task_run(self, record: dict[str, Any]) -> None:
        """Insert or replace a TaskRunRecord ``{id, taskId, sessionId, agentId, runId, status,
        model, durationMs, usage, error, input, output, createdAt, updatedAt}``."""

    def list_task_runs(
        self,
        task: str | None = None,
        session: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first."""

    def get_task_run(self, task_run_id: str) -> dict[str, Any] | None: ...


#: What :meth:`Retention.purge` counts, one number per kind.
PURGED = ("runs", "crumbs", "checkpoints", "loops", "taskRuns", "mcpSessions")


class Retention(Protocol):
    """What ``gc`` deletes: finished runs and what is theirs, older than a cutoff."""

    def purge(self, before: str, dry_run: bool = False) -> dict[str, int]:
        """Delete what ended before ``before`` (an ISO timestamp): each finished run last
        updated before it, with its crumb log, checkpoints, loops (and their iterations) and
        task runs; used or void checkpoints created before it; finished task runs of no run
        created before it; MCP sessions opened before it (a client told 404 opens another).
        Never a running or paused run, nor a pending checkpoint. Returns a
        count per kind of :data:`PURGED`; with ``dry_run`` it only counts."""


class Store(
    CrumbLog,
    RunStore,
    CheckpointStore,
    SessionStore,
    SessionClaims,
    LoopStore,
    TaskRunStore,
    Retention,
    Protocol,
):
    """Everything the runtime and the server need of a store.

    The first-party stores also play the roles the bridges declare where they use them
    (``McpSessionStore`` in protocols/mcp, ``PushStore`` in protocols/a2a), so that this seam
    carries only what every store must do."""


#: Rows of a run's log :func:`read_log` reads at once.
LOG_PAGE = 500


def read_log(store: CrumbLog, run_id: str, through: int | None = None, after: int = 0) -> Iterator[Frame]:
    """A run's log from its start (past seq ``after``; up to seq ``through``, when given),
    :data:`LOG_PAGE` rows at a time: what a bridge feeds its translator to bring it up to a position."""
    while through is None or after < through:
        page = store.get_crumbs(run_id, after, limit=LOG_PAGE)
        for frame in page:
            if through is not None and frame.seq > through:
                return
            yield frame
        if len(page) < LOG_PAGE:
            return
        after = page[-1].seq


def missing_methods(store: object, role: type) -> list[str]:
    """The methods of the protocol ``role`` that ``store`` lacks (none: it plays the role).

    A bridge declares the role it needs of a store and checks the configured one with this."""
    return [name for name in _methods_of(role) if not callable(getattr(store, name, None))]


def _methods_of(role: type) -> list[str]:
    # The protocol's own and its bases' (Store's are all in its bases), not typing's machinery.
    declared = [vars(cls) for cls in reversed(role.__mro__) if cls.__module__ not in ("typing", "builtins")]
    names = (name for found in declared for name, value in found.items() if callable(value))
    return list(dict.fromkeys(name for name in names if not name.startswith("_")))


#: The fields ``webhooks.PushStore.settle_push`` may set.
PUSH_SETTLED = frozenset({"delivered", "attempts", "nextAttemptAt", "lastError", "done"})


def new_push_config(config: dict[str, Any], now: float) -> dict[str, Any]:
    """A subscription as ``webhooks.PushStore.save_push_config`` first stores it."""
    return {
        "taskId": config["taskId"],
        "id": config["id"],
        "mount": config.get("mount"),
        "url": config["url"],
        "token": config.get("token"),
        "authentication": config.get("authentication"),
        "delivered": 0,
        "attempts": 0,
        "nextAttemptAt": now,
        "lastError": None,
        "done": False,
        "claimedBy": None,
        "claimedUntil": None,
        "createdAt": now_iso(),
    }


def page_runs(
    store: RunStore,
    agent: str,
    session: str | None = None,
    statuses: list[str] | None = None,
    after: tuple[str, str] | None = None,
    limit: int = 100,
) -> list[RunRow]:
    """``store.page_runs(...)`` (see :class:`RunStore`), or for a store without it the same page
    cut from all the agent's runs."""
    if callable(getattr(store, "page_runs", None)):
        return store.page_runs(agent, session, statuses, after, limit)
    return runs_page_of(store.list_runs(agent=agent, session=session), statuses, after, limit)


def runs_page_of(
    runs: list[RunRow], statuses: list[str] | None, after: tuple[str, str] | None, limit: int
) -> list[RunRow]:
    """The page :meth:`RunStore.page_runs` answers, cut from ``runs`` (all the agent's)."""
    kept = [
        r
        for r in runs
        if (statuses is None or r["status"] in statuses) and (after is None or (r["updatedAt"], r["id"]) < after)
    ]
    return sorted(kept, key=lambda r: (r["updatedAt"], r["id"]), reverse=True)[:limit]


def records_task_runs(store: object) -> bool:
    return all(callable(getattr(store, name, None)) for name in ("save_task_run", "list_task_runs", "get_task_run"))


def can_purge(store: object) -> bool:
    return callable(getattr(store, "purge", None))


def has_crumb_log(store: object) -> bool:
    return all(callable(getattr(store, name, None)) for name in ("append_crumbs", "get_crumbs", "last_seq"))


def batch(store: object) -> AbstractContextManager[Any]:
    """``store.batch()``, or for a store without one a context that does nothing: its calls
    are then written one by one."""
    make = getattr(store, "batch", None)
    return make() if callable(make) else nullcontext()


def write_batch(store: object, writes: list[Callable[[], Any]]) -> None:
    """``writes`` (calls of ``store``) as one :func:`batch`, through ``store.write_batch`` when
    the store has it (SQLite: under gevent, off the event loop's thread)."""
    write = getattr(store, "write_batch", None)
    if callable(write):
        write(writes)
        return
    with batch(store):
        for each in writes:
            each()


def last_seqs(store: CrumbLog, run_ids: list[str]) -> dict[str, int]:
    """``store.last_seqs(run_ids)``, or one ``last_seq`` a run for a log without it."""
    if callable(getattr(store, "last_seqs", None)):
        return store.last_seqs(run_ids)
    return {run_id: seq for run_id in run_ids if (seq := store.last_seq(run_id))}


def append_listener(store: object) -> AppendListener | None:
    """``store.listen()``, or None for a store that cannot tell who appended (its logs are polled)."""
    listen = getattr(store, "listen", None)
    return listen() if callable(listen) else None


def tags_match(tags: dict[str, str], wanted: dict[str, str] | None) -> bool:
    return not wanted or all(tags.get(k) == v for k, v in wanted.items())


#: Public names that moved to where their role is now (issue 25; the push role to ``webhooks/``
#: in issue 27); kept here for one release.
_MOVED = {
    "McpSessionStore": "bread_sync.protocols.mcp.plugin",
    "PushStore": "bread_sync.webhooks",
    "records_pushes": "bread_sync.webhooks",
}


def __getattr__(name: str) -> Any:
    # Imported by name, not by an import statement: the core never imports a bridge, and the
    # bridge (with its extra) is only loaded by a caller still using the old path.
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"bread_sync.stores.{name} moved to {_MOVED[name]}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(_MOVED[name]), name)
