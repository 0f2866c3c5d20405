"""The floor of a run's start on this stack: a Flask app that does only what any durable start
over HTTP must (parse the JSON body, commit ``$FLOOR_COMMITS`` SQLite transactions, the store's
way: WAL, ``synchronous=NORMAL``, a pooled connection, ``BEGIN IMMEDIATE``), then streams the
bytes bread_sync sent, as bench/minimal_app.py does. bench/start_floor.py serves it beside the
minimal app and bread_sync.

- ``POST /replay/<name>``: the commits, then the recorded chunks (minimal_app's ``_replay``).
- ``GET /health``: 200.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import uuid

import minimal_app
from flask import Flask, Response, request

app = Flask(__name__)
COMMITS = int(os.environ.get("FLOOR_COMMITS", "0"))
_pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()


def _connection() -> sqlite3.Connection:
    try:
        return _pool.get_nowait()
    except queue.Empty:
        conn = sqlite3.connect(os.environ["FLOOR_DB"], isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS starts (id TEXT PRIMARY KEY, body TEXT)")
        return conn


def _commit(body: str) -> None:
    conn = _connection()
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO starts (id, body) VALUES (?, ?)", (uuid.uuid4().hex, body))
        conn.execute("COMMIT")
    finally:
        _pool.put(conn)


@app.get("/health")
def health() -> str:
    return "ok"


@app.post("/replay/<name>")
def replay(name: str) -> Response:
    given = request.get_json(silent=True)
    for _ in range(COMMITS):
        _commit(repr(given))
    body = minimal_app.recorded(name)
    return Response(minimal_app.replayed(body["chunks"], request.args.to_dict(flat=False)), headers=body["headers"])
