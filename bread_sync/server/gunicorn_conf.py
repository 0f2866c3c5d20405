"""gunicorn settings for bread_sync, shared by ``bread-sync start`` and ``gunicorn.conf.py``.

gevent workers, so one worker holds thousands of open streams; the bind rules are checked in
the master before any socket opens.
"""

from __future__ import annotations

import os
from typing import Any


def settings(bind: str | None = None, workers: int | None = None, check_bind: bool = True) -> dict[str, Any]:
    checks = {"on_starting": on_starting} if check_bind else {}
    return {
        "bind": [bind or os.environ.get("BREAD_BIND", "127.0.0.1:3000")],
        "worker_class": "gevent",
        "workers": workers or int(os.environ.get("WEB_CONCURRENCY", "2")),
        "worker_connections": 2000,
        # A stream idles between heartbeats; gevent workers keep beating their own heartbeat.
        "timeout": 30,
        "graceful_timeout": 30,
        "keepalive": 5,
        # gunicorn 27's control socket has one default path per user: replicas on one host
        # would fight over it, and bread_sync does not use it.
        "control_socket_disable": True,
        **checks,
    }


def on_starting(server: Any) -> None:
    from .serve import checked_config, host_of

    for bind in server.cfg.bind:
        checked_config(host_of(bind))
