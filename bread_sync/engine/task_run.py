"""Running tasks: called directly (recorded, no crumbs), or inside a run as a tool or a pipeline
step (a :class:`TaskRun`), framed by ``task:start`` / ``task:end``. Each call is recorded as a
TaskRunRecord when the store records task runs."""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar

from .. import crumbs as c
from ..cancel import CancelToken
from ..clock import now_iso
from ..errors import BreadError, internal_error
from ..stores import Store, records_task_runs
from ..tasks import Task
from ..usage import RunUsage
from . import RUN_ENDING, Activity, Steps
from .context import RunContext


def run_task(store: Store, task: Task, args: Any, signal: CancelToken | None = None) -> Any:
    """A task called directly (``bread.run_task``): recorded, no crumbs."""
    record = _Record(store, task, args, run_id=None, session_id=None, agent_id=None)
    try:
        output = task.call(task.validate_args(args), signal or CancelToken(), record.usage)
    except Exception as exc:
        record.close(internal_error(exc))
        raise
    record.close(None, output)
    return output


class TaskRun(Activity):
    """A task inside a run, as a tool or a pipeline step: ``task:start`` ... ``task:end``.

    Carried on after its process died by calling the task again under the same task run, its
    frame already open (a task is one model call: nothing of it can be gone on from), or, its
    end logged, by returning its output."""

    kind = "task"
    saved: ClassVar[dict[str, str]] = {
        "args": "args",
        "agentId": "agent_id",
        "taskRunId": "task_run_id",
        "begun": "begun",
        "returned": "returned",
    }
    child = None

    def __init__(self, ctx: RunContext, task: Task, args: Any, agent_id: str | None):
        self.ctx = ctx
        self.task = task
        self.args = args
        self.agent_id = agent_id
        self.task_run_id = f"task_{uuid.uuid4().hex}"
        #: Whether its ``task:start`` is logged.
        self.begun = False
        #: ``{"output": ...}`` once its ``task:end`` is logged.
        self.returned: dict[str, Any] | None = None

    def head(self) -> dict[str, Any]:
        return {"taskId": self.task.id}

    @classmethod
    def rebuild(cls, ctx: RunContext, snapshot: dict[str, Any]) -> TaskRun:
        return cls(ctx, ctx.runtime.task(snapshot["taskId"]), snapshot["args"], snapshot["agentId"])

    def run(self) -> Steps:
        record = self._record()
        self.begun = True
        yield {"type": c.TASK_START, **self._frame(), "model": self.task.model_name, "status": "running"}
        return (yield from self._call(record))

    def carry_on(self) -> Steps:
        if not self.begun:
            return (yield from self.run())
        if self.returned is not None:
            return self.returned["output"]
        return (yield from self._call(self._record(carried_on=True)))

    def _call(self, record: _Record) -> Steps:
        """The task's call; the tokens it used count for the run too, whether it failed or not."""
        try:
            output = self.task.call(self.task.validate_args(self.args), self.ctx.token, record.usage, self.ctx.trace)
        except Exception as exc:
            error = internal_error(exc)
            status = record.close(error)
            self.ctx.usage.merge(record.usage)
            if error.code not in RUN_ENDING:
                yield {
                    **self._end(record, status),
                    "error": {"code": error.code, "message": error.message},
                }
            raise error from exc
        record.close(None, output)
        self.ctx.usage.merge(record.usage)
        self.returned = {"output": output}
        yield self._end(record, "completed")
        return output

    def _end(self, record: _Record, status: str) -> dict[str, Any]:
        end = {"type": c.TASK_END, **self._frame(), "status": status, "durationMs": record.duration_ms}
        if record.usage:
            end["usage"] = record.usage.to_wire()
        return end

    def _record(self, carried_on: bool = False) -> _Record:
        """The call's record: a new one, or (``carried_on``) the one its first call made, kept
        under its id and creation time."""
        ctx, store = self.ctx, self.ctx.runtime.store
        earlier = store.get_task_run(self.task_run_id) if carried_on and records_task_runs(store) else None
        created_at = earlier["createdAt"] if earlier else None
        return _Record(
            store, self.task, self.args, ctx.run_id, ctx.session_id, self.agent_id, self.task_run_id, created_at
        )

    def _frame(self) -> dict[str, Any]:
        return {"runId": self.ctx.run_id, "taskRunId": self.task_run_id, "taskId": self.task.id}


class _Record:
    """The TaskRunRecord of one call, if the store records task runs."""

    def __init__(
        self,
        store: Store,
        task: Task,
        args: Any,
        run_id: str | None,
        session_id: str | None,
        agent_id: str | None,
        record_id: str | None = None,
        created_at: str | None = None,
    ):
        self.store = store if records_task_runs(store) else None
        self.id = record_id or f"task_{uuid.uuid4().hex}"
        self.started = time.monotonic()
        self.duration_ms = 0
        #: What the task's model call used, filled in by the call.
        self.usage = RunUsage()
        now = now_iso()
        self.record = {
            "id": self.id,
            "taskId": task.id,
            "sessionId": session_id,
            "agentId": agent_id,
            "runId": run_id,
            "status": "running",
            "model": task.model_name,
            "durationMs": None,
            "usage": None,
            "error": None,
            "input": args,
            "output": None,
            "createdAt": created_at or now,
            "updatedAt": now,
        }
        self._save()

    def close(self, error: BreadError | None, output: Any = None) -> str:
        self.duration_ms = round((time.monotonic() - self.started) * 1000)
        status = "completed" if error is None else "cancelled" if error.code in RUN_ENDING else "failed"
        self.record.update(
            status=status,
            durationMs=self.duration_ms,
            usage=self.usage.to_wire(),
            output=output,
            updatedAt=now_iso(),
            error=None if error is None else {"code": error.code, "message": error.message},
        )
        self._save()
        return status

    def _save(self) -> None:
        if self.store is not None:
            self.store.save_task_run(dict(self.record))
