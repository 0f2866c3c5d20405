"""The text a run carried on after its process died lost: a client drops the live text it holds
whose watermark is the ``agent:run:continued`` crumb's ``afterSeq`` or more, so the text it ends
with is the log's (the stream reader's :class:`LiveText`, and the Python client over HTTP)."""

from __future__ import annotations

import httpx
import pytest

from bread_sync.client import create_agent_client
from bread_sync.client.http import transport
from bread_sync.wire.reader import RunStreamReader
from bread_sync.wire.replay import LiveText

from .test_stream_reader import RUN, WIRES, crumb, delta

# The log: start 1, "Hello. " aggregated at 2, the tool call 3 and its result 4; the process
# died while the model streamed "Lost" after seq 4; the continuation's text is aggregated at 6.
BEFORE_THE_DEATH = [
    crumb(1, "agent:run:start", agentId="a", sessionId="s", input="hi"),
    delta(1, "Hello. "),
    crumb(3, "tool:call", toolCallId="c1", toolName="t", input={}),
    crumb(4, "tool:result", toolCallId="c1", toolName="t", output=1),
    delta(4, "Lo"),
    delta(4, "st"),
]
CONTINUED = crumb(5, "agent:run:continued", reason="owner-died", afterSeq=4, attempt=1)
AFTER_IT = [CONTINUED, delta(5, "Fou"), delta(5, "nd."), crumb(7, "agent:run:end", output="Found.")]
LOG_TEXT = "Hello. Found."


@pytest.fixture(params=sorted(WIRES))
def wire(request):
    return WIRES[request.param]


def body(wire, frames) -> bytes:
    return b"".join(wire.frame(frame) for frame in frames)


def test_the_text_held_drops_what_the_continuation_says_was_lost_on_either_wire(wire):
    reader, held = RunStreamReader(RUN), LiveText()
    for frames in (BEFORE_THE_DEATH, AFTER_IT):  # the dead process's response, then a reconnect
        reader.connect(wire.content_type, 0.0)
        for item in reader.feed(body(wire, frames), 0.0):
            held.take(item)
        if frames is BEFORE_THE_DEATH:
            assert held.text == "Hello. Lost"
    assert held.text == LOG_TEXT


def test_the_log_s_own_text_is_kept_whatever_came_before_the_continuation():
    held = LiveText()
    log = [BEFORE_THE_DEATH[0], delta(2, "Hello. "), *BEFORE_THE_DEATH[2:4], CONTINUED, delta(6, "Found.")]
    for frame in log:  # a replay from the log: its aggregates have seqs of their own
        held.take(frame)
    assert held.text == LOG_TEXT


def test_a_continuation_with_nothing_lost_drops_nothing():
    held = LiveText()
    for frame in [*BEFORE_THE_DEATH[:4], CONTINUED, *AFTER_IT[1:]]:
        held.take(frame)
    assert held.text == LOG_TEXT


def test_the_python_client_ends_with_the_log_s_text_after_its_reconnect(wire):
    """The run's response ends where its process died; the passive stream the client reopens
    from ``Last-Event-ID`` brings the continuation."""
    asked: list[tuple[str, str | None]] = []

    def server(request: httpx.Request) -> httpx.Response:
        asked.append((request.method, request.headers.get("last-event-id")))
        frames = BEFORE_THE_DEATH if request.method == "POST" else AFTER_IT
        headers = {"content-type": wire.content_type, "bread-run-id": RUN}
        return httpx.Response(200, headers=headers, content=iter([body(wire, frames)]))

    with httpx.Client(transport=httpx.MockTransport(server)) as http:
        client = create_agent_client(transport("http://bread.test", client=http))
        outcome = client.thread("s").send("a", "hi", run_id=RUN).wait_until_idle()
    assert asked == [("POST", None), ("GET", "4")]
    assert (outcome.status, outcome.output, outcome.text) == ("completed", "Found.", LOG_TEXT)
