"""The baseline: a minimal WSGI app that streams bytes bread_sync sent, chunk for chunk.

Served by the same gunicorn, with the same settings and the gevent worker (which monkey-patches
``time.sleep``, so a sleeping stream yields to the others). A benchmark records a response of
bread_sync with :mod:`rawhttp` and saves it with :func:`save` under ``$BENCH_BODIES``; this app
then answers:

- ``POST /replay/<name>``: the recorded chunks, each as one item (so one HTTP chunk, as gunicorn
  wrote bread_sync's). With ``?start=&period=&first=&count=``, chunk ``first + i`` (``i`` below
  ``count``) is held until ``start + i * period`` (epoch seconds), the schedule the
  ``metronome`` agent of bench_agents.py keeps; the other chunks go at once.
- ``GET /idle/<name>``: the recorded chunks, then the wire's heartbeat every ``heartbeat``
  seconds, forever: an idle stream.
- ``GET /health``: 200.

The only work per chunk is a generator step; that is the point.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import parse_qs

_bodies: dict[str, dict] = {}


def save(folder: Path, name: str, chunks: list[bytes], content_type: str, heartbeat: bytes, every: float) -> None:
    record = {"content_type": content_type, "heartbeat": heartbeat.decode("latin-1"), "every": every,
              "chunks": [chunk.decode("latin-1") for chunk in chunks]}  # fmt: skip
    (folder / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")


def recorded(name: str) -> dict:
    body = _bodies.get(name)
    if body is None:
        record = json.loads((Path(os.environ["BENCH_BODIES"]) / f"{name}.json").read_text(encoding="utf-8"))
        body = _bodies[name] = {
            "headers": [("Content-Type", record["content_type"]), ("Cache-Control", "no-cache"),
                        ("X-Accel-Buffering", "no"), ("Content-Encoding", "identity")],
            "chunks": [chunk.encode("latin-1") for chunk in record["chunks"]],
            "heartbeat": record["heartbeat"].encode("latin-1"),
            "every": record["every"],
        }  # fmt: skip
    return body


def replayed(chunks: list[bytes], query: dict[str, list[str]]):
    if "start" not in query:
        yield from chunks
        return
    start, period = float(query["start"][0]), float(query["period"][0])
    first, count = int(query["first"][0]), int(query["count"][0])
    for k, chunk in enumerate(chunks):
        if first <= k < first + count:
            wait = start + (k - first) * period - time.time()
            if wait > 0:
                time.sleep(wait)
        yield chunk


def _idle(chunks: list[bytes], heartbeat: bytes, every: float):
    yield from chunks
    while True:
        time.sleep(every)
        yield heartbeat


def app(environ, start_response):
    path = environ["PATH_INFO"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    kind, _, name = path.strip("/").partition("/")
    if kind == "health":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    if kind not in ("replay", "idle") or not name or "/" in name or name.startswith("."):
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "0")])
        return []
    body = recorded(name)
    start_response("200 OK", body["headers"])
    if kind == "idle":
        return _idle(body["chunks"], body["heartbeat"], body["every"])
    return replayed(body["chunks"], parse_qs(environ.get("QUERY_STRING", "")))
