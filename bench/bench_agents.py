"""The benchmarks' config, ``BREAD_CONFIG=bench_agents:config`` (bench/ on PYTHONPATH): the demo
agents plus ``metronome``.

``metronome`` streams ``count`` text deltas on an absolute schedule: delta ``i`` leaves the model
at ``start + i * period`` (epoch seconds, the caller's clock; the same machine's clock in a
benchmark). A client that knows the schedule measures each frame's lateness against it without
the server stamping anything: what it measures is the way from the model, through the choke
point, the transport, the response generator and gunicorn, to the client's socket, plus any
lateness of the worker in waking the run when it is due. Its sleep is the cancel token's wait,
cooperative under gevent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from pydantic import BaseModel, Field

from bread_sync import Agent
from bread_sync.demo import config as demo_config
from bread_sync.models import ModelRequest, TextDelta


class Beat(BaseModel):
    start: float
    period: float = Field(ge=0)
    count: int = Field(ge=0, le=100_000)
    #: Also write the epoch time each delta left the model into its text: ``tick <i> @<time> ``.
    stamp: bool = False


class Metronome:
    name = "metronome"

    def stream(self, request: ModelRequest) -> Iterator[TextDelta]:
        beat = request.input
        for i in range(beat["count"]):
            wait = beat["start"] + i * beat["period"] - time.time()
            if wait > 0 and request.signal.wait(wait):
                return
            yield TextDelta(f"tick {i} @{time.time():.6f} " if beat["stamp"] else f"tick {i} ")


metronome = Agent(
    id="metronome",
    model=Metronome(),
    description="Streams `count` deltas, delta i at `start + i * period` (epoch seconds).",
    input_schema=Beat,
)


def config():
    base = demo_config()
    return base.model_copy(update={"agents": [*base.agents, metronome]})
