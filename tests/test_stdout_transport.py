"""The terminal transport shows the model's reasoning dimmed, apart from the answer."""

import io

import pytest

from bread_sync.crumbs import REASONING_DELTA, TEXT_DELTA, Frame
from bread_sync.transports.stdout import StdoutTransport

RUN = [(REASONING_DELTA, "Weighing"), (REASONING_DELTA, " it."), (TEXT_DELTA, "Yes.")]


def shown(color: bool) -> str:
    out = io.StringIO()
    transport = StdoutTransport(stream=out, color=color)
    for kind, delta in RUN:
        transport.publish(Frame("r", 1, {"type": kind, "runId": "r", "delta": delta}))
    return out.getvalue()


@pytest.mark.parametrize(("color", "expected"), [
    (True, "\x1b[2mWeighing\x1b[0m\x1b[2m it.\x1b[0m\nYes."),
    (False, "Yes."),  # a pipe gets the answer alone
])  # fmt: skip
def test_reasoning_is_dimmed_on_its_own_line_or_left_out_of_a_pipe(color, expected):
    assert shown(color) == expected


def test_a_tool_calls_progress_is_a_line_of_its_own():
    out = io.StringIO()
    transport = StdoutTransport(stream=out, color=False)
    for seq, progress in enumerate([{"progress": 2, "total": 5, "message": "reading"}, {"progress": 3}], 1):
        transport.publish(Frame("r", seq, {"type": "tool:progress", "runId": "r", "toolCallId": "t", **progress}))
    assert out.getvalue() == "[tool] progress 2/5: reading\n[tool] progress 3\n"
