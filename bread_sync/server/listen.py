"""The listen rules: where a server may listen, checked before any socket opens."""

from __future__ import annotations

import logging

from ..config import Config
from ..errors import AUTH_NOT_CONFIGURED, BreadError
from .auth import credentials_in_environment
from .cors import check_origins
from .guard import LOOPBACK_BINDS, has_auth

log = logging.getLogger("bread_sync.server")

#: How a server that does not start exits: a listen rule refused its bind, or its config did not load.
EXIT_REFUSED = 1
EXIT_UNLOADABLE = 2

#: gunicorn's prefix of a Unix socket's bind.
UNIX_BIND = "unix:"

LOOPBACK_WARNING = (
    "serving without auth on a loopback address: any process on this machine, including a "
    "reverse proxy, can present a loopback Host and reach every route"
)


def check_bind(config: Config, host: str) -> str | None:
    """Refuse (``AUTH_NOT_CONFIGURED``) a bind the listen rules forbid; a warning, if any."""
    check_auth_setup(config)
    if has_auth(config.plugins):
        return None
    if host in LOOPBACK_BINDS or host.startswith(UNIX_BIND):
        return LOOPBACK_WARNING
    raise BreadError(AUTH_NOT_CONFIGURED, f"refusing to listen on {host} without auth: add the auth plugin")


def check_settings(config: Config) -> None:
    """Refuse (``ValueError``, as a config that cannot load) the server settings its app would
    refuse as each worker builds it (the CORS origins): said once, before any worker boots."""
    check_origins(config.server.cors_origins, has_auth(config.plugins))


def check_auth_setup(config: Config) -> None:
    """Refuse (``AUTH_NOT_CONFIGURED``) an auth setup that cannot work as meant: checked before
    a server listens and again as each worker builds its app, however it was launched."""
    check_authorize(config)
    check_unread_credentials(config)


def check_unread_credentials(config: Config) -> None:
    """Refuse (``AUTH_NOT_CONFIGURED``) API keys or a stream-token secret in the environment with
    no auth plugin to read them: whoever set them means callers to need them, and without the
    plugin they are ignored and every local request is served."""
    problem = unread_credentials_problem(config)
    if problem:
        raise BreadError(AUTH_NOT_CONFIGURED, problem)


def unread_credentials_problem(config: Config) -> str | None:
    """What is wrong when the environment sets ``BREAD_API_KEYS`` or ``BREAD_SECRET`` and no auth
    plugin is configured to read them, or None. (An auth plugin told not to read one,
    ``auth_plugin(env_var=None)`` or ``secret=...``, is not judged: the config may read the
    variable itself, and keys it does not read are refused, not ignored.)"""
    unread = credentials_in_environment()
    if not unread or has_auth(config.plugins):
        return None
    names, them = " and ".join(unread), "them" if len(unread) > 1 else "it"
    return (
        f"the environment sets {names}, but no auth plugin reads {them}: add auth_plugin() to the config's plugins "
        f"(with config.server.authorize; see docs/security.md), or unset {names} to serve local "
        "requests without auth"
    )


def check_authorize(config: Config) -> None:
    """Refuse (``AUTH_NOT_CONFIGURED``) the auth plugin without ``config.server.authorize``:
    every request would be 403."""
    if has_auth(config.plugins) and config.server.authorize is None:
        raise BreadError(AUTH_NOT_CONFIGURED, "the auth plugin is on but config.server.authorize is not set")


def host_of(bind: str) -> str:
    """``127.0.0.1:3000`` -> ``127.0.0.1``; ``[::1]:3000`` -> ``::1``; a Unix socket's bind
    (``unix:/run/bread.sock``), which only this machine can reach, as it is."""
    if bind.startswith(UNIX_BIND):
        return bind
    if bind.startswith("["):
        return bind[1 : bind.index("]")]
    return bind.rsplit(":", 1)[0] if bind.count(":") == 1 else bind


def check_listen(config: Config, host: str) -> None:
    """:func:`check_bind`, its warning logged."""
    warning = check_bind(config, host)
    if warning:
        log.warning(warning)
