"""Tasks: one-shot structured calls, an input schema in and a validated output out."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from . import crumbs as c
from .agent_loop import RUN_ENDING, Steps
from .agents import describe_validation
from .cancel import CancelToken
from .errors import INPUT_INVALID, OUTPUT_INVALID, BreadError, internal_error
from .models import ModelRequest, TextDelta, resolve_provider
from .stores import now_iso, records_task_runs

if TYPE_CHECKING:
    from .execution import RunContext
    from .runtime import Bread


@dataclass
class Task:
    """``model`` is ``"provider:name"`` or a provider object; ``prompt`` the system prompt.
    The model gets the args as JSON and must answer JSON that ``output_schema`` accepts."""

    id: str
    input_schema: type[BaseModel]
    output_schema: type[BaseModel]
    model: Any = "echo"
    prompt: str = ""
    description: str = ""

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else getattr(self.model, "name", "custom")

    def validate_args(self, args: Any) -> dict[str, Any]:
        try:
            return self.input_schema.model_validate(args).model_dump(mode="json")
        except ValidationError as exc:
            raise BreadError(INPUT_INVALID, describe_validation(exc, f"task {self.id!r} args")) from None

    def call(self, args: dict[str, Any], token: CancelToken) -> Any:
        """One model call; the parsed, validated output."""
        provider, model_name = resolve_provider(self.model)
        request = ModelRequest(
            model=model_name, system=self.prompt, messages=[{"role": "user", "content": json.dumps(args)}],
            tools=[], signal=token, input=args, output_format="json",
        )  # fmt: skip
        text = "".join(e.text for e in provider.stream(request) if isinstance(e, TextDelta))
        token.raise_if_cancelled()
        try:
            return self.output_schema.model_validate_json(text).model_dump(mode="json")
        except ValidationError as exc:
            raise BreadError(OUTPUT_INVALID, describe_validation(exc, f"task {self.id!r} output")) from None


def run_task(bread: Bread, task: Task, args: Any, signal: CancelToken | None = None) -> Any:
    """A task called directly (``bread.run_task``): recorded, no crumbs."""
    record = _Record(bread, task, args, run_id=None, session_id=None, agent_id=None)
    try:
        output = task.call(task.validate_args(args), signal or CancelToken())
    except Exception as exc:
        record.close(internal_error(exc))
        raise
    record.close(None, output)
    return output


def framed_task(ctx: RunContext, task: Task, args: Any, agent_id: str | None) -> Steps:
    """A task inside a run, as a tool or a pipeline step: ``task:start`` ... ``task:end``."""
    record = _Record(ctx.bread, task, args, ctx.run_id, ctx.session_id, agent_id)
    frame = {"runId": ctx.run_id, "taskRunId": record.id, "taskId": task.id}
    yield {"type": c.TASK_START, **frame, "model": task.model_name, "status": "running"}
    try:
        output = task.call(task.validate_args(args), ctx.token)
    except Exception as exc:
        error = internal_error(exc)
        status = record.close(error)
        if error.code not in RUN_ENDING:
            yield {"type": c.TASK_END, **frame, "status": status, "durationMs": record.duration_ms,
                   "error": {"code": error.code, "message": error.message}}  # fmt: skip
        raise error from exc
    record.close(None, output)
    yield {"type": c.TASK_END, **frame, "status": "completed", "durationMs": record.duration_ms}
    return output


class _Record:
    """The TaskRunRecord of one call, if the store records task runs."""

    def __init__(self, bread: Bread, task: Task, args: Any, run_id: str | None, session_id: str | None,
                 agent_id: str | None):  # fmt: skip
        self.store = bread.store if records_task_runs(bread.store) else None
        self.id = f"task_{uuid.uuid4().hex}"
        self.started = time.monotonic()
        self.duration_ms = 0
        now = now_iso()
        self.record = {
            "id": self.id, "taskId": task.id, "sessionId": session_id, "agentId": agent_id, "runId": run_id,
            "status": "running", "model": task.model_name, "durationMs": None, "usage": None, "error": None,
            "input": args, "output": None, "createdAt": now, "updatedAt": now,
        }  # fmt: skip
        self._save()

    def close(self, error: BreadError | None, output: Any = None) -> str:
        self.duration_ms = round((time.monotonic() - self.started) * 1000)
        status = "completed" if error is None else "cancelled" if error.code in RUN_ENDING else "failed"
        self.record.update(status=status, durationMs=self.duration_ms, output=output, updatedAt=now_iso(),
                           error=None if error is None else {"code": error.code, "message": error.message})  # fmt: skip
        self._save()
        return status

    def _save(self) -> None:
        if self.store is not None:
            self.store.save_task_run(dict(self.record))
