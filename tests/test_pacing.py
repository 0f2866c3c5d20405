"""Under gevent, a run's driver gives way to other greenlets between its crumbs, text deltas too,
even with nobody reading the run (its client gone): no run holds the worker until it ends."""

import json
import subprocess
import sys

WORDS = 200_000

DRIVER_ALONE = f"""
from gevent import monkey; monkey.patch_all()
import json
import gevent
from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.transports import stream

bread = create_bread(config().model_copy(update={{"store": "memory", "transport": stream.transport()}}))
deltas = [0]
bread.on("crumb", lambda frame: deltas.__setitem__(0, deltas[0] + (frame.type == "text:delta")))
run = bread.run("echo", "a " * {WORDS})
seen = []

def tick():  # wakes on a timer, as a request's I/O would: only a pass of the event loop lets it in
    while True:
        seen.append(deltas[0])
        gevent.sleep(0.001)

ticker = gevent.spawn(tick)
gevent.spawn(run.drain).join()
ticker.kill()
print(json.dumps({{"seen": seen, "deltas": deltas[0]}}))
"""


def test_a_run_nobody_reads_gives_way_between_its_text_deltas():
    done = subprocess.run([sys.executable, "-c", DRIVER_ALONE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    seen = result["seen"] + [result["deltas"]]
    # Counted in deltas, not seconds, so a slow or loaded machine changes nothing: a driver that
    # never gives way lets the ticker in once, before all the text and after it.
    most_at_once = max(later - earlier for earlier, later in zip(seen, seen[1:], strict=False))
    assert result["deltas"] == WORDS
    assert most_at_once < WORDS / 10, f"{most_at_once} of {WORDS} deltas went by between two turns of the ticker"
