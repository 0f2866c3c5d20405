"""Whether this process runs threads as gevent greenlets (gunicorn's gevent worker patches them).

Greenlets switch only where they block, and a patched ``threading`` primitive costs several
times its native one; the few hot spots that can use either ask here.
"""

from __future__ import annotations

import sys


def patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")
