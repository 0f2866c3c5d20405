"""What the providers built on an official SDK (``openai``, ``anthropic``, ``google``) share.

A provider's failure is read into a :class:`Failure` (its HTTP status, the provider's own error
type, its words, its ``Retry-After``) and becomes one ``BreadError`` whose code says what kind of
failure it was, so an app (and :mod:`bread_sync.models.fallback`) can tell a rate limit from a
bad key without knowing which SDK raised it.
"""

from __future__ import annotations

import base64
import email.utils
import json
import re
import socket
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from ..blobs import base_type
from ..cancel import CancelToken
from ..errors import (
    MODEL_AUTH_FAILED,
    MODEL_CONTEXT_TOO_LONG,
    MODEL_ERROR,
    MODEL_OVERLOADED,
    MODEL_RATE_LIMITED,
    BreadError,
)
from ..loading import import_module

#: Sent when no key is configured anywhere: local servers need none, the client libraries need one.
NO_KEY = "no-key"
DEFAULT_TIMEOUT = 60.0
CONNECT_TIMEOUT = 5.0
DEFAULT_MAX_RETRIES = 2
#: How much of a server's error message an error crumb quotes.
MAX_DETAIL = 300
#: The files the OpenAI and Anthropic models take as input: images and PDFs.
IMAGES_AND_PDF = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"})
#: The codes a fallback chain moves on after (with timeouts, dropped connections and 5xx).
RETRYABLE_CODES = frozenset({MODEL_RATE_LIMITED, MODEL_OVERLOADED})

_AUTH_TYPES = {"authentication_error", "permission_error", "UNAUTHENTICATED", "PERMISSION_DENIED"}
_RATE_TYPES = {"rate_limit_error", "RESOURCE_EXHAUSTED"}
_OVERLOAD_TYPES = {"overloaded_error", "UNAVAILABLE"}
_TOO_LONG = re.compile(r"context length|context window|too long|too many (input )?tokens|maximum context", re.I)


@dataclass
class Failure:
    """A provider's failure as the SDK reported it. ``kind``: the SDK's exception class name;
    ``status``: the HTTP status (None for a timeout or a broken connection); ``error_type``: the
    provider's own type (``overloaded_error``, ``RESOURCE_EXHAUSTED``); ``network``: a timeout
    or a dropped connection."""

    what: str
    kind: str
    status: int | None = None
    error_type: str | None = None
    detail: str = ""
    retry_after: float | None = None
    network: bool = False


def model_error(provider: str, failure: Failure, redact: Callable[[str], str]) -> BreadError:
    """The ``BreadError`` a failure is: its code by kind, its message naming what failed with the
    server's own words (never the API key), its context what a caller reacts to."""
    code = _code(failure)
    context: dict[str, Any] = {"provider": provider, "kind": failure.kind}
    if failure.status is not None:
        context["status"] = failure.status
    if failure.error_type:
        context["type"] = failure.error_type
    if failure.retry_after is not None:
        context["retryAfter"] = failure.retry_after
    context["retryable"] = code in RETRYABLE_CODES or failure.network or (failure.status or 0) >= 500
    detail = f": {failure.detail}" if failure.detail else ""
    return BreadError(code, redact(f"{failure.what} ({failure.kind}){detail}"), context)


def _code(failure: Failure) -> str:
    status, error_type = failure.status, failure.error_type or ""
    if status in (401, 403) or error_type in _AUTH_TYPES:
        return MODEL_AUTH_FAILED
    if status == 429 or error_type in _RATE_TYPES:
        return MODEL_RATE_LIMITED
    if status in (503, 529) or error_type in _OVERLOAD_TYPES:
        return MODEL_OVERLOADED
    if status in (400, 413) and _TOO_LONG.search(failure.detail):
        return MODEL_CONTEXT_TOO_LONG
    return MODEL_ERROR


def is_retryable(error: BreadError) -> bool:
    """A model failure another attempt may not meet: a rate limit, an overload, a timeout, a 5xx."""
    return bool(error.context.get("retryable"))


@contextmanager
def translated_errors(
    signal: CancelToken, sdk_errors: tuple[type[BaseException], ...], to_bread: Callable[[Exception], BreadError]
) -> Iterator[None]:
    """The SDK's errors (``sdk_errors``) raised as ``BreadError``; none after a cancel, which
    broke the read itself (the runtime ends the run with ``RUN_CANCELLED``)."""
    try:
        yield
    except Exception as exc:
        if signal.cancelled:
            return
        if not isinstance(exc, sdk_errors):
            raise
        raise to_bread(exc) from exc


def status_failure(what: str, exc: Any, status: int, error_type: str | None, headers: Any) -> Failure:
    """A failure the server answered with (an HTTP error, or an error event inside a stream)."""
    return Failure(
        what,
        type(exc).__name__,
        status=status,
        error_type=error_type,
        detail=detail_of(getattr(exc, "body", None)),
        retry_after=retry_after(headers),
    )


def detail_of(body: Any) -> str:
    """The server's message in an error body (``{"message"}``, ``{"error": {"message"}}`` or text), cut short."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        text = body["message"]
    elif isinstance(body, str):
        text = body.strip()
    else:
        return ""
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL] + "..."


def error_type_of(body: Any) -> str | None:
    """The provider's own error type in an error body (``{"error": {"type"}}`` or ``{"type"}``)."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    value = body.get("type") if isinstance(body, Mapping) else None
    return value if isinstance(value, str) else None


