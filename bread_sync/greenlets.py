"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here. A C call that blocks
(SQLite's fsync) holds up every greenlet unless it runs in a thread of the OS.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def os_rlock() -> Any:
    """A reentrant lock of the OS thread, even where gevent patched ``threading``: taken and
    released in C. Only for state no greenlet can switch away from while holding it (nothing
    inside blocks); reentrant because a garbage collection inside can run a finalizer that takes
    it again (an abandoned tail unsubscribing), which must not wait on itself."""
    if patched():
        from gevent.monkey import get_original

        return get_original("_thread", "RLock")()
    return threading.RLock()


def in_os_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of the OS under gevent, whose blocking C calls (a SQLite checkpoint's
    fsyncs) then hold up no greenlet while the caller waits for it; else ``fn()`` here."""
    if not patched():
        return fn()
    from gevent import get_hub

    return get_hub().threadpool.apply(fn)
