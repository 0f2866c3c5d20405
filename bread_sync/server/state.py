"""What ``app.extensions["bread_sync"]`` holds, and how a view finds it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app

from ..runtime import Bread
from .cross_site import RefusalLog
from .runner import Runner


@dataclass
class State:
    bread: Bread
    runner: Runner
    blueprint: Blueprint
    max_body_bytes: int
    auth: bool
    #: The endpoint -> body limit table of the routes with a limit of their own (actions.py).
    body_limits: dict[str, int] = field(default_factory=dict)
    #: Seconds a request body has to arrive (``BREAD_SYNC_BODY_TIMEOUT_SECONDS``; None: no limit).
    body_timeout_seconds: float | None = None
    cors_origins: list[str] = field(default_factory=list)
    #: What the cross-site refusals told the operator this hour (each rule and origin once).
    cross_site_refusals: RefusalLog = field(default_factory=RefusalLog)
    #: Frames one stream may have waiting for its client (``BREAD_SYNC_MAX_STREAM_BACKLOG``).
    max_stream_backlog: int | None = None
    #: Where the blueprint is mounted in its app ("" at the root).
    url_prefix: str = ""
    #: Whether the playground page is served (``BREAD_SYNC_PLAYGROUND``).
    playground: bool = False
    #: Per-run ownership: ``(identity, run_id) -> bool`` (see guard.authorize_run), or None.
    authorize_run: Callable[[Any, str], bool] | None = None
    #: The OpenAPI document, made at its first request (every route is mounted by then).
    openapi: dict[str, Any] | None = None


def state() -> State:
    return current_app.extensions["bread_sync"]


def bread() -> Bread:
    return state().bread