def retry_after(headers: Any) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms``, ``retry-after`` as seconds or a date), or None."""
    if headers is None:
        return None
    with suppress(TypeError, ValueError):
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(float(ms) / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    with suppress(ValueError):
        return max(float(value), 0.0)
    with suppress(TypeError, ValueError):
        return max(email.utils.parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    return None


def redactor(*secrets: Any) -> Callable[[str], str]:
    """Replaces each real secret (not :data:`NO_KEY`) in a text with ``***``."""
    real = [s for s in secrets if isinstance(s, str) and s and s != NO_KEY]

    def redact(text: str) -> str:
        for secret in real:
            text = text.replace(secret, "***")
        return text

    return redact


def parse_arguments(text: str) -> Any:
    """A tool call's JSON arguments; text that is not JSON reaches the runtime as it is."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def arguments_text(value: Any) -> str:
    """A tool call's input as the model sent it: a string input is arguments that were not JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def attached(message: Mapping[str, Any], request: Any) -> list[tuple[str, Any]]:
    """The files a message references, in order, as ``(media type, file)`` (``request.files``'
    :class:`~bread_sync.models.FileInput`), the type without parameters, as the APIs take it."""
    files = [request.files[ref["uri"]] for ref in message.get("files") or ()]
    return [(base_type(file.mime_type), file) for file in files]


def text_part(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message's text as the one ``{"type": "text"}`` part OpenAI and Anthropic take beside
    files; none when it has none."""
    return [{"type": "text", "text": message["content"]}] if message["content"] else []


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def interrupt(response: Any, close: Callable[[], Any]) -> None:
    """Wake the read a turn is blocked in on ``response`` (an httpx response). Runs in the
    canceller's thread, so it never raises (an error here means the reader closed the response
    first, which is what we wanted). Shutting the socket down wakes a read blocked in another
    thread; closing it would not."""
    with suppress(Exception):
        network = response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is None:  # a transport without a socket: closing is the best we have
            close()
        else:
            sock.shutdown(socket.SHUT_RDWR)


class SdkProvider:
    """What every provider built on an official SDK shares: its settings (an argument, else the
    provider's own environment variables), the model a call asks for, the SDK's failures as
    bread's, and its repr. A subclass names its SDK's module, reads its environment variables
    (``_from_environment``) and a failure (``_failure``)."""

    name: str
    #: The SDK's module, imported when the provider is made (a missing extra says which).
    sdk_module: str
    #: The media types of the files the provider sends by default; ``file_types=`` sets others
    #: (``()``: a model that takes none, refused before it is called).
    default_file_types: frozenset[str] = IMAGES_AND_PDF

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | Any = DEFAULT_TIMEOUT,
        params: Mapping[str, Any] | None = None,
        client: Any = None,
        file_types: Collection[str] | None = None,
    ):
        self._sdk = import_module(self.sdk_module)
        if client is not None and (base_url or api_key):
            raise TypeError("pass either client= or base_url=/api_key=: a client carries its own")
        self.model = model
        from_environment = self._from_environment()
        self.base_url = base_url or from_environment[0] or None
        self._api_key = api_key or from_environment[1] or NO_KEY
        self.timeout = timeout
        self.params = dict(params or {})
        self._client = client
        given = self.default_file_types if file_types is None else file_types
        self.file_types = frozenset(base_type(media_type) for media_type in given)

    def _from_environment(self) -> tuple[str | None, str | None]:
        """The base URL and the API key the provider's own environment variables name."""
        raise NotImplementedError

    def model_for(self, request: Any) -> str:
        """The model a call asks for: the provider's own, else the agent's ``provider:<model>``."""
        model = self.model or request.model
        if not model:
            raise ValueError(f"no model name: use {self.name}.provider(model=...) or '{self.name}:<model>'")
        return model

    def _to_bread(self, exc: Exception) -> BreadError:
        redact = redactor(self._api_key, getattr(self._client, "api_key", None))
        return model_error(self.name, self._failure(exc), redact)

    def _failure(self, exc: Exception) -> Failure:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.name}(model={self.model!r}, base_url={self.base_url!r})"


class StainlessProvider(SdkProvider):
    """A provider on an SDK of the ``openai``/``anthropic`` shape (both generated alike): a
    client per turn (closed when the turn ends; one given is the caller's and reused), its
    ``Timeout`` and ``max_retries``. A subclass names the client class and the SDK's errors, and
    streams one turn (``_turn``)."""

    #: The SDK's client class, by name.
    client_class: str

    def __init__(self, model: str | None = None, *, max_retries: int = DEFAULT_MAX_RETRIES, **settings: Any):
        super().__init__(model, **settings)
        self.max_retries = max_retries

    def stream(self, request: Any) -> Iterator[Any]:
        model = self.model_for(request)
        if request.signal.cancelled:
            return
        client = self._client or self._new_client()
        try:
            with translated_errors(request.signal, self._errors(), self._to_bread):
                yield from self._turn(client, model, request)
        finally:
            if client is not self._client:
                client.close()

    def _new_client(self) -> Any:
        timeout = self.timeout
        if isinstance(timeout, int | float):
            timeout = self._sdk.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))
        client_class = getattr(self._sdk, self.client_class)
        return client_class(
            api_key=self._api_key, base_url=self.base_url, timeout=timeout, max_retries=self.max_retries
        )

    def _errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _turn(self, client: Any, model: str, request: Any) -> Iterator[Any]:
        raise NotImplementedError
