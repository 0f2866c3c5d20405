"""gunicorn settings for bread_sync, shared by ``bread-sync start`` and ``gunicorn.conf.py``.

gevent workers, so one worker holds thousands of open streams; the bind rules are checked in
the master before any socket opens. Each worker then sets up its logs, sweeps runs whose owner
died, and shuts down gracefully through the hooks at the end (see lifecycle.py).
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
from typing import Any, NoReturn

#: Allocations between two passes of the garbage collector's youngest generation (see
#: post_worker_init); Python's default is 700.
GC_YOUNG_OBJECTS = 20_000


def settings(bind: str | None = None, workers: int | None = None, check_bind: bool = True) -> dict[str, Any]:
    return {
        "bind": [bind or os.environ.get("BREAD_BIND", "127.0.0.1:3000")],
        "worker_class": "gevent",
        "workers": workers or int(os.environ.get("WEB_CONCURRENCY", "2")),
        # Above the 2,000 idle streams a worker is sized for, so a worker holding them all still
        # accepts a health check or a new run.
        "worker_connections": 4000,
        # A stream idles between heartbeats; gevent workers keep beating their own heartbeat.
        "timeout": 30,
        "graceful_timeout": 30,
        "keepalive": 5,
        # gunicorn 27's control socket has one default path per user: replicas on one host
        # would fight over it, and bread_sync does not use it.
        "control_socket_disable": True,
        "on_starting": on_starting if check_bind else starting,
        # prometheus_client's multiprocess folder: made before the workers fork, a dead worker's
        # gauges dropped from it, removed with the master (see metrics_folder).
        "child_exit": child_exit,
        "on_exit": on_exit,
        # Logs, graceful shutdown and the late sweep of runs whose owner died: lifecycle.py.
        "post_worker_init": post_worker_init,
        "worker_int": worker_int,
        "worker_exit": worker_exit,
    }


def on_starting(server: Any) -> None:
    """In the master, before it listens: the config loads and may listen on every bind, or the
    master exits with one line, as ``bread-sync start`` does (2, or 1 for a listen rule)."""
    from ..config import LOAD_ERRORS, load_config
    from ..errors import BreadError
    from .listen import EXIT_REFUSED, EXIT_UNLOADABLE, check_listen, check_settings, host_of

    format_logs(server)
    try:
        config = load_config()
        check_settings(config)
    except LOAD_ERRORS as exc:
        _refuse(server, f"cannot load the config: {exc}", EXIT_UNLOADABLE)
    try:
        for bind in server.cfg.bind:
            check_listen(config, host_of(bind))
    except BreadError as exc:
        _refuse(server, f"{exc.code}: {exc.message}", EXIT_REFUSED)
    metrics_folder(server, config)


def starting(server: Any) -> None:
    """In the master of ``bread-sync start``, which checked the binds itself."""
    from ..config import load_config

    format_logs(server)
    metrics_folder(server, load_config())


def metrics_folder(server: Any, config: Any) -> None:
    """With metrics on, the folder where every worker's metrics are kept for a scrape to sum
    (``PROMETHEUS_MULTIPROC_DIR``, inherited by the workers, who must not import
    prometheus_client before it is set: no ``--preload``). One set already is the operator's
    own: used, not made nor removed."""
    if not config.server.metrics:
        return
    server.bread_metrics = True
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        server.bread_metrics_folder = tempfile.mkdtemp(prefix="bread-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = server.bread_metrics_folder


def child_exit(server: Any, worker: Any) -> None:
    """A worker gone: its live gauges (runs active, streams open) leave the sum; its counters stay."""
    if getattr(server, "bread_metrics", False):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    folder = getattr(server, "bread_metrics_folder", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _refuse(server: Any, message: str, code: int) -> NoReturn:
    # A message and an exit status, not a traceback.
    server.log.error("%s", message)
    raise SystemExit(code)


def format_logs(server: Any) -> None:
    """The master's log lines in ``BREAD_LOG_FORMAT`` too (each worker sets its own)."""
    from ..logs import reformat

    reformat(server.log.error_log)


def post_worker_init(worker: Any) -> None:
    from .lifecycle import started

    started(worker)
    tune_gc()


def tune_gc() -> None:
    """The garbage collector as a streaming worker wants it: what the process made to start
    frozen, and the youngest generation collected every GC_YOUNG_OBJECTS allocations. Called
    once the worker has started (and by the benchmarks that drive runs as a worker does)."""
    # What the worker made to start (modules, the app, its config) lives as long as the worker:
    # frozen, the garbage collector's full passes stop visiting it, which keeps their pauses short.
    gc.collect()  # what is garbage already would otherwise be frozen with the rest, for good
    gc.freeze()
    # Thawed at exit, so the interpreter's last collection frees it while every module is whole.
    # Left frozen, it was freed module by module in reverse import order: Flask's log handler
    # (Flask is imported in the master, before gevent patches the worker) went after gevent's
    # thread module, and its finalizer took logging's lock through a gevent get_ident with no
    # globals left ("Exception ignored in: <function _removeHandlerRef>", at every shutdown).
    atexit.register(gc.unfreeze)
    # Collect the youngest generation every GC_YOUNG_OBJECTS allocations, not every 700: a
    # streaming worker allocates a few container objects per crumb (its frame, its dict), most
    # of which die young by reference counting; at 700 most passes scan frames still in flight
    # and push them to older generations, whose passes then scan them again (3 to 7% of the
    # worker's CPU with 200 streams, bench/http_stream.py). Cycles wait a little longer.
    gc.set_threshold(GC_YOUNG_OBJECTS, *gc.get_threshold()[1:])


def worker_int(worker: Any) -> None:
    from .lifecycle import interrupted

    interrupted(worker)


def worker_exit(server: Any, worker: Any) -> None:
    from .lifecycle import exiting

    exiting(worker)
