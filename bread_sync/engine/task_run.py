"""Running tasks: called directly (recorded, no crumbs), or inside a run as a tool or a pipeline
step, framed by ``task:start`` / ``task:end``. Each call is recorded as a TaskRunRecord when the
store records task runs."""

from __future__ import annotations

import time
import uuid
from typing import Any

from .. import crumbs as c
from ..cancel import CancelToken
from ..clock import now_iso
from ..errors import BreadError, internal_error
from ..stores import Store, records_task_runs
from ..tasks import Task
from . import RUN_ENDING, Steps
from .context import RunContext


def run_task(store: Store, task: Task, args: Any, signal: CancelToken | None = None) -> Any:
    """A task called directly (``bread.run_task``): recorded, no crumbs."""
    record = _Record(store, task, args, run_id=None, session_id=None, agent_id=None)
    try:
        output = task.call(task.validate_args(args), signal or CancelToken())
    except Exception as exc:
        record.close(internal_error(exc))
        raise
    record.close(None, output)
    return output


def framed_task(ctx: RunContext, task: Task, args: Any, agent_id: str | None) -> Steps:
    """A task inside a run, as a tool or a pipeline step: ``task:start`` ... ``task:end``."""
    record = _Record(ctx.runtime.store, task, args, ctx.run_id, ctx.session_id, agent_id)
    frame = {"runId": ctx.run_id, "taskRunId": record.id, "taskId": task.id}
    yield {"type": c.TASK_START, **frame, "model": task.model_name, "status": "running"}
    try:
        output = task.call(task.validate_args(args), ctx.token)
    except Exception as exc:
        error = internal_error(exc)
        status = record.close(error)
        if error.code not in RUN_ENDING:
            yield {
                "type": c.TASK_END,
                **frame,
                "status": status,
                "durationMs": record.duration_ms,
                "error": {"code": error.code, "message": error.message},
            }
        raise error from exc
    record.close(None, output)
    yield {"type": c.TASK_END, **frame, "status": "completed", "durationMs": record.duration_ms}
    return output


class _Record:
    """The TaskRunRecord of one call, if the store records task runs."""

    def __init__(
        self, store: Store, task: Task, args: Any, run_id: str | None, session_id: str | None, agent_id: str | None
    ):
        self.store = store if records_task_runs(store) else None
        self.id = f"task_{uuid.uuid4().hex}"
        self.started = time.monotonic()
        self.duration_ms = 0
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
            "createdAt": now,
            "updatedAt": now,
        }
        self._save()

    def close(self, error: BreadError | None, output: Any = None) -> str:
        self.duration_ms = round((time.monotonic() - self.started) * 1000)
        status = "completed" if error is None else "cancelled" if error.code in RUN_ENDING else "failed"
        self.record.update(
            status=status,
            durationMs=self.duration_ms,
            output=output,
            updatedAt=now_iso(),
            error=None if error is None else {"code": error.code, "message": error.message},
        )
        self._save()
        return status

    def _save(self) -> None:
        if self.store is not None:
            self.store.save_task_run(dict(self.record))
