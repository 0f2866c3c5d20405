"""What ``app.extensions["bread_sync"]`` holds, and how a view finds it."""

from __future__ import annotations

from dataclasses import dataclass

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


def state() -> State:
    return current_app.extensions["bread_sync"]


def bread() -> Bread:
    return state().bread
