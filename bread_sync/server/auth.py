"""The auth plugin: who is calling, for ``config.server.authorize`` to decide what they may do.

A caller is identified by a bearer API key, by your own ``resolve(request)`` (e.g. a JWT
check), or, on ``GET /runs/<runId>/stream`` only, by a short-lived stream token in the query,
for a browser's ``EventSource``, which cannot send headers. The identity is stored in
``g.bread_identity``; the server then asks ``authorize(identity, action, args)`` before every
handler. See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flask import Response, current_app, g, jsonify, request
from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer

from ..errors import AUTH_NOT_CONFIGURED, UNAUTHENTICATED, BreadError
from .actions import HTTP_ACTIONS, actions_of, register_http_route
from .guard import Forbidden, allows, authorize_run, valid_body
from .schemas import StreamToken, StreamTokenBody
from .state import state

log = logging.getLogger("bread_sync.server")

DEFAULT_STREAM_TOKEN_SECONDS = 300
MIN_SECRET_LENGTH = 32
STREAM_TOKEN_PATH = "/auth/stream-token"
SECRET_ENV_VAR = "BREAD_SECRET"
API_KEYS_ENV_VAR = "BREAD_API_KEYS"
_SALT = "bread_sync.stream-token"

Resolver = Callable[[Any], Any]


def credentials_in_environment() -> list[str]:
    """Which of the variables only the auth plugin reads are set: its API keys, its secret."""
    keys, secret = os.environ.get(API_KEYS_ENV_VAR), os.environ.get(SECRET_ENV_VAR)
    return [name for name, value in ((API_KEYS_ENV_VAR, keys), (SECRET_ENV_VAR, secret)) if value]


class AUTH_ACTIONS:  # noqa: N801 - spelled like HTTP_ACTIONS
    stream_token = "auth.stream_token"


def auth_plugin(
    api_keys: Mapping[str, str] | Iterable[str] | str | None = None,
    env_var: str | None = API_KEYS_ENV_VAR,
    resolve: Resolver | None = None,
    secret: str | None = None,
    stream_token_seconds: int = DEFAULT_STREAM_TOKEN_SECONDS,
) -> AuthPlugin:
    """The plugin named ``auth``; put it in ``Config.plugins`` and set ``config.server.authorize``.

    ``api_keys``: keys, or ``{name: key}`` (the name becomes the identity's ``sub``), added to
    the comma-separated keys in ``$env_var`` (``env_var=None``: read no environment).
    ``resolve(request)``: your own check, returning an identity or None; asked when the bearer is
    not one of the keys. ``secret`` (else ``$BREAD_SECRET``, at least 32 characters) signs stream
    tokens, valid ``stream_token_seconds``; without one, no stream token is minted.
    """
    return AuthPlugin(_keys(api_keys, env_var), resolve, secret, stream_token_seconds)


class AuthPlugin:
    """See :func:`auth_plugin`."""

    name = "auth"

    def __init__(
        self, keys: list[tuple[bytes, dict[str, str]]], resolve: Resolver | None, secret: str | None, seconds: int
    ):
        if secret is not None and len(secret) < MIN_SECRET_LENGTH:
            raise ValueError(f"the stream-token secret must be at least {MIN_SECRET_LENGTH} characters")
        self.keys = keys
        self.resolve = resolve
        self.stream_token_seconds = seconds
        secret = secret or os.environ.get(SECRET_ENV_VAR)
        self._no_signer = _secret_problem(secret)
        signer = {"digest_method": hashlib.sha256}
        self._signer = None if self._no_signer else URLSafeTimedSerializer(secret, salt=_SALT, signer_kwargs=signer)

    def middleware(self, blueprint: Any, bread: Any) -> None:
        if not self.keys and self.resolve is None:
            log.warning("the auth plugin has no API keys and no resolver: every request will be 401")
        blueprint.before_request(self.authenticate)

    def routes(self, blueprint: Any, bread: Any) -> None:
        register_http_route(blueprint, "POST", STREAM_TOKEN_PATH, AUTH_ACTIONS.stream_token, self.mint)

    def authenticate(self) -> Response | None:
        try:
            g.bread_identity = self.identify()
        except Unauthenticated as exc:
            return exc.response()
        return None

    def identify(self) -> Any:
        """The caller's identity, or :class:`Unauthenticated`."""
        presented = _bearer()
        identity = self._by_key(presented) if presented else None
        if identity is None and self.resolve is not None:
            identity = self.resolve(request)
        if identity is None and presented is None and "token" in request.args and _on_stream_route():
            identity = self._by_stream_token(request.args["token"])
        if identity is None:
            if presented is None:
                raise Unauthenticated("authentication required: send Authorization: Bearer <key>")
            raise Unauthenticated("the credential is not valid", invalid=True)
        return identity

    def _by_key(self, presented: str) -> dict[str, str] | None:
        candidate = presented.encode()
        found = None
        for key, identity in self.keys:  # every key, in constant time each: no early exit to time
            if hmac.compare_digest(key, candidate):
                found = identity
        return dict(found) if found is not None else None

    def _by_stream_token(self, token: str) -> Any:
        if self._signer is None:
            raise Unauthenticated("stream tokens are not enabled on this server", invalid=True)
        try:
            claims = self._signer.loads(token, max_age=self.stream_token_seconds)
        except SignatureExpired:
            raise Unauthenticated("the stream token expired: mint another", invalid=True) from None
        except BadData:
            raise Unauthenticated("the stream token is not valid", invalid=True) from None
        if claims.get("run") != (request.view_args or {}).get("runId"):
            raise Unauthenticated("the stream token is for another run", invalid=True)
        return claims.get("identity")

    def mint(self) -> Any:
        """``POST /auth/stream-token`` ``{"runId"}``: a token that opens that run's stream."""
        if self._signer is None:
            raise BreadError(AUTH_NOT_CONFIGURED, self._no_signer or "")
        run_id = valid_body(StreamTokenBody).runId
        identity = g.get("bread_identity")
        # A token never grants more than its holder's own header would: they may stream this run.
        if not allows(state().bread.config.server.authorize, identity, HTTP_ACTIONS.run_stream, {"runId": run_id}):
            raise Forbidden()
        authorize_run(run_id)
        try:
            token = self._signer.dumps({"run": run_id, "identity": identity})
        except TypeError as exc:
            raise TypeError(f"a stream token carries the caller's identity, which must be JSON: {exc}") from None
        return jsonify(StreamToken(token=token, runId=run_id, expiresIn=self.stream_token_seconds).model_dump())


class Unauthenticated(Exception):
    """401 ``UNAUTHENTICATED`` with a ``WWW-Authenticate: Bearer`` challenge (RFC 6750)."""

    def __init__(self, message: str, invalid: bool = False):
        super().__init__(message)
        self.message = message
        self.invalid = invalid

    def response(self) -> Response:
        answer = jsonify(BreadError(UNAUTHENTICATED, self.message).to_body())
        answer.status_code = 401
        challenge = 'Bearer realm="bread_sync"'
        answer.headers["WWW-Authenticate"] = challenge + (', error="invalid_token"' if self.invalid else "")
        return answer


def _bearer() -> str | None:
    """The bearer credential; "" for an Authorization header of another form; None without one."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _on_stream_route() -> bool:
    return actions_of(current_app).get(request.endpoint or "") == HTTP_ACTIONS.run_stream


def _keys(api_keys: Mapping[str, str] | Iterable[str] | str | None, env_var: str | None) -> list[tuple[bytes, dict]]:
    named = dict(api_keys) if isinstance(api_keys, Mapping) else _by_fingerprint(_split(api_keys))
    named.update(_by_fingerprint(_split(os.environ.get(env_var, "") if env_var else "")))
    for name, key in named.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"the API key named {name!r} must be a non-empty string")
    return [(key.encode(), {"sub": name, "kind": "api_key"}) for name, key in named.items()]


def _split(keys: Iterable[str] | str | None) -> list[str]:
    if isinstance(keys, str):
        keys = keys.split(",")
    keys = list(keys or ())
    if not all(isinstance(k, str) for k in keys):
        raise ValueError("API keys must be strings")
    return [k.strip() for k in keys if k.strip()]


def _by_fingerprint(keys: list[str]) -> dict[str, str]:
    # An unnamed key's identity: stable and recognisable, and no use to whoever reads a log.
    return {f"key-{hashlib.sha256(k.encode()).hexdigest()[:12]}": k for k in keys}


def _secret_problem(secret: str | None) -> str | None:
    if not secret:
        return f"no stream-token secret: set {SECRET_ENV_VAR} (or auth_plugin(secret=...))"
    if len(secret) < MIN_SECRET_LENGTH:
        return f"{SECRET_ENV_VAR} must be at least {MIN_SECRET_LENGTH} characters"
    return None
