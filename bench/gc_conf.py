"""gunicorn settings of a server whose worker logs its garbage collector's passes: the project's
own, plus one line per collection (epoch seconds, generation, milliseconds) appended to
``$BENCH_GCLOG``. Used by bench/lateness_split.py: a pass stops every greenlet of the worker.
"""

import gc
import os
import time

from bread_sync.server.gunicorn_conf import post_worker_init as project_post_worker_init
from bread_sync.server.gunicorn_conf import settings

globals().update(settings(check_bind=False))


def post_worker_init(worker):
    project_post_worker_init(worker)
    log = open(os.environ["BENCH_GCLOG"], "a", buffering=1)  # open for the worker's life
    started = [0.0]

    def timed(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            log.write(f"{time.time():.4f} {info['generation']} {(time.perf_counter() - started[0]) * 1e3:.3f}\n")

    gc.callbacks.append(timed)
