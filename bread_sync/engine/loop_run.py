"""Running a loop: the agent once per iteration, until its stop condition or ``max_iterations``."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any, ClassVar

from .. import crumbs as c
from ..agents import Agent
from ..clock import now_iso
from ..errors import BreadError
from ..files import check_handed_down, input_files
from ..loops import Loop
from ..stores import Store
from . import RUN_ENDING, Steps
from .agent_run import AgentActivity, AgentRun
from .context import RunContext


class LoopRun(AgentActivity):
    """Streams ``loop:*`` crumbs of one accreting shape (``loopId``, ``phase``, ``iteration``,
    ...) and records a LoopRecord with its LoopIterations in the store."""

    kind = "loop"
    saved: ClassVar[dict[str, str]] = {
        **AgentActivity.saved,
        "loopId": "loop_id",
        "iteration": "iteration",
        "output": "output",
        "createdAt": "created_at",
        "iterationStartedAt": "iteration_started_at",
    }

    def __init__(self, ctx: RunContext, agent: Agent, input: Any, skill: str | None = None, record: bool = False):
        super().__init__(ctx, agent, input, skill, record)
        self.loop_id = f"loop_{uuid.uuid4().hex}"
        self.iteration = 0
        self.output: Any = None
        self.created_at = now_iso()
        self.iteration_started_at = self.created_at

    @property
    def settings(self) -> Loop:
        return self.agent.loop

    def run(self) -> Steps:
        self.begun = True
        # With the start crumb: a loop carried on before that crumb is logged is a new one (a
        # new id), and leaves no record behind that nothing would end.
        self.ctx.emitter.defer(partial(self._save, "running"))
        yield self._crumb(c.LOOP_START, "start", maxIterations=self.settings.max_iterations)
        return (yield from self._iterations())

    def _go_on(self) -> Steps:
        """The iteration under way carries on itself (or the next one starts), the loop's records
        running again: a shutdown that handed the run over closed them."""
        self._save("running")
        if self.child is None:
            return (yield from self._iterations())
        self._save_iteration("running", None)
        return (yield from self._iterations(self.child.carry_on()))

    def resume(self, response: Any) -> Steps:
        self._save("running")
        return (yield from self._iterations(self.child.resume(response)))

    def _iterations(self, under_way: Steps | None = None) -> Steps:
        try:
            while True:
                if under_way is None:
                    reason = self._stop_reason()
                    if reason is not None:
                        return (yield from self._end("completed", reason))
                    under_way = self._start_iteration()
                output = yield from under_way
                under_way = None
                yield from self._iteration_done(output)
        except BreadError as exc:
            status = "cancelled" if exc.code in RUN_ENDING else "failed"
            self._save_iteration(status, None)
            self._save(status)
            raise

    def _stop_reason(self) -> str | None:
        """Why the loop stops after the iteration that ended last (None: it goes on)."""
        if self.iteration == 0:
            return None
        if self.settings.done(self.output, self.iteration, self.input):
            return "condition"
        return "max_iterations" if self.iteration >= self.settings.max_iterations else None

    def _start_iteration(self) -> Steps:
        """The next iteration: its agent's run is made before its start crumb, so a
        continuation after that crumb carries the iteration on rather than starting another."""
        self.iteration += 1
        self.iteration_started_at = now_iso()
        self._save("running")  # the record counts the iteration under way
        self._save_iteration("running", None)
        # The previous iteration's output is its model's: it may name only the loop's files. A
        # refusal fails this iteration, the one it was handed to; the one before keeps its output.
        check_handed_down(self.output, self.ctx.runtime.blob_store, input_files(self.input))
        body = {"input": self.input, "iteration": self.iteration, "previous": self.output}
        self.child = AgentRun(self.ctx, self.agent, body, self.skill, self.record)
        yield self._crumb(c.LOOP_ITERATION_START, "iteration:start")
        return (yield from self.child.run())

    def _iteration_done(self, output: Any) -> Steps:
        self.output = output
        self.child = None
        self._save_iteration("completed", output)
        yield self._crumb(c.LOOP_ITERATION_END, "iteration:end", status="completed", output=output)

    def _end(self, status: str, reason: str) -> Steps:
        self.returned = {"output": self.output}
        self._save(status)
        yield self._crumb(c.LOOP_END, "end", status=status, reason=reason, output=self.output)
        return self.output

    def _crumb(self, kind: str, phase: str, **more: Any) -> dict[str, Any]:
        return {
            "type": kind,
            "runId": self.ctx.run_id,
            "loopId": self.loop_id,
            "agentId": self.agent.id,
            "phase": phase,
            "iteration": self.iteration,
            **more,
        }

    def _save(self, status: str) -> None:
        self.ctx.runtime.store.save_loop(
            {
                "id": self.loop_id,
                "agentId": self.agent.id,
                "sessionId": self.ctx.session_id,
                "runId": self.ctx.run_id,
                "status": status,
                "iterations": self.iteration,
                "maxIterations": self.settings.max_iterations,
                "createdAt": self.created_at,
                "updatedAt": now_iso(),
            }
        )

    def _save_iteration(self, status: str, output: Any) -> None:
        self.ctx.runtime.store.save_loop_iteration(
            self.loop_id,
            {
                "index": self.iteration,
                "status": status,
                "output": output,
                "startedAt": self.iteration_started_at,
                "endedAt": None if status == "running" else now_iso(),
            },
        )


def close_loops(store: Store, run_id: str, status: str) -> None:
    """End the records of a run's unfinished loops (and their iterations) with ``status``:
    for a run that ended without its loop driving it there (cancelled while paused, or its
    process died)."""
    now = now_iso()
    for record in store.list_loops(status="running"):
        if record["runId"] != run_id:
            continue
        store.save_loop({**record, "status": status, "updatedAt": now})
        loop = store.get_loop(record["id"]) or {"iterations": []}  # gone meanwhile: nothing left to end
        for iteration in loop["iterations"]:
            if iteration["status"] == "running":
                store.save_loop_iteration(record["id"], {**iteration, "status": status, "endedAt": now})
