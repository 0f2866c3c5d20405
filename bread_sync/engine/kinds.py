"""The kinds of work a run can hold, by the name a checkpoint's snapshot gives each."""

from __future__ import annotations

from typing import Any

from .agent_run import AgentRun
from .loop_run import LoopRun
from .pipeline_run import PipelineRun
from .relay import Relay
from .task_run import TaskRun

KINDS: dict[str, Any] = {kind.kind: kind for kind in (AgentRun, LoopRun, PipelineRun, Relay, TaskRun)}
