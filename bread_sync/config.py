"""The config object, and how the server and the CLI find and adjust it.

``BREAD_CONFIG=module:attribute`` names a config (or a callable returning one); the default is
the demo config. The environment then overrides what it names: ``BREAD_DB`` (the SQLite file),
``BREAD_TRANSPORT`` (``http-chunked``, ``http-sse``, ...) and ``BREAD_MAX_BODY_BYTES``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from .agents import Agent

DEFAULT_CONFIG = "bread_sync.demo:config"
DEFAULT_DB_NAME = "bread.db"


class ServerSettings(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    host: str = "127.0.0.1"
    port: int = 3000
    max_body_bytes: int = 1_048_576
    authorize: Any = None
    #: Runs one process executes at once; one more is ``TOO_MANY_RUNS`` (503) before it starts.
    max_concurrent_runs: int = 1000
    #: A run still going after this many seconds ends with ``RUN_TIMEOUT``; None: no limit.
    run_timeout_seconds: float | None = None


class Config(BaseModel):
    """Everything a ``Bread`` is made of.

    ``store`` and ``transport`` take an object, an alias (``"sqlite"``, ``"memory"``;
    ``"stream"``, ``"stdout"``) or a dotted path to a factory. ``store=None`` is SQLite in the
    instance folder (``BREAD_DB`` names another file); ``transport=None`` is the embedded stream.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agents: list[InstanceOf[Agent]] = Field(default_factory=list)
    tasks: list[Any] = Field(default_factory=list)
    pipelines: list[Any] = Field(default_factory=list)
    #: ``"filesystem"`` (``<instance>/files``), ``"memory"``, a blob store object, or None: none.
    blob_store: Any = "filesystem"
    entrypoints: list[str] | None = None
    plugins: list[Any] = Field(default_factory=list)
    store: Any = None
    transport: Any = None
    server: ServerSettings = Field(default_factory=ServerSettings)
    instance_path: Path = Field(default_factory=lambda: default_instance_path())
    lease_seconds: float = 30.0
    cancel_poll_seconds: float = 0.5


def default_instance_path() -> Path:
    """``BREAD_INSTANCE`` if set, else ``./instance`` (the Flask instance folder)."""
    return Path(os.environ.get("BREAD_INSTANCE") or Path.cwd() / "instance")


def default_db_path(config: Config) -> Path:
    return Path(os.environ.get("BREAD_DB") or config.instance_path / DEFAULT_DB_NAME)


def load_config(name: str | None = None) -> Config:
    """The config ``name`` (else ``BREAD_CONFIG``, else the demo) with the environment applied."""
    from .loading import import_string

    target = import_string(name or os.environ.get("BREAD_CONFIG") or DEFAULT_CONFIG)
    config = target() if callable(target) else target
    if not isinstance(config, Config):
        raise TypeError(f"{name or 'BREAD_CONFIG'} must name a bread_sync Config, got {type(config)!r}")
    return apply_environment(config)


def apply_environment(config: Config) -> Config:
    updates: dict[str, Any] = {}
    if os.environ.get("BREAD_DB"):
        updates["store"] = "sqlite"
    if os.environ.get("BREAD_TRANSPORT"):
        updates["transport"] = os.environ["BREAD_TRANSPORT"]
    if os.environ.get("BREAD_MAX_BODY_BYTES"):
        limit = int(os.environ["BREAD_MAX_BODY_BYTES"])
        updates["server"] = config.server.model_copy(update={"max_body_bytes": limit})
    return config.model_copy(update=updates) if updates else config
