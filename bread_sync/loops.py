"""Agent-driven loops: repeat an agent until a stop condition or ``max_iterations`` (run by
:mod:`bread_sync.engine.loop_run`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DONE_MARKER = "[done]"


@dataclass(frozen=True)
class Loop:
    """``Agent(loop=Loop(max_iterations=5, until=...))``.

    Each iteration runs the agent once with the input ``{"input", "iteration", "previous"}``
    (the run's input, the iteration's number from 1, the last iteration's output). The loop
    stops when ``until(output, iteration, input)`` is true, when the model says it is done (its
    text output ends with ``[done]``, or a json output has ``"done": true``), or after
    ``max_iterations``.
    """

    max_iterations: int = 10
    until: Callable[[Any, int, Any], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(f"a loop needs max_iterations of at least 1, not {self.max_iterations!r}")

    def done(self, output: Any, iteration: int, input: Any) -> bool:
        if self.until is not None and self.until(output, iteration, input):
            return True
        if isinstance(output, str):
            return output.rstrip().endswith(DONE_MARKER)
        return isinstance(output, dict) and output.get("done") is True
