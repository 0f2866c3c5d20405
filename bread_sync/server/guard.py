"""What every bread route checks before its handler: the local rule, the action's grant and the
body limit; and how a handler reads its validated body and query."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, TypeVar

from flask import current_app, g, request
from pydantic import BaseModel

from ..errors import BODY_TOO_LARGE, INVALID_REQUEST, REQUEST_TIMEOUT, BreadError
from ..plugins import named
from .actions import HTTP_ACTIONS, actions_of, authorize_args_of
from .deadline import BodyDeadline
from .schemas import validated

# localhost, 127.0.0.1, ::1 and [::1], each with an optional port; nothing else is loopback
# (not localhost., 127.1, 0.0.0.0 or ::).
_LOOPBACK_HOST = re.compile(r"^(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$|^::1$", re.IGNORECASE)
#: What a body must hold for a parsed string to carry a surrogate: a \\uD800-\\uDFFF escape
#: (strict UTF-8 carries none). Only such a body is walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
LOOPBACK_BINDS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class Forbidden(Exception):
    """Answered as 403 ``{"error": "Forbidden"}`` exactly."""


M = TypeVar("M", bound=BaseModel)
Authorizer = Callable[[Any, str, dict[str, str]], bool]
RunAuthorizer = Callable[[Any, str], bool]


def has_auth(plugins: Iterable[Any]) -> bool:
    """Auth is on when a plugin named ``auth`` is configured."""
    return named(plugins, "auth") is not None


def is_loopback_host(host: str | None) -> bool:
    return bool(host) and _LOOPBACK_HOST.match(host) is not None


def accepts(media_type: str) -> bool:
    """The request's ``Accept`` names ``media_type`` itself (a wildcard such as ``*/*`` does not)."""
    return any(value == media_type and quality > 0 for value, quality in request.accept_mimetypes)


def is_local_request() -> bool:
    """The rule while auth is off: a loopback Host (not X-Forwarded-Host: a web page cannot pick
    its Host, so DNS rebinding ends here) from a loopback peer (so the rule holds however the app
    is served, whatever address it listens on)."""
    return is_loopback_host(request.headers.get("Host")) and is_loopback_peer(request.remote_addr)


@lru_cache(maxsize=1024)  # a server sees few peers, and parsing one is most of a request's guard
def is_loopback_peer(address: str | None) -> bool:
    """A loopback address; none at all, or a path, is a Unix socket's peer: local too."""
    if not address or address.startswith("/"):
        return True
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def check_local() -> None:
    if not is_local_request():
        raise Forbidden()


def read_body(limit: int, before_auth: int | None = None) -> None:
    """Read the raw body once, refusing more than ``limit`` bytes, with or without a
    Content-Length (a chunked upload is cut off at limit + 1 bytes), and a body that has not
    arrived within ``BREAD_SYNC_BODY_TIMEOUT_SECONDS`` (see deadline.py).

    ``before_auth``: read at most this much now, the rest once the caller is known
    (:func:`read_rest_of_body`), so an anonymous caller makes the server buffer no more."""
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large(limit)
    now = limit if before_auth is None else min(limit, before_auth)
    data = _read_in_time(now + 1)
    if len(data) > limit:
        raise _too_large(limit)
    if len(data) > now:
        g.bread_body_limit = limit
    g.bread_body = data


def read_rest_of_body() -> None:
    """The part of the body :func:`read_body` left for after authentication, if any."""
    limit = g.pop("bread_body_limit", None)
    if limit is None:
        return
    data = g.bread_body + _read_in_time(limit + 1 - len(g.bread_body))
    if len(data) > limit:
        raise _too_large(limit)
    g.bread_body = data


def _too_large(limit: int) -> BreadError:
    return BreadError(BODY_TOO_LARGE, f"the request body is over the {limit}-byte limit")


def _read_in_time(size: int) -> bytes:
    seconds = current_app.extensions["bread_sync"].body_timeout_seconds
    with BodyDeadline(request.environ, seconds) as deadline:
        try:
            data = request.stream.read(size)
        except Exception as exc:  # the client went away, or the deadline cut a chunk short
            if deadline.passed:
                raise _too_slow(seconds) from exc
            # A chunk size that is not hex, a broken chunk extension, a body cut short: the
            # server's parser raises; the client gets its 400, and the connection closes.
            raise BreadError(INVALID_REQUEST, "the request body could not be read: malformed HTTP framing") from None
        if deadline.passed:
            raise _too_slow(seconds)
    return data


def _too_slow(seconds: float) -> BreadError:
    return BreadError(REQUEST_TIMEOUT, f"the request body did not arrive within {seconds:g} s")


class NotJson(BreadError):
    """A body that is not JSON in UTF-8 (``INVALID_REQUEST``): a JSON-RPC route answers -32700."""

    def __init__(self) -> None:
        super().__init__(INVALID_REQUEST, "the request body is not valid JSON in UTF-8")


def json_body() -> dict[str, Any]:
    """The request body as a JSON object; an empty body is ``{}``."""
    data = g.get("bread_body", b"")
    if not data.strip():
        return {}
    body = json_value(data)
    if not isinstance(body, dict):
        raise BreadError(INVALID_REQUEST, "the request body must be a JSON object")
    return body


