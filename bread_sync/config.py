"""The config object, and how the server and the CLI find and adjust it.

``BREAD_CONFIG=module:attribute`` names a config (or a callable returning one); the default is
the demo config. The environment then overrides what it names: ``BREAD_DB`` (the SQLite file, or a
``postgresql://`` URL: the Postgres store),
``BREAD_TRANSPORT`` (``http-chunked``, ``http-sse``, ...), ``BREAD_MAX_BODY_BYTES``, ``BREAD_MAX_FILE_BYTES``,
``REDIS_URL`` (replicas fan crumbs out, and send cancels, through that Redis; without it, queued
runs on a Postgres store fan out through its notifications),
``BREAD_BODY_TIMEOUT_SECONDS``, ``BREAD_MAX_STREAM_BACKLOG``, ``BREAD_LEASE_SECONDS``, ``BREAD_RETENTION_DAYS``,
``BREAD_PLAYGROUND``, ``BREAD_ALLOW_PRIVATE_WEBHOOKS``, ``BREAD_EXECUTOR`` (``inline`` or
``huey``) and ``BREAD_QUEUE_URL`` (the Huey queue's Redis or Postgres, when not the store's).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from .agents import Agent
from .blobs import BLOB_STORES
from .executors import EXECUTORS
from .loading import resolve
from .stores import STORES

DEFAULT_CONFIG = "bread_sync.demo:config"
DEFAULT_DB_NAME = "bread.db"
#: The Huey queue's SQLite file, beside the SQLite store's: ``bread.db`` -> ``bread-queue.db``.
QUEUE_DB_SUFFIX = "-queue"
#: A ``BREAD_DB`` that starts with one of these is a Postgres database; anything else, a SQLite file.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: A lease is renewed every third of it; one longer than a year only postpones noticing a death.
MAX_LEASE_SECONDS = 365 * 86_400.0
#: The transports ``REDIS_URL`` composes with: they serve HTTP and carry frames on Redis.
HTTP_TRANSPORTS = ("http-chunked", "http-sse")
#: What :func:`load_config` raises for a config that cannot be loaded, each with a message that
#: names what to fix: no such module, no such attribute, not a Config, a bad environment value.
LOAD_ERRORS = (ImportError, ValueError, TypeError)


class ServerSettings(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    host: str = "127.0.0.1"
    port: int = 3000
    max_body_bytes: int = 1_048_576
    #: The largest file ``POST /files`` takes; read past ``max_body_bytes`` only once the caller
    #: is authenticated (``BREAD_MAX_FILE_BYTES``).
    max_file_bytes: int = 16 * 1_048_576
    authorize: Any = None
    #: ``authorize_run(identity, run_id) -> bool``: per-run ownership, asked by every route that
    #: reads or acts on a run by id (tail, cancel, run record, resume, loop, task run), and for
    #: each body ``runId``, new or not (so a hook with a table of its own allows an id it does
    #: not know); only True allows.
    authorize_run: Any = None
    #: Runs one process executes at once; one more is ``TOO_MANY_RUNS`` (503) before it starts.
    max_concurrent_runs: int = 1000
    #: A run still going after this many seconds ends with ``RUN_TIMEOUT``; None: no limit.
    run_timeout_seconds: float | None = None
    #: Browser origins (``https://app.example.com``, or ``*``) allowed to call the API cross-origin.
    cors_origins: list[str] = Field(default_factory=list)
    #: A request body that has not fully arrived after this many seconds is ``REQUEST_TIMEOUT``.
    body_timeout_seconds: float = 60.0
    #: Serve the playground page at ``GET /_bread/``; None: only under ``bread-sync dev`` and
    #: ``bread-sync start`` on a loopback bind, and never while auth is on (``BREAD_PLAYGROUND``).
    playground: bool | None = None
    #: Let a run's webhook reach loopback and private addresses (a test, a private network);
    #: refused otherwise, so a client cannot make the server call into its own network
    #: (``BREAD_ALLOW_PRIVATE_WEBHOOKS``).
    allow_private_webhooks: bool = False
    #: Serve Prometheus metrics at ``GET /metrics`` (the ``metrics`` extra; ``BREAD_METRICS=1``).
    metrics: bool = False
    #: Frames one stream may have waiting for its client; past them the stream ends (its
    #: connection shut) and the client catches up from the log (``BREAD_MAX_STREAM_BACKLOG``).
    max_stream_backlog: int = Field(10_000, ge=1)


class Config(BaseModel):
    """Everything a ``Bread`` is made of.

    ``store`` and ``transport`` take an object, an alias (``"sqlite"``, ``"memory"``;
    ``"stream"``, ``"stdout"``) or a dotted path to a factory. ``store=None`` is SQLite in the
    instance folder (``BREAD_DB`` names another file, or a Postgres database by its
    ``postgresql://`` URL); ``transport=None`` is the embedded stream.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agents: list[InstanceOf[Agent]] = Field(default_factory=list)
    tasks: list[Any] = Field(default_factory=list)
    pipelines: list[Any] = Field(default_factory=list)
    #: Recurring runs (:class:`bread_sync.schedules.Schedule`), ticked by ``bread-sync worker``
    #: processes (executor ``huey``), once per tick across them all.
    schedules: list[Any] = Field(default_factory=list)
    #: ``"filesystem"`` (``<instance>/files``), ``"memory"``, a blob store object, or None: none.
    blob_store: Any = "filesystem"
    entrypoints: list[str] | None = None
    plugins: list[Any] = Field(default_factory=list)
    store: Any = None
    transport: Any = None
    #: Local id -> an agent of another server (``http_chunked.remote_agent(url=..., agent_id=...)``);
    #: these ids shadow local agents of the same id.
    remote_agents: dict[str, Any] = Field(default_factory=dict)
    server: ServerSettings = Field(default_factory=ServerSettings)
    instance_path: Path = Field(default_factory=lambda: default_instance_path())
    lease_seconds: float = Field(30.0, ge=0, le=MAX_LEASE_SECONDS)
    cancel_poll_seconds: float = 0.5
    #: A run whose process died is carried on by another (engine/recovery.py) at most this many
    #: times in a row with no durable crumb between; the next time it ends ``RUN_INTERRUPTED``.
    max_continuations: int = Field(3, ge=0)
    #: How often a server worker looks for runs whose owner is gone (or handed them over), to
    #: carry them on; 0: only at start-up and when a tail, a cancel or a session notices.
    sweep_seconds: float = Field(1.0, ge=0)
    #: ``bread-sync gc`` deletes finished runs (logs, checkpoints, loops, task runs) and stored
    #: files older than this many days; None: ``gc`` needs ``--older-than``.
    retention_days: float | None = None
    #: Where a run is driven: ``"inline"`` (None; the process whose request opened it) or
    #: ``"huey"`` (queued for ``bread-sync worker`` processes; extra ``queue``), or an executor.
    executor: Any = None


def default_instance_path() -> Path:
    """``BREAD_INSTANCE`` if set, else ``./instance`` (the Flask instance folder)."""
    return Path(os.environ.get("BREAD_INSTANCE") or Path.cwd() / "instance")


def default_db_path(config: Config) -> Path:
    return Path(os.environ.get("BREAD_DB") or config.instance_path / DEFAULT_DB_NAME)


def postgres_url() -> str | None:
    """``BREAD_DB`` when it is a Postgres URL (``postgresql://`` or ``postgres://``), else None."""
    value = os.environ.get("BREAD_DB") or ""
    return value if value.startswith(POSTGRES_SCHEMES) else None


def make_store(config: Config, writes_in_thread: bool = True) -> Any:
    """The store the config names (``BREAD_DB`` may name a Postgres), opened; the default SQLite
    store with ``writes_in_thread`` (``bread-sync worker``'s is False: server/worker.py)."""
    if config.store == "postgres" or (config.store is None and postgres_url()):
        if postgres_url() is None:
            raise ValueError("the postgres store needs BREAD_DB=postgresql://user@host/database")
        return resolve("postgres", STORES, "store", url=postgres_url())
    if config.store is None or config.store == "sqlite":
        from .stores.sqlite import store

        return store(path=default_db_path(config), writes_in_thread=writes_in_thread)
    return resolve(config.store, STORES, "store")


def make_executor(config: Config) -> Any:
    """The executor the config names; Huey's queue follows the store unless ``BREAD_QUEUE_URL``
    names one: the Postgres database of a Postgres store, else an SQLite file beside the store's."""
    if config.executor != "huey":
        return resolve(config.executor or "inline", EXECUTORS, "executor")
    url = os.environ.get("BREAD_QUEUE_URL") or postgres_url()
    if url:
        return resolve("huey", EXECUTORS, "executor", url=url)
    db = default_db_path(config)
    return resolve("huey", EXECUTORS, "executor", path=db.with_name(f"{db.stem}{QUEUE_DB_SUFFIX}{db.suffix}"))


def make_blob_store(config: Config) -> Any:
    """The blob store the config names, opened (None when it names none)."""
    if config.blob_store == "filesystem":
        from .blobs.filesystem import store

        return store(root=config.instance_path / "files")
    return resolve(config.blob_store, BLOB_STORES, "store")


def _import_from_cwd() -> None:
    # As the flask command does for its app: `bread-sync`, a console script, starts with its own
    # bin folder on sys.path, not the current one, so `myapp.agents:config` would need
    # PYTHONPATH=. there. It stays on the path: the config may name parts that import later, and
    # gunicorn workers forked from the CLI inherit it.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def load_config(name: str | None = None) -> Config:
    """The config ``name`` (else ``BREAD_CONFIG``, else the demo) with the environment applied.

    Its module may be in the current folder; one of :data:`LOAD_ERRORS` says why it cannot load.
    """
    from .loading import import_string, raised_in

    _import_from_cwd()
    path = name or os.environ.get("BREAD_CONFIG") or DEFAULT_CONFIG
    target = import_string(path)
    with raised_in(f"calling {path}"):
        config = target() if callable(target) else target
    if not isinstance(config, Config):
        raise TypeError(f"{name or 'BREAD_CONFIG'} must name a bread_sync Config, got {type(config)!r}")
    config = apply_environment(config)
    check_extras(config)
    return config


def check_extras(config: Config) -> None:
    """Refuse (``ImportError``, naming the pip install) a setting whose extra is not installed, as
    the config loads: before a server listens, rather than in each of its workers. Nothing is
    imported (see :func:`~bread_sync.loading.require`)."""
    from . import metrics
    from .loading import require

    if config.executor == "huey":
        require("huey", "Config.executor 'huey' (BREAD_EXECUTOR)")
    metrics.check_installed(config)


def apply_environment(config: Config) -> Config:
    updates: dict[str, Any] = {}
    if os.environ.get("BREAD_DB"):
        updates["store"] = _database_store()
    if os.environ.get("BREAD_TRANSPORT"):
        updates["transport"] = _transport_name(config.transport, os.environ["BREAD_TRANSPORT"])
    if os.environ.get("REDIS_URL"):
        updates["transport"] = _with_redis(updates.get("transport", config.transport), os.environ["REDIS_URL"])
    server: dict[str, Any] = {}
    if os.environ.get("BREAD_MAX_BODY_BYTES"):
        server["max_body_bytes"] = int(os.environ["BREAD_MAX_BODY_BYTES"])
    if os.environ.get("BREAD_MAX_FILE_BYTES"):
        server["max_file_bytes"] = int(os.environ["BREAD_MAX_FILE_BYTES"])
    if os.environ.get("BREAD_MAX_STREAM_BACKLOG"):
        server["max_stream_backlog"] = int(os.environ["BREAD_MAX_STREAM_BACKLOG"])
    if os.environ.get("BREAD_BODY_TIMEOUT_SECONDS"):
        server["body_timeout_seconds"] = _number("BREAD_BODY_TIMEOUT_SECONDS")
    if os.environ.get("BREAD_PLAYGROUND"):
        server["playground"] = _flag("BREAD_PLAYGROUND")
    if os.environ.get("BREAD_ALLOW_PRIVATE_WEBHOOKS"):
        server["allow_private_webhooks"] = _flag("BREAD_ALLOW_PRIVATE_WEBHOOKS")
    if os.environ.get("BREAD_METRICS"):
        server["metrics"] = _flag("BREAD_METRICS")
    if server:
        updates["server"] = config.server.model_copy(update=server)
    if os.environ.get("BREAD_LEASE_SECONDS"):
        updates["lease_seconds"] = _number("BREAD_LEASE_SECONDS", most=MAX_LEASE_SECONDS)
    if os.environ.get("BREAD_RETENTION_DAYS"):
        updates["retention_days"] = _number("BREAD_RETENTION_DAYS")
    if os.environ.get("BREAD_EXECUTOR"):
        updates["executor"] = os.environ["BREAD_EXECUTOR"]
    if _wants_postgres_live_channel(config, updates):
        updates["transport"] = _with_pubsub(updates.get("transport", config.transport), "postgres", url=postgres_url())
    return config.model_copy(update=updates) if updates else config


def _wants_postgres_live_channel(config: Config, updates: dict[str, Any]) -> bool:
    """Queued runs on a Postgres store with no Redis: the workers' live crumbs reach the web
    tier through the store's database (LISTEN/NOTIFY), not only at each durable crumb."""
    executor = updates.get("executor", config.executor)
    store = updates.get("store", config.store)
    transport = updates.get("transport", config.transport)
    return (
        executor == "huey"
        and postgres_url() is not None
        and store in (None, "postgres")
        and not os.environ.get("REDIS_URL")
        and (transport is None or transport in HTTP_TRANSPORTS)
    )


def _database_store() -> str:
    if postgres_url() is None:
        return "sqlite"
    from .loading import require

    require("psycopg")  # a missing extra fails the config's loading, with the pip install to run
    return "postgres"


def _transport_name(configured: Any, name: str) -> str:
    # An object may carry options (authorize_stream, pubsub) that a name would silently drop.
    if configured is not None and not isinstance(configured, str):
        raise ValueError(
            f"BREAD_TRANSPORT={name} would replace the config's transport object ({type(configured).__name__}) "
            "and its options: unset BREAD_TRANSPORT or name the transport in the config"
        )
    return name


def _flag(name: str) -> bool:
    text = os.environ[name].strip().lower()
    if text not in ("1", "true", "0", "false"):
        raise ValueError(f"{name} must be 1, true, 0 or false, not {os.environ[name]!r}")
    return text in ("1", "true")


def _number(name: str, most: float = math.inf) -> float:
    text = os.environ[name]
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= most or value == math.inf:  # also refuses nan
        bound = "" if most == math.inf else f" and at most {most:g}"
        raise ValueError(f"{name} must be a finite number of 0 or more{bound}, not {text!r}")
    return value


def _with_redis(transport: Any, url: str) -> Any:
    """The named HTTP transport (default http-chunked) carrying its frames on the Redis at
    ``url``. A transport object is kept as it is: that config composed its own."""
    if transport is not None and not isinstance(transport, str):
        return transport
    name = transport or HTTP_TRANSPORTS[0]
    if name not in HTTP_TRANSPORTS + ("redis",):
        raise ValueError(
            f"REDIS_URL is set, but the transport {name!r} cannot fan out through Redis: use one of "
            f"{', '.join(HTTP_TRANSPORTS)} (or redis)"
        )
    return _with_pubsub(name, "redis", url=url)


def _with_pubsub(transport: str | None, pubsub: str, **opts: Any) -> Any:
    """The named HTTP transport (default http-chunked) carrying its frames on the transport
    ``pubsub`` made with ``opts``; the name ``pubsub`` itself alone."""
    from .loading import resolve
    from .transports import TRANSPORTS

    name = transport or HTTP_TRANSPORTS[0]
    carrier = resolve(pubsub, TRANSPORTS, "transport", **opts)
    return carrier if name == pubsub else resolve(name, TRANSPORTS, "transport", pubsub=carrier)
