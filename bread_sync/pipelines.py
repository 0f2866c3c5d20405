"""Pipelines: named sequences of agents (or tasks), each step's output the next step's input (run
by :mod:`bread_sync.engine.pipeline_run`)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    def definition(self) -> str:
        """The id of the agent or task the step runs."""
        return self.agent or self.task or ""

    @property
    def label(self) -> str:
        return self.name or self.definition


@dataclass
class Pipeline:
    id: str
    steps: list[Step] = field(default_factory=list)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.steps:
            raise TypeError(f"pipeline {self.id!r} has no steps")
