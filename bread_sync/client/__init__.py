"""The synchronous Python client: the transport contract, and the facade built on it.

A transport is the low-level half (client-transports.md's ``AgentClientTransport``, in
snake_case, mapped onto bread: a thread is a session, an action a HITL checkpoint, a run a run,
files the blob store); :func:`create_agent_client` builds the app-facing half on any of them.
Two ship: ``client.http`` (a server over HTTP, ``httpx2``) and ``client.local`` (a ``Bread`` in
this process, the reference). An operation bread has no counterpart for raises ``BreadError``
``NOT_SUPPORTED`` naming it. ``conformance.py`` is the pytest plugin that checks a transport.
"""

from __future__ import annotations

from .contract import AgentClientTransport, RunStream, StoredFile, ThreadState, optional
from .facade import AgentClient, BackgroundRun, Outcome, Thread, ThreadEvent, ThreadRun, create_agent_client

__all__ = [
    "AgentClient",
    "AgentClientTransport",
    "BackgroundRun",
    "Outcome",
    "Run",
    "RunStream",
    "StoredFile",
    "Thread",
    "ThreadEvent",
    "ThreadRun",
    "ThreadState",
    "create_agent_client",
    "optional",
]

#: ``ThreadRun``'s name before it was told apart from ``bread_sync.Run``; kept for one release.
Run = ThreadRun
