"""The engine: everything that drives one run, from its first crumb to its end or pause.

The work a run holds is an :class:`Activity` of one of a few kinds (an agent's run, a loop's, a
pipeline's, a remote agent's relay; a task runs inside one of them), each in the module named
after the run it drives and found by its name in ``kinds.KINDS`` when a checkpoint is resumed.
Opening a run is one sequence (opening.py); what becomes of a run whose process died is
recovery.py's. The engine never sees the ``Bread`` that runs it, only :class:`Runtime`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..errors import RUN_CANCELLED, RUN_INTERRUPTED, RUN_TIMEOUT
from ..stores import Store
from ..transports import Transport

#: What an activity yields: crumbs (and a Pause); what it returns: its output.
Steps = Generator[Any, None, Any]
#: The errors that end a whole run rather than the step that raised them.
RUN_ENDING = frozenset({RUN_CANCELLED, RUN_TIMEOUT, RUN_INTERRUPTED})


@dataclass
class Pause:
    """Yielded up the activity stack when a tool call needs a human."""

    kind: str
    call: dict[str, Any]
    #: The call was logged without its result before the run was carried on (it asks again).
    outcome_unknown: bool = False


class Runtime(Protocol):
    """What the engine, the session guard, the lease keeper and the tails need of the runtime that
    runs them (a ``Bread``): one view, so each part names only the runtime, never a partial copy."""

    config: Any
    store: Store
    blob_store: Any
    transport: Transport
    #: The process's registry of live runs and their cancel tokens.
    cancels: Any
    #: Renews the owner lease of the runs this process drives.
    leases: Any
    #: One run at a time per session.
    sessions: Any
    #: Reads the store's log for the tails of runs that execute in other processes.
    follower: Any
    #: The config's agents by id.
    agents: dict[str, Any]
    #: Agents of other servers by local id (relayed by engine/relay.py).
    remote_agents: dict[str, Any]
    #: Whether it carries on runs whose owner is gone (False while it shuts down).
    carries_on: bool
    #: Its :class:`bread_sync.tracing.Tracer` when tracing is on, else None.
    tracer: Any
    #: Its :class:`bread_sync.metrics.Metrics` when metrics are on, else None.
    metrics: Any
    #: Where an opened run is driven (executors/): here, or queued for a worker.
    executor: Any

    @property
    def owner(self) -> str: ...

    def publish(self, frame: Any) -> None:
        """Hand a crumb the choke point has logged to the listeners and the transport."""

    def cancel(self, run_id: str) -> bool: ...

    def let_go(self) -> None:
        """End the runs and let go of the tails dropped unclosed: call it where no lock is held."""

    def agent(self, agent_id: str) -> Any: ...

    def pipeline(self, pipeline_id: str) -> Any: ...

    def task(self, task_id: str) -> Any: ...


class Activity(ABC):
    """The work a run holds, of one kind: it opens, runs, pauses, and resumes from a snapshot.

    Snapshot and restore are written once here for every kind. A snapshot holds the kind, what
    names the activity's definition (:meth:`head`), the attributes listed in ``saved`` (by
    their snapshot key) and the child activity under way. A kind gives :meth:`head`,
    :meth:`rebuild` (its constructor from a snapshot), ``run`` and ``resume``, :meth:`open` to be
    a run's root, and :meth:`carry_on` to be continued after its process died.

    The state an activity holds when it yields a durable crumb is its state after that crumb:
    the snapshot the driver saves with the crumb (execution.py) is where a continuation goes on."""

    kind: ClassVar[str]
    #: Snapshot key -> attribute, for the state a continuation needs.
    saved: ClassVar[dict[str, str]]
    child: Any
    #: What a new run (unless its caller says) or a continuation does when another run holds the
    #: session (see sessions.py).
    session_policy: str = "reject"
    #: Whether a new run of this kind claims its session (a pipeline's steps keep no history).
    claims_session: ClassVar[bool] = True
    #: Whether the work goes on elsewhere when this process stops (a remote agent's run does):
    #: the run is then handed over rather than ended.
    outlives_process: ClassVar[bool] = False

    @abstractmethod
    def head(self) -> dict[str, Any]:
        """What names this activity's definition (``{"agentId": ...}``)."""

    @classmethod
    @abstractmethod
    def rebuild(cls, ctx: Any, snapshot: dict[str, Any]) -> Any:
        """A new activity for the definition the snapshot's head names."""

    @property
    def definition_id(self) -> str:
        """The id of the agent or pipeline this activity runs (what :meth:`head` names)."""
        (definition_id,) = self.head().values()
        return definition_id

    def snapshot(self, progress: bool = False) -> dict[str, Any]:
        """The activity's state; ``progress``: for the run's progress, saved while the run holds
        its session, where a kind may leave out what the store keeps already (see execution.py)."""
        kept = {key: getattr(self, attribute) for key, attribute in self.saved.items()}
        child = self.child.snapshot(progress) if self.child is not None else None
        return {"kind": self.kind, **self.head(), **kept, "child": child}

    @classmethod
    def restore(cls, ctx: Any, snapshot: dict[str, Any]) -> Any:
        activity = cls.rebuild(ctx, snapshot)
        for key, attribute in cls.saved.items():
            if key in snapshot:  # a key added since the snapshot was taken keeps its initial value
                setattr(activity, attribute, snapshot[key])
        activity.child = ctx.restore(snapshot["child"]) if snapshot["child"] else None
        return activity

    def open(self, tags: dict[str, str], wait_for_session: Callable[[], None] | None) -> Steps:
        """A new run's opening, before :meth:`run`: waiting for its session if another run holds
        it, then the ``agent:run:start`` crumb (the session's touch goes with it). A kind that
        only runs inside a run (a task) has none."""
        raise NotImplementedError(f"a {self.kind} activity is never a run's root")

    def carry_on(self) -> Steps:
        """Go on from a snapshot (or, not begun, from the run's start crumb) after the process
        that drove the run died; returns the output as ``run`` does. A kind without it is not
        continued: its run ends ``RUN_INTERRUPTED``."""
        raise NotImplementedError(f"a {self.kind} activity is not carried on")

    def changed_with(self, crumb_type: str) -> bool:
        """Whether the activity's state may have changed since its last durable crumb, with one
        of ``crumb_type`` (always, unless a kind knows better): where it has not, the driver
        does not even look at its snapshot for the run's progress (execution.py)."""
        return True

    def catch_up(self, logged: list[dict[str, Any]]) -> None:  # noqa: B027 - most kinds save every change
        """Go on over the crumbs ``logged`` after the progress this activity was restored from,
        which saved none since: what :meth:`changed_with` said left the progress as it was."""

    def continuable(self) -> bool:
        """Whether this activity, and the child under way, can be carried on."""
        own = type(self).carry_on is not Activity.carry_on
        return own and (self.child is None or self.child.continuable())

    def read_session(self) -> None:  # noqa: B027 - most kinds read nothing: no need to say so
        """What the activity reads of its session before its first crumb (nothing, but for an
        agent's turn: its history)."""

    def record_fields(self) -> dict[str, Any]:
        """What the run's record holds of this activity, beyond the fields every run has."""
        return {}

    def pending_tool(self) -> Any:
        """The tool whose call the run paused on: the child's, unless a kind knows better."""
        return self.child.pending_tool()
