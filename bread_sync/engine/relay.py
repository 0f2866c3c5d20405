"""The relay: a run whose agent is a remote agent (``Config.remote_agents``) relays the remote
run's crumbs into its own stream, under its own run id and seqs, through its choke point.

The local run writes its own start and terminal crumbs; a remote pause is a local checkpoint
naming the remote one; a local cancel cancels the remote run. Where the relay stands (the record's
``remoteRunId`` and ``remoteSeq``) is written in each relayed durable crumb's transaction, so
another process can take the relay over from exactly there when its owner dies (recovery.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from .. import crumbs as c
from ..errors import RUN_INTERRUPTED, RUN_NOT_FOUND, BreadError
from ..usage import RunUsage
from . import Activity, Pause, Steps
from .context import RunContext

log = logging.getLogger("bread_sync")

#: The remote's own framing of its run; the local run writes its own in their place.
_NOT_RELAYED = frozenset({c.AGENT_RUN_START, c.HUMAN_RESUMED})


class Relay(Activity):
    """A remote agent's run, relayed: the root activity of a remote agent's run, or (``nested``)
    a local agent's subagent."""

    kind = "remote"
    saved: ClassVar[dict[str, str]] = {
        "input": "input",
        "remoteRunId": "remote_run_id",
        "remoteCheckpointId": "remote_checkpoint_id",
        "remoteSeq": "remote_seq",
        "nested": "nested",
    }
    child = None
    outlives_process = True

    def __init__(
        self,
        ctx: RunContext,
        agent_id: str,
        input: Any = None,
        skill: str | None = None,
        remote_run_id: str | None = None,
        remote_seq: int = 0,
        adopted: bool = False,
    ):
        self.ctx = ctx
        self.agent_id = agent_id
        self.remote = ctx.runtime.remote_agents[agent_id]
        self.input = input
        self.skill = skill
        self.remote_run_id = remote_run_id
        self.remote_seq = remote_seq
        self.remote_checkpoint_id: str | None = None
        #: Taken over from a process that died: the remote run exists, follow it.
        self.adopted = adopted
        #: A subagent of a local agent's run: the run's record is not this relay's (no position).
        self.nested = False

    @classmethod
    def nested_in(cls, ctx: RunContext, agent_id: str, arguments: Any) -> Relay:
        """A remote agent called as a subagent, with the call's arguments (its ``input`` field
        when the remote agent has no input schema, as for a local subagent)."""
        no_schema = not ctx.runtime.remote_agents[agent_id].input_schema()
        input = arguments.get("input") if no_schema and isinstance(arguments, dict) else arguments
        child = cls(ctx, agent_id, input, remote_run_id=f"run_{uuid.uuid4().hex}")
        child.nested = True
        return child

    def head(self) -> dict[str, Any]:
        return {"agentId": self.agent_id}

    @classmethod
    def rebuild(cls, ctx: Any, snapshot: dict[str, Any]) -> Relay:
        if snapshot["agentId"] not in ctx.runtime.remote_agents:
            raise BreadError(RUN_INTERRUPTED, f"{snapshot['agentId']!r} is no longer a remote agent of this config")
        return cls(ctx, snapshot["agentId"])

    def pending_tool(self) -> Any:
        return None  # the remote validates the response against its tool

    def record_fields(self) -> dict[str, Any]:
        # Chosen here and recorded before the remote is asked, so whoever takes the relay over
        # knows which run to follow, and a retried POST attaches to it.
        return {"remoteRunId": self.remote_run_id, "remoteSeq": 0}

    def open(self, tags: dict[str, str], wait_for_session: Callable[[], None] | None) -> Steps:
        """The local run's own start crumb (the remote's is not relayed), once its session is free."""
        start = self.ctx.start_crumb(self.agent_id, self.input, self.skill)
        if wait_for_session is not None:
            wait_for_session()
        self.ctx.touch_session_with_next_crumb(tags)
        yield start

    def run(self) -> Steps:
        """Start the remote run, or (adopted) follow it after the position recorded."""
        if self.adopted:
            frames = self.remote.follow(self.remote_run_id, self.remote_seq)
        else:
            frames = self.remote.start(
                self.remote_run_id, self.input, self.ctx.session_id, self.skill, self.ctx.trace_headers()
            )
        return (yield from self._relay(frames))

    def carry_on(self) -> Steps:
        """A subagent relayed goes on relaying the remote run after the position its progress
        holds; with nothing relayed yet it starts it again (a start under the run's id attaches
        to the run if the remote has it)."""
        if self.remote_seq == 0:
            return (yield from self.run())
        return (yield from self._relay(self.remote.follow(self.remote_run_id, self.remote_seq)))

    def continuable(self) -> bool:
        """Only a subagent's relay is carried on from the run's progress: a remote agent's own
        run is taken over from its record (engine/recovery.py's ``adopt``), with no progress."""
        return self.nested

    def resume(self, response: Any) -> Steps:
        checkpoint_id, self.remote_checkpoint_id = self.remote_checkpoint_id, None
        frames = self.remote.resume(
            self.remote_run_id, checkpoint_id, response, self.remote_seq, self.ctx.trace_headers()
        )
        return (yield from self._relay(frames))

    def _relay(self, frames: Any) -> Steps:
        run_id, store, emitter, token = self.ctx.run_id, self.ctx.runtime.store, self.ctx.emitter, self.ctx.token
        undo = token.on_cancel(lambda: self._on_cancel(frames))
        try:
            for frame in frames:
                crumb = frame.crumb
                kind = crumb["type"]
                if kind in c.NOT_DURABLE:
                    yield {"type": kind, "runId": run_id, "delta": crumb["delta"]}
                    continue
                self.remote_seq = frame.seq
                if kind == c.AGENT_RUN_END:
                    # what the remote's models used, all its pauses included, counts for this run
                    self.ctx.usage.merge(RunUsage.from_wire(crumb.get("usage")))
                    return crumb.get("output")
                if kind == c.AGENT_ERROR:
                    raise _error_of(crumb)
                if not self.nested:
                    emitter.defer(partial(store.update_run, run_id, remoteSeq=frame.seq))
                if kind == c.AGENT_RUN_CONTINUED:
                    # The remote lost the text it streamed after its afterSeq, and so does this log:
                    # the same crumb here says so in this log's seqs.
                    emitter.drop_text()
                    yield {**crumb, "runId": run_id, "afterSeq": emitter.last_seq}
                    continue
                if kind == c.HUMAN_REQUIRED:
                    self.remote_checkpoint_id = crumb["checkpointId"]
                    call = {"id": crumb["toolCallId"], "name": crumb["toolName"], "input": crumb["input"]}
                    yield Pause(crumb["kind"], call)  # the run ends here; resume() continues it
                    return None
                if kind not in _NOT_RELAYED:
                    yield {**crumb, "runId": run_id}
        except BreadError as exc:
            if exc.code == RUN_NOT_FOUND:
                raise BreadError(RUN_INTERRUPTED, "the remote run is gone") from exc
            raise
        finally:
            undo()
            frames.close()  # the remote response, at once rather than when collected
        token.raise_if_cancelled()  # the stream was closed by a cancel (or a shutdown)
        raise BreadError(RUN_INTERRUPTED, "the remote run's stream ended without its end")

    def _on_cancel(self, frames: Any) -> None:
        """Stop reading the remote now (it may have stopped answering), and cancel the remote
        run, unless this process is stopping (a shutdown): then the run is handed over, and the
        remote run goes on for the process that takes the relay over or carries the run on."""
        frames.close()
        if self.ctx.token.reason.code == RUN_INTERRUPTED:
            return
        # The token is cancelled on the canceller's thread: the remote call waits on its own.
        remote, run_id = self.remote, self.remote_run_id
        threading.Thread(target=quietly, args=(remote.cancel, run_id), name="bread-remote-cancel", daemon=True).start()


def quietly(call: Any, *args: Any) -> None:
    """A call to the remote whose failure only the remote's own log can report (a cancel)."""
    try:
        call(*args)
    except Exception:
        log.warning("a call to a remote agent failed", exc_info=True)


def _error_of(crumb: dict[str, Any]) -> BreadError:
    error = crumb.get("error")
    return error if isinstance(error, BreadError) else BreadError.from_wire(error or {})
