"""gunicorn settings of the profiled server: the project's own, plus cProfile around the first
streaming POST (``/agents/<id>/run``, or the minimal app's ``/replay/<name>``, or the one to
``$BENCH_PROFILE_PATH`` when set), written to ``$BENCH_PROFILE`` once the response is sent.

Under gevent every greenlet of the worker runs in its main thread, so the profiler sees the run
driver, the response generator and gunicorn's writes alike. It attributes time across greenlet
switches loosely (a switch is a call that returns in another greenlet); own time per function
is still the time spent in it.
"""

import cProfile
import os

from bread_sync.server.gunicorn_conf import settings

globals().update(settings(check_bind=False))

_profiles: dict[int, cProfile.Profile] = {}


_done = False


def _is_stream(req) -> bool:
    if "BENCH_PROFILE_PATH" in os.environ:  # a bridge's route (bench/bridge_stream.py)
        return req.method == "POST" and req.path == os.environ["BENCH_PROFILE_PATH"]
    return req.method == "POST" and (req.path.endswith("/run") or req.path.startswith("/replay/"))


def pre_request(worker, req):
    if _is_stream(req) and not _profiles and not _done:
        profiler = _profiles[id(req)] = cProfile.Profile()
        profiler.enable()


def post_request(worker, req, environ, resp):
    global _done
    profiler = _profiles.pop(id(req), None)
    if profiler is not None:
        _done = True
        profiler.disable()
        profiler.dump_stats(os.environ["BENCH_PROFILE"])
