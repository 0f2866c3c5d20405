"""A sink that renders crumbs for a terminal: live text, tool calls marked, errors explained.

It also asks the human at the terminal when a run pauses (:meth:`StdoutTransport.ask`), so the
CLI's prompts and the run's output share one notion of "where the cursor is".
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from .. import crumbs as c
from ..crumbs import Frame


class StdoutTransport:
    capability = "sink"

    def __init__(
        self,
        stream: TextIO | None = None,
        color: bool | None = None,
        input: TextIO | None = None,
        prompts: TextIO | None = None,
    ):
        self.stream = stream or sys.stdout
        self.color = _wants_color(self.stream) if color is None else color
        self.input = input or sys.stdin
        # Prompts go to stderr, as `read -p` does, so they reach the terminal when stdout is a file.
        self.prompts = prompts or sys.stderr
        self._mid_line = False
        self._streaming = c.TEXT_DELTA  # the type of the deltas being written

    def publish(self, frame: Frame) -> None:
        crumb = frame.crumb
        kind = crumb["type"]
        if kind in c.NOT_DURABLE:
            self._delta(kind, crumb["delta"])
            return
        line = self.render(crumb)
        if line is not None:
            self._end_line()
            self._write(line + "\n")
        elif crumb["type"] == c.AGENT_RUN_END:
            self._end_line()

    def _delta(self, kind: str, delta: str) -> None:
        """Text as it comes; reasoning dimmed, on lines of its own, and only on a terminal with
        colours (a pipe gets the answer alone)."""
        if kind == c.REASONING_DELTA and not self.color:
            return
        if kind != self._streaming:
            self._end_line()
            self._streaming = kind
        self._write(f"\x1b[2m{delta}\x1b[0m" if kind == c.REASONING_DELTA else delta)
        self._mid_line = not delta.endswith("\n")

    def render(self, crumb: dict[str, Any]) -> str | None:
        """One marked line for a durable crumb worth showing, else None."""
        kind = crumb["type"]
        if kind == c.TOOL_CALL:
            return self._mark("tool", f"{crumb['toolName']}({_short(crumb['input'])})")
        if kind == c.TOOL_RESULT:
            return self._mark("tool", f"{crumb['toolName']} -> {_short(crumb['output'])}")
        if kind == c.TOOL_PROGRESS:
            total = f"/{crumb['total']:g}" if crumb.get("total") is not None else ""
            message = f": {crumb['message']}" if crumb.get("message") else ""
            return self._mark("tool", f"progress {crumb['progress']:g}{total}{message}")
        if kind == c.TOOL_ERROR:
            error = _error(crumb["error"])
            return self._mark("tool", f"{crumb['toolName']} failed: {error['code']}: {error['message']}")
        if kind == c.HUMAN_REQUIRED:
            what = "approve" if crumb["kind"] == "approval" else "answer"
            return self._mark("human", f"{what} {crumb['toolName']}({_short(crumb['input'])})")
        if kind == c.HUMAN_RESUMED:
            return self._mark("human", f"resumed with {_short(crumb['response'])}")
        if kind == c.AGENT_ERROR:
            error = _error(crumb["error"])
            return self._mark("error", f"{error['code']}: {error['message']}")
        return self._render_progress(crumb)

    def _render_progress(self, crumb: dict[str, Any]) -> str | None:
        """Markers for the nested work of a long run, so a terminal shows where it is."""
        kind = crumb["type"]
        if kind == c.PIPELINE_STEP_START:
            return self._mark("step", f"{crumb['index'] + 1}: {crumb['stepName']}")
        if kind == c.SUBAGENT_RUN_START:
            return self._mark("agent", str(crumb["subagentId"]))
        if kind == c.TASK_START:
            return self._mark("task", str(crumb["taskId"]))
        if kind == c.LOOP_ITERATION_START:
            return self._mark("loop", f"iteration {crumb['iteration']}")
        if kind == c.FILE_GENERATED:
            return self._mark("file", f"{crumb.get('name') or ''} {crumb['uri']}".strip())
        return None

    def question(self, checkpoint: dict[str, Any]) -> str:
        """The prompt for a pause: ``Approve tool({...})? [y/N] `` or the tool's question."""
        if checkpoint["kind"] == "approval":
            return f"Approve {checkpoint['toolName']}({_short(checkpoint['input'])})? [y/N] "
        return f"{_question_text(checkpoint)} "

    def ask(self, question: str) -> str:
        """Show ``question`` (when the input is a terminal) and read one line; EOFError at the end."""
        self._end_line()
        if self.input.isatty():
            self.prompts.write(question)
            self.prompts.flush()
        line = self.input.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    def _mark(self, tag: str, text: str) -> str:
        return f"\x1b[2m[{tag}]\x1b[0m {text}" if self.color else f"[{tag}] {text}"

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _wants_color(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")  # https://no-color.org


def _question_text(checkpoint: dict[str, Any]) -> str:
    value = checkpoint["input"]
    if isinstance(value, dict):
        strings = [v for v in value.values() if isinstance(v, str)]
        value = value.get("question", strings[0] if len(strings) == 1 else value)
    if isinstance(value, str):
        return value
    return f"{checkpoint['toolName']}({_short(value)}):"


def _error(error: Any) -> dict[str, Any]:
    return error.to_wire() if hasattr(error, "to_wire") else error


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def transport(
    stream: TextIO | None = None,
    color: bool | None = None,
    input: TextIO | None = None,
    prompts: TextIO | None = None,
) -> StdoutTransport:
    """Render crumbs to ``stream`` (stdout); prompts read ``input`` (stdin), shown on ``prompts``."""
    return StdoutTransport(stream=stream, color=color, input=input, prompts=prompts)
