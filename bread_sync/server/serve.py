"""Listening: the bind rules, the development server and gunicorn with gevent workers."""

from __future__ import annotations

import logging
import os
from typing import Any

from .. import logs
from ..config import Config
from ..errors import AUTH_NOT_CONFIGURED, BreadError
from .guard import LOOPBACK_BINDS, has_auth

log = logging.getLogger("bread_sync.server")

LOOPBACK_WARNING = (
    "serving without auth on a loopback address: any process on this machine, including a "
    "reverse proxy, can present a loopback Host and reach every route"
)


def check_bind(config: Config, host: str) -> str | None:
    """Refuse (``AUTH_NOT_CONFIGURED``) a bind the listen rules forbid; a warning, if any."""
    auth = has_auth(config.plugins)
    authorize = config.server.authorize is not None
    loopback = host in LOOPBACK_BINDS
    if auth and authorize:
        return None
    if not auth and loopback:
        return LOOPBACK_WARNING
    if auth:
        raise BreadError(AUTH_NOT_CONFIGURED, "the auth plugin is on but config.server.authorize is not set")
    raise BreadError(AUTH_NOT_CONFIGURED, f"refusing to listen on {host} without auth: add the auth plugin")


def host_of(bind: str) -> str:
    """``127.0.0.1:3000`` -> ``127.0.0.1``; ``[::1]:3000`` -> ``::1``."""
    if bind.startswith("["):
        return bind[1 : bind.index("]")]
    return bind.rsplit(":", 1)[0] if bind.count(":") == 1 else bind


def check_listen(config: Config, host: str) -> None:
    """:func:`check_bind`, its warning logged."""
    warning = check_bind(config, host)
    if warning:
        log.warning(warning)


def dev(config: Config, host: str, port: int, config_name: str | None = None) -> None:
    """Serve ``config`` (loaded from ``config_name``) with werkzeug's reloading development
    server (threads, so streams stream)."""
    from werkzeug.serving import run_simple

    from .. import create_bread
    from .extension import create_server

    check_listen(config, host)
    if config_name:
        os.environ["BREAD_CONFIG"] = config_name  # the reloader's child process loads it again
    logs.configure()
    app = create_server(create_bread(config).start())
    run_simple(host, port, app, use_reloader=True, threaded=True)


def start(config: Config, host: str, port: int, workers: int, config_name: str | None = None) -> None:
    """Serve with gunicorn and gevent workers once ``config`` (loaded from ``config_name``) may
    listen on ``host``; each worker loads it again and builds its own ``Bread`` after the fork."""
    from gunicorn.app.base import BaseApplication

    from . import gunicorn_conf

    check_listen(config, host)
    if config_name:
        os.environ["BREAD_CONFIG"] = config_name
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    class Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in gunicorn_conf.settings(bind=bind, workers=workers, check_bind=False).items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            from .. import create_bread
            from .extension import create_server

            return create_server(create_bread().start())

    Application().run()
