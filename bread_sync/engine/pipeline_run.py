"""Running a pipeline: each step under the parent run's id, its output the next step's input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .. import crumbs as c
from ..errors import INPUT_INVALID, BreadError
from ..files import check_handed_down, input_files
from ..pipelines import Pipeline
from . import Activity, Steps
from .context import RunContext
from .task_run import TaskRun


class PipelineRun(Activity):
    """Runs each step under the parent run's id, framed by ``pipeline:step:start``/``end``.
    A step that pauses for a human pauses the pipeline; the resume continues that step."""

    kind = "pipeline"
    saved: ClassVar[dict[str, str]] = {"input": "input", "index": "index", "outputs": "outputs", "started": "started"}
    claims_session = False

    def __init__(self, ctx: RunContext, pipeline: Pipeline, input: Any):
        self.ctx = ctx
        self.pipeline = pipeline
        self.input = input
        self.index = 0
        self.outputs: list[Any] = []
        #: Whether the step at ``index`` logged its start.
        self.started = False
        self.child: Any = None
        #: The files its input entered with (made when a step first asks; never saved).
        self._entered: set[str] | None = None

    def head(self) -> dict[str, Any]:
        return {"pipelineId": self.pipeline.id}

    @classmethod
    def rebuild(cls, ctx: RunContext, snapshot: dict[str, Any]) -> PipelineRun:
        return cls(ctx, ctx.runtime.pipeline(snapshot["pipelineId"]), snapshot["input"])

    def open(self, tags: dict[str, str], wait_for_session: Callable[[], None] | None) -> Steps:
        del wait_for_session  # always None: a pipeline claims no session (claims_session)
        self.ctx.touch_session_with_next_crumb(tags)
        yield self.ctx.start_crumb(self.pipeline.id, self.input, pipelineId=self.pipeline.id)

    def run(self) -> Steps:
        return (yield from self._steps())

    def carry_on(self) -> Steps:
        """Go on from the step under way (it carries on itself) or, its start logged, the step's
        first crumb, then the steps after it."""
        if self.child is not None:
            output = yield from self.child.carry_on()
            yield from self._step_done(output)
        return (yield from self._steps())

    def resume(self, response: Any) -> Steps:
        output = yield from self.child.resume(response)
        yield from self._step_done(output)
        return (yield from self._steps())

    def _steps(self) -> Steps:
        while self.index < len(self.pipeline.steps):
            if not self.started:
                self.started = True
                yield self._frame(c.PIPELINE_STEP_START)
            self.child = self._step_activity()
            output = yield from self.child.run()
            yield from self._step_done(output)
        return self.outputs[-1]

    def _step_activity(self) -> Any:
        """What runs the step: its task, or its agent (its loop if it has one)."""
        step = self.pipeline.steps[self.index]
        step_input = self.outputs[-1] if self.outputs else self.input
        if step.task is not None:
            self._check_handed_down(step_input)
            return TaskRun(self.ctx, self.ctx.runtime.task(step.definition), step_input, agent_id=None)
        agent = self.ctx.runtime.agent(step.definition)
        step_input = agent.validate_input(step_input)
        self._check_handed_down(step_input)
        return self.ctx.activity_for(agent, step_input)

    def _check_handed_down(self, step_input: Any) -> None:
        """A step's input (as the step reads it: its schema may add a file reference) is the
        model's output before it: it may name only the files the pipeline's input entered with."""
        if self._entered is None:
            self._entered = input_files(entering(self.ctx.runtime, self.pipeline, self.input))
        check_handed_down(step_input, self.ctx.runtime.blob_store, self._entered)

    def _step_done(self, output: Any) -> Steps:
        """The step's end crumb, yielded once the pipeline moved on to the next step: the state
        that crumb is logged with."""
        end = {**self._frame(c.PIPELINE_STEP_END), "output": output}
        self.child = None
        self.started = False
        self.outputs.append(output)
        self.index += 1
        yield end

    def _frame(self, kind: str) -> dict[str, Any]:
        step = self.pipeline.steps[self.index]
        return {
            "type": kind,
            "runId": self.ctx.run_id,
            "pipelineId": self.pipeline.id,
            "stepName": step.label,
            "index": self.index,
        }


def entering(runtime: Any, pipeline: Pipeline, input: Any) -> list[Any]:
    """A pipeline's input as sent and as its first step reads it (an agent step's schema may
    turn it into file references the input as sent does not hold): what the caller's rule for
    files is asked of where the run enters. An input that step refuses fails the run there,
    handing no file to anyone."""
    first = pipeline.steps[0]
    if first.task is not None:
        return [input]
    try:
        return [input, runtime.agent(first.definition).validate_input(input)]
    except BreadError as exc:
        if exc.code != INPUT_INVALID:
            raise
        return [input]
