"""Serving: the development server, and gunicorn with gevent workers (the bind rules: listen.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import logs
from ..config import Config
from . import playground
from .listen import check_auth_setup, check_listen


def dev(config: Config, host: str, port: int, config_name: str | None = None) -> None:
    """Serve ``config`` (loaded from ``config_name``) with werkzeug's reloading development
    server (threads, so streams stream)."""
    from werkzeug.serving import run_simple

    from .. import create_bread
    from .extension import create_server

    check_listen(config, host)
    config = playground.default_on(config, host, dev=True)
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
    from .worker import live_text_note

    note = live_text_note(config)
    if note:
        print(note, file=sys.stderr)
    playground.default_on(config, host, dev=False)  # the workers load the config again
    if config_name:
        os.environ["BREAD_CONFIG"] = config_name
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    class Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in gunicorn_conf.settings(bind=bind, workers=workers, check_bind=False).items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return served_app()

    Application().run()


def served_app() -> Any:
    """The app a server process serves (``wsgi.py``, each worker of ``bread-sync start``): the
    config ``BREAD_CONFIG`` names, refused with ``AUTH_NOT_CONFIGURED`` when auth is on without
    ``authorize``, or off with ``BREAD_API_KEYS`` or ``BREAD_SECRET`` set, whatever launched the
    process. ``create_server`` itself never refuses."""
    from .. import create_bread
    from .extension import create_server

    bread = create_bread()
    check_auth_setup(bread.config)
    return create_server(bread.start())
