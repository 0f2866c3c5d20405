"""AG-UI: bread's crumbs as AG-UI 1.0 events, for ``@ag-ui/client`` and CopilotKit frontends.

:func:`create_ag_ui_transformer` (``translator.py``) is the translator: sans-IO and stateful,
one per stream. :func:`ag_ui` (``plugin.py``) is the plugin: with ``agent_id`` it serves
``POST <path>`` (a ``RunAgentInput`` in, the run's events out as bare SSE frames, a HITL pause
as an interrupt that a later ``resume`` answers) and ``GET <path>/runs/<runId>/stream`` (the
stream resumed after a ``Last-Event-ID``); with ``on_event`` it maps every run of the instance,
one transformer per run. See docs/http.md.

Needs the extra: ``pip install "bread-sync[ag-ui]"``.
"""

from ...errors import install_hint

try:
    import ag_ui.core  # noqa: F401 - the extra: without it, say how to install it
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"the AG-UI bridge needs its extra: {install_hint('ag-ui')}") from exc

from .plugin import AG_UI_ACTIONS, AgUiPlugin, ag_ui
from .translator import (
    ANSWER_SCHEMA,
    APPROVAL_SCHEMA,
    EMITTED_EVENT_TYPES,
    FILE_GENERATED,
    AgUiTransformer,
    create_ag_ui_transformer,
    encode,
)

__all__ = [
    "AG_UI_ACTIONS",
    "ANSWER_SCHEMA",
    "APPROVAL_SCHEMA",
    "EMITTED_EVENT_TYPES",
    "FILE_GENERATED",
    "AgUiPlugin",
    "AgUiTransformer",
    "ag_ui",
    "create_ag_ui_transformer",
    "encode",
]
