"""A2A: a bread agent as an A2A server, spec v0.3 or v1.0, over JSON-RPC.

:func:`a2a_server` (``plugin.py``) is the plugin: the Agent Card, and the JSON-RPC route
(send, stream, get, cancel, resubscribe; v1.0 also ListTasks). A task is a bread run (task id =
run id, context id = session id). ``translator.py`` turns a run's crumbs into neutral task
events, sans-IO; ``v03.py`` and ``v10.py`` write them in each version's shapes, with the
a2a-sdk's own types (its pydantic models for v0.3, its protobuf messages for v1.0: neither
imports a server stack); ``parts.py`` maps a message's parts to a run's input. See docs/http.md.

Needs the extra: ``pip install "bread-sync[a2a]"``.
"""

from ...errors import install_hint

try:
    import a2a.types  # noqa: F401 - the extra: without it, say how to install it
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"the A2A bridge needs its extra: {install_hint('a2a')}") from exc

from .parts import MAX_INLINE_BYTES
from .plugin import A2A_ACTIONS, DEFAULT_MAX_BODY_BYTES, A2AServer, a2a_server
from .translator import A2ATranslator

__all__ = ["A2A_ACTIONS", "DEFAULT_MAX_BODY_BYTES", "MAX_INLINE_BYTES", "A2AServer", "A2ATranslator", "a2a_server"]
