"""Pipelines: named sequences of agents (or tasks), each step's output the next step's input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import crumbs as c
from .agent_loop import Steps

if TYPE_CHECKING:
    from .execution import RunContext


@dataclass(frozen=True)
class Step:
    """One step: an ``agent`` or a ``task`` by id; ``name`` defaults to that id."""

    agent: str | None = None
    task: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if (self.agent is None) == (self.task is None):
            raise TypeError("a pipeline step names exactly one of agent= or task=")

    @property
    def label(self) -> str:
        return self.name or self.agent or self.task or ""


@dataclass
class Pipeline:
    id: str
    steps: list[Step] = field(default_factory=list)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.steps:
            raise TypeError(f"pipeline {self.id!r} has no steps")


class PipelineRun:
    """Runs each step under the parent run's id, framed by ``pipeline:step:start``/``end``.
    A step that pauses for a human pauses the pipeline; the resume continues that step."""

    kind = "pipeline"

    def __init__(self, ctx: RunContext, pipeline: Pipeline, input: Any):
        self.ctx = ctx
        self.pipeline = pipeline
        self.input = input
        self.index = 0
        self.outputs: list[Any] = []
        self.child: Any = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "pipelineId": self.pipeline.id, "input": self.input, "index": self.index,
            "outputs": self.outputs, "child": self.child.snapshot() if self.child is not None else None,
        }  # fmt: skip

    @classmethod
    def restore(cls, ctx: RunContext, snap: dict[str, Any]) -> PipelineRun:
        from .execution import restore

        run = cls(ctx, ctx.bread.pipeline(snap["pipelineId"]), snap["input"])
        run.index, run.outputs = snap["index"], snap["outputs"]
        run.child = restore(ctx, snap["child"]) if snap["child"] else None
        return run

    def run(self) -> Steps:
        return (yield from self._steps())

    def pending_tool(self) -> Any:
        return self.child.pending_tool()

    def resume(self, response: Any) -> Steps:
        output = yield from self.child.resume(response)
        yield from self._step_done(output)
        return (yield from self._steps())

    def _steps(self) -> Steps:
        while self.index < len(self.pipeline.steps):
            step = self.pipeline.steps[self.index]
            yield self._frame(c.PIPELINE_STEP_START)
            step_input = self.outputs[-1] if self.outputs else self.input
            if step.task is not None:
                output = yield from self.ctx.call_task(step.task, step_input, agent_id=None)
            else:
                agent = self.ctx.bread.agent(step.agent)
                self.child = self.ctx.activity_for(agent, agent.validate_input(step_input))
                output = yield from self.child.run()
            yield from self._step_done(output)
        return self.outputs[-1]

    def _step_done(self, output: Any) -> Steps:
        self.child = None
        yield {**self._frame(c.PIPELINE_STEP_END), "output": output}
        self.outputs.append(output)
        self.index += 1

    def _frame(self, kind: str) -> dict[str, Any]:
        step = self.pipeline.steps[self.index]
        return {"type": kind, "runId": self.ctx.run_id, "pipelineId": self.pipeline.id,
                "stepName": step.label, "index": self.index}  # fmt: skip
