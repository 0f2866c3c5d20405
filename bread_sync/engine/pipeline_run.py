"""Running a pipeline: each step under the parent run's id, its output the next step's input."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, ClassVar

from .. import crumbs as c
from ..errors import INPUT_INVALID, BreadError
from ..files import MayRead, check_files, check_handed_down, input_files
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

    def __init__(self, ctx: RunContext, pipeline: Pipeline, input: Any, entry: Entry | None = None):
        self.ctx = ctx
        self.pipeline = pipeline
        self.input = input
        self.index = 0
        self.outputs: list[Any] = []
        #: Whether the step at ``index`` logged its start.
        self.started = False
        self.child: Any = None
        #: Its input where the run entered (:func:`pipeline_root`); never saved: a run rebuilt
        #: makes it again when a step first asks.
        self._entry = entry

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
        """What runs the step: its task, or its agent (its loop if it has one). The first step's
        input is the one read where the run entered, not read again."""
        step = self.pipeline.steps[self.index]
        if step.task is not None:
            step_input = self.outputs[-1] if self.outputs else self._entered().first_input()
            self._check_handed_down(step_input)
            return TaskRun(self.ctx, self.ctx.runtime.task(step.definition), step_input, agent_id=None)
        agent = self.ctx.runtime.agent(step.definition)
        step_input = agent.validate_input(self.outputs[-1]) if self.outputs else self._entered().first_input()
        self._check_handed_down(step_input)
        return self.ctx.activity_for(agent, step_input)

    def _check_handed_down(self, step_input: Any) -> None:
        """A step's input (as the step reads it: its schema may add a file reference) is the
        model's output before it: it may name only the files the pipeline's input entered with."""
        check_handed_down(step_input, self.ctx.runtime.blob_store, self._entered().files)

    def _entered(self) -> Entry:
        if self._entry is None:
            self._entry = entering(self.ctx.runtime, self.pipeline, self.input)
        return self._entry

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


@dataclass(frozen=True)
class Entry:
    """A pipeline's input where its run enters, its first step's reading of it made once."""

    #: The input as sent and, when the first step is an agent that accepts it, as that step reads
    #: it (its schema may turn it into file references the input as sent does not hold): what
    #: the caller's rule for files is asked of.
    inputs: list[Any]
    #: Why the first step refused the input (``INPUT_INVALID``'s message), else None. The refusal
    #: fails the run at that step, handing no file to anyone.
    refused: str | None = None

    @cached_property
    def files(self) -> set[str]:
        """The files it entered with: all that a step may hand on."""
        return input_files(self.inputs)

    def first_input(self) -> Any:
        """The first step's input as it reads it (a task step the input as sent: it checks its own)."""
        if self.refused is not None:  # raised afresh: one kept here would hold the frame raising it
            raise BreadError(INPUT_INVALID, self.refused)
        return self.inputs[-1]


def pipeline_root(
    runtime: Any, pipeline: Pipeline, input: Any, may_read_file: MayRead | None
) -> Callable[[RunContext], PipelineRun]:
    """What makes the root activity of a run of ``pipeline`` on ``input``, once the files its
    input enters with pass the caller's rule (``FILE_NOT_FOUND`` before the run opens). They are
    checked after the first step's schema read the input, a reading the run then keeps."""
    entry = entering(runtime, pipeline, input)
    check_files(entry.inputs, runtime.blob_store, may_read_file)
    return partial(PipelineRun, pipeline=pipeline, input=input, entry=entry)


def entering(runtime: Any, pipeline: Pipeline, input: Any) -> Entry:
    """A pipeline's input as sent and as its first step reads it (:class:`Entry`)."""
    first = pipeline.steps[0]
    if first.task is not None:
        return Entry([input])
    try:
        return Entry([input, runtime.agent(first.definition).validate_input(input)])
    except BreadError as exc:
        if exc.code != INPUT_INVALID:
            raise
        return Entry([input], refused=exc.message)
