"""What ``app.extensions["bread_sync"]`` holds, and how a view finds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app

from ..runtime import Bread
from .runner import Runner


@dataclass
class State:
    bread: Bread
    runner: Runner
    blueprint: Blueprint
    max_body_bytes: int
    auth: bool
    cors_origins: list[str] = field(default_factory=list)
    #: The OpenAPI document, made at its first request (every route is mounted by then).
    openapi: dict[str, Any] | None = None


def state() -> State:
    return current_app.extensions["bread_sync"]


def bread() -> Bread:
    return state().bread
