"""A sink that renders crumbs for a terminal: live text, tool calls marked, errors explained."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .. import crumbs as c
from ..crumbs import Frame


class StdoutTransport:
    capability = "sink"

    def __init__(self, stream: TextIO | None = None, color: bool | None = None):
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() if color is None else color
        self._mid_line = False

    def publish(self, frame: Frame) -> None:
        crumb = frame.crumb
        if crumb["type"] == c.TEXT_DELTA:
            self._write(crumb["delta"])
            self._mid_line = not crumb["delta"].endswith("\n")
            return
        line = self.render(crumb)
        if line is not None:
            self._write(("\n" if self._mid_line else "") + line + "\n")
            self._mid_line = False

    def render(self, crumb: dict[str, Any]) -> str | None:
        """One marked line for a durable crumb worth showing, else None."""
        kind = crumb["type"]
        if kind == c.TOOL_CALL:
            return self._mark("tool", f"{crumb['toolName']}({_short(crumb['input'])})")
        if kind == c.TOOL_RESULT:
            return self._mark("tool", f"{crumb['toolName']} -> {_short(crumb['output'])}")
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
        return None

    def _mark(self, tag: str, text: str) -> str:
        return f"\x1b[2m[{tag}]\x1b[0m {text}" if self.color else f"[{tag}] {text}"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _error(error: Any) -> dict[str, Any]:
    return error.to_wire() if hasattr(error, "to_wire") else error


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def transport(stream: TextIO | None = None, color: bool | None = None) -> StdoutTransport:
    return StdoutTransport(stream=stream, color=color)