def json_value(data: bytes) -> Any:
    """Any JSON value ``data`` holds: :class:`NotJson` when it is none (an empty body too), a
    plain ``INVALID_REQUEST`` when a string in it holds a lone surrogate."""
    try:
        # UTF-8 only (RFC 8259; a BOM is let through): json.loads would read UTF-16 and UTF-32
        # too, and bytes with surrogatepass, letting a lone surrogate into the run.
        text = data.decode("utf-8-sig")
        body = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except (ValueError, RecursionError):  # RecursionError: nested too deep; UnicodeDecodeError is a ValueError
        raise NotJson() from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(body):
        raise BreadError(INVALID_REQUEST, "the request body holds a lone UTF-16 surrogate: no UTF-8 text can carry it")
    return body


def _has_lone_surrogate(body: Any) -> bool:
    # "\ud800" reads into a str that cannot be encoded again: the log, every wire and every
    # client would fail on it later. A stack, not recursion: json nests deeper than Python calls.
    pending = [body]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            if not value.isascii() and _SURROGATE.search(value):
                return True
        elif isinstance(value, dict):
            pending.extend(value)
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return False


def _not_json(constant: str) -> Any:
    # Python reads NaN and Infinity; no JSON client could read them back in a crumb.
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def valid_body(model: type[M]) -> M:
    """The request body validated as ``model`` (``INVALID_REQUEST`` when it is not)."""
    return validated(model, json_body())


def valid_query(model: type[M]) -> M:
    """The query validated as ``model``; a list field takes every value of its key."""
    args = request.args
    fields = {
        name: args.getlist(name) if _is_list(field.annotation) else args[name]
        for name, field in model.model_fields.items()
        if name in args
    }
    return validated(model, fields)


def _is_list(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) is list


def authorize_request(authorize: Authorizer | None) -> None:
    """Forbidden unless ``authorize(identity, action, args)`` is True for this request's route.

    A route without an action (added without ``register_http_route``) is never allowed.
    """
    action = actions_of(current_app).get(request.endpoint or "")
    if action is None or not allows(authorize, g.get("bread_identity"), action, request_args(action)):
        raise Forbidden()


def run_authorizer(*hooks: RunAuthorizer | None) -> RunAuthorizer | None:
    """The run-ownership hooks given (the config's ``authorize_run``, a transport's
    ``authorize_stream``) as one check that each of them must pass; None when none is given."""
    given = [hook for hook in hooks if hook is not None]
    if len(given) <= 1:
        return given[0] if given else None
    return lambda identity, run_id: all(hook(identity, run_id) is True for hook in given)


def authorize_run(run_id: str) -> None:
    """Forbidden unless the run-ownership hook allows this request's caller ``run_id``.

    Every route that reads or acts on a run by id calls it before it reads the run, so a refusal
    says nothing of whether the run exists."""
    if not may_reach_run(run_id):
        raise Forbidden()


def may_reach_run(run_id: str) -> bool:
    """Whether the run-ownership hook allows this request's caller ``run_id``."""
    check = current_app.extensions["bread_sync"].authorize_run
    return check is None or check(g.get("bread_identity"), run_id) is True


def reachable_checkpoint(store: Any, checkpoint_id: str) -> dict[str, Any] | None:
    """The pause ``checkpoint_id`` names, as this request's caller may know it: None when there is
    none, when it is a run's progress (``progress_<runId>``, no pause to answer) or when the
    run-ownership hook refuses its run. A route answers None as it answers an unknown checkpoint,
    so another caller's checkpoint (found only by looking it up: its id does not name its run)
    tells nothing of whether it, or its run, exists."""
    checkpoint = store.get_checkpoint(checkpoint_id)
    if checkpoint is None or checkpoint["status"] == "progress" or not may_reach_run(checkpoint["runId"]):
        return None
    return checkpoint


def caller_key() -> str:
    """The caller's identity as the owner of what it opens (an MCP session, an uploaded file): a
    digest of its JSON (keys sorted), the same for each request of one identity. With auth off
    there is no identity: one key for all."""
    identity = json.dumps(g.get("bread_identity"), sort_keys=True, default=repr)
    return hashlib.sha256(identity.encode()).hexdigest()


def may_read_file(meta: dict[str, Any]) -> bool:
    """Whether this request's caller may read a stored file, given its metadata: one uploaded
    with ``POST /files`` only its uploader, any other (a model's, a remote agent's) anyone."""
    owner = meta.get("owner")
    return owner is None or owner == caller_key()


def may_write_files() -> bool:
    """Whether this request's caller may store files: the grant ``POST /files`` asks for (the
    ``file.write`` action, with no arguments); with auth off, as every route, yes."""
    current = current_app.extensions["bread_sync"]
    if not current.auth:
        return True
    return allows(current.bread.config.server.authorize, g.get("bread_identity"), HTTP_ACTIONS.file_write, {})


def allows(authorize: Authorizer | None, identity: Any, action: str, args: dict[str, str]) -> bool:
    # Only True allows: an authorizer that forgets to return denies.
    return authorize is not None and authorize(identity, action, args) is True


def request_args(action: str) -> dict[str, str]:
    """The query params (first value of each) and the path params; a path param wins. A route
    whose body names its arguments (``register_http_route(args=...)``) gets those instead of the
    query, which must not speak for the body."""
    from_body = authorize_args_of(current_app).get(request.endpoint or "")
    if from_body is not None:
        return {**(request.view_args or {}), **from_body()}
    args = request.args.to_dict()
    if action == HTTP_ACTIONS.run_stream:
        args.pop("token", None)  # a credential, not an argument: authorizers may log args
    return {**args, **(request.view_args or {})}
