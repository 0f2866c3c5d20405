"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here.
"""

from __future__ import annotations

import sys
import threading
from typing import Any


def patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def os_lock() -> Any:
    """A lock of the OS thread, even where gevent patched ``threading``: taken and released in
    C. Only for state no greenlet can switch away from while holding it (nothing inside blocks),
    or a second greenlet of the same thread would wait on it forever."""
    if patched():
        from gevent.monkey import get_original

        return get_original("_thread", "allocate_lock")()
    return threading.Lock()
