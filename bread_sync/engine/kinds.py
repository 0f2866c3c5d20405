"""The kinds of work a run can hold, by the name a checkpoint's snapshot gives each."""

from __future__ import annotations

from typing import Any

from .agent_loop import AgentLoop
from .loops import LoopRun
from .pipelines import PipelineRun
from .remote import RemoteRun

KINDS: dict[str, Any] = {kind.kind: kind for kind in (AgentLoop, LoopRun, PipelineRun, RemoteRun)}
