"""gunicorn settings of a traced server: the project's own, plus a trace of every greenlet switch
in the worker from the first streaming POST (``/agents/<id>/run``, or the minimal app's
``/replay/<name>``) for ``$BENCH_TRACE_SECONDS`` (default 5), written to ``$BENCH_TRACE``.

Each switch records the wall clock, the worker's main thread's CPU time (``time.thread_time``:
what the event loop's thread spent, whatever the scheduler of the OS did meanwhile) and what the
greenlet switched to runs (the hub, a run's driver, a request's handler, ...). Used by
bench/lateness_trace.py.
"""

import os
import pickle
import time

from bread_sync.server.gunicorn_conf import settings

globals().update(settings(check_bind=False))

_started = False


def _kind(glet) -> str:
    from gevent.hub import Hub

    if isinstance(glet, Hub):
        return "hub"
    run = getattr(glet, "_run", None)
    return getattr(run, "__qualname__", None) or type(glet).__name__


def pre_request(worker, req):
    global _started
    if _started or req.method != "POST" or not (req.path.endswith("/run") or req.path.startswith("/replay/")):
        return
    _started = True
    import gevent
    import greenlet

    switches, kinds = [], {}
    wall, cpu = time.time, time.thread_time

    def trace(event, args):
        if event in ("switch", "throw"):
            target = args[1]
            kind = kinds.get(id(target))
            if kind is None:
                kind = kinds[id(target)] = _kind(target)
            switches.append((wall(), cpu(), kind))

    def dump():
        greenlet.settrace(None)
        with open(os.environ["BENCH_TRACE"], "wb") as out:
            pickle.dump(switches, out)

    greenlet.settrace(trace)
    gevent.spawn_later(float(os.environ.get("BENCH_TRACE_SECONDS", "5")), dump)
