"""The ``google`` provider: Gemini through the official ``google-genai`` client, streamed.

The ``google`` extra. ``"google:<model>"`` reads the key the client library reads
(``GOOGLE_API_KEY``, else ``GEMINI_API_KEY``) and its base URL (``GOOGLE_GEMINI_BASE_URL``);
``provider(model=..., base_url=..., api_key=..., params=...)`` gives an agent its own. ``params``
are merged into the call's ``GenerateContentConfig`` (``temperature``, ``thinking_config``:
``{"include_thoughts": True}`` streams the model's thoughts as ``reasoning:delta``).

Gemini sends each function call whole, so its input streams as one ``tool:input:delta``. The
thought signatures of a turn's calls are kept in the turn's ``state`` and sent back with them
within their tool loop, as the API asks. Synchronous: the client's httpx sockets are cooperative
under gevent. A cancel shuts the response's socket down (found through the client's response
hook), which wakes a blocked read; with a ``client=`` of your own it is seen between chunks.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import suppress
from typing import Any

from . import ModelEvent, ModelRequest, ReasoningDelta, TextDelta, ToolCall, ToolInputDelta, ToolInputStart, Usage
from .sdk import (
    Failure,
    SdkProvider,
    attached,
    interrupt,
    model_error,
    new_call_id,
    redactor,
    status_failure,
    translated_errors,
)

#: Where ``request.state`` keeps the thought signatures of the tool loop under way, by call id.
SIGNATURE_STATE = "googleSignatures"


class GoogleProvider(SdkProvider):
    """Streams Gemini content. ``timeout`` bounds the call (seconds); ``params`` are merged into
    every call's config; ``client`` is a ``genai.Client`` to reuse (you own it)."""

    name = "google"
    sdk_module = "google.genai"
    #: Gemini's image types (no GIF) and PDF.
    default_file_types = frozenset(
        {"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif", "application/pdf"}
    )

    def _from_environment(self) -> tuple[str | None, str | None]:
        return os.environ.get("GOOGLE_GEMINI_BASE_URL"), os.environ.get("GOOGLE_API_KEY") or os.environ.get(
            "GEMINI_API_KEY"
        )

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        model = self.model_for(request)
        if request.signal.cancelled:
            return
        responses: list[Any] = []  # what the client opened: a cancel shuts their sockets down

        def opened(response: Any) -> None:  # the client's hook, once a response's headers came
            responses.append(response)
            if request.signal.cancelled:
                interrupt(response, response.close)

        client = self._client or self._new_client(opened)
        undo = request.signal.on_cancel(lambda: [interrupt(r, r.close) for r in responses])
        errors = (self._sdk.errors.APIError, *_network_errors())
        try:
            with translated_errors(request.signal, errors, self._to_bread):
                chunks = client.models.generate_content_stream(
                    model=model, contents=to_contents(request), config=self._config(request)
                )
                yield from _events(chunks, request)
        finally:
            undo()
            if client is not self._client:
                client.close()

    def _config(self, request: ModelRequest) -> dict[str, Any]:
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if request.system:
            config["system_instruction"] = request.system
        if request.tools:
            declarations = [_declaration(spec) for spec in request.tools]
            config["tools"] = [{"function_declarations": declarations}]
        if request.output_format == "json":
            config["response_mime_type"] = "application/json"
        if request.trace_headers:
            config["http_options"] = {"headers": request.trace_headers}
        return config | self.params

    def _new_client(self, opened: Any) -> Any:
        options: dict[str, Any] = {
            "timeout": int(self.timeout * 1000),  # milliseconds
            "client_args": {"event_hooks": {"response": [opened]}},
        }
        if self.base_url:
            options["base_url"] = self.base_url
        return self._sdk.Client(api_key=self._api_key, http_options=options)

    def _to_bread(self, exc: Exception) -> Any:
        redact = redactor(self._api_key, getattr(getattr(self._client, "_api_client", None), "api_key", None))
        return model_error(self.name, self._failure(exc), redact)

    def _failure(self, exc: Exception) -> Failure:
        kind = type(exc).__name__
        if isinstance(exc, self._sdk.errors.APIError):
            exc.body = exc.details  # the error body, where the shared reading looks for it
            headers = getattr(exc.response, "headers", None)
            what = f"the model provider answered HTTP {exc.code}"
            return status_failure(what, exc, exc.code, exc.status, headers)
        if "Timeout" in kind:
            return Failure("the model provider timed out", kind, network=True)
        return Failure("the connection to the model provider failed", kind, network=True)


def _network_errors() -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP client the library uses: ``httpx``, or its fork ``httpx2``."""
    found = []
    for name in ("httpx", "httpx2"):
        with suppress(ImportError):
            found.append(importlib.import_module(name).TransportError)
    return tuple(found)


def provider(model: str | None = None, **opts: Any) -> GoogleProvider:
    """A :class:`GoogleProvider`; see it for the options."""
    return GoogleProvider(model, **opts)


# -- request -----------------------------------------------------------------------------------


def to_contents(request: ModelRequest) -> list[dict[str, Any]]:
    """The runtime's messages as Gemini contents: a turn's function responses in one user content."""
    signatures = request.state.get(SIGNATURE_STATE) or {}
    contents: list[dict[str, Any]] = []
    for message in request.messages:
        role = message["role"]
        if role == "tool":
            part = {"function_response": _function_response(message)}
            if contents and contents[-1].get("responses"):
                contents[-1]["parts"].append(part)
                continue
            contents.append({"role": "user", "parts": [part], "responses": True})
        elif role == "assistant":
            contents.append({"role": "model", "parts": _model_parts(message, signatures)})
        else:
            contents.append({"role": "user", "parts": _user_parts(message, request)})
    for content in contents:
        content.pop("responses", None)
    return contents


def _user_parts(message: dict[str, Any], request: ModelRequest) -> list[dict[str, Any]]:
    """The files a message references as ``inline_data`` parts (the client sends them base64), then its text."""
    parts = [
        {"inline_data": {"mime_type": media_type, "data": file.data}} for media_type, file in attached(message, request)
    ]
    if message["content"] or not parts:
        parts.append({"text": message["content"]})
    return parts


def _model_parts(message: dict[str, Any], signatures: Mapping[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": message["content"]}] if message["content"] else []
    for call in message.get("toolCalls") or ():
        args = call["input"] if isinstance(call["input"], dict) else {"arguments": call["input"]}
        part: dict[str, Any] = {"function_call": {"id": call["id"], "name": call["name"], "args": args}}
        if call["id"] in signatures:
            part["thought_signature"] = base64.b64decode(signatures[call["id"]])
        parts.append(part)
    return parts


def _function_response(message: dict[str, Any]) -> dict[str, Any]:
    value = json.loads(message["content"])
    response = value if isinstance(value, dict) else {"output": value}
    return {"id": message["toolCallId"], "name": message.get("name", ""), "response": response}


def _declaration(spec: Any) -> dict[str, Any]:
    declaration = {"name": spec.name, "parameters_json_schema": spec.parameters}
    if spec.description:
        declaration["description"] = spec.description
    return declaration


# -- response ----------------------------------------------------------------------------------


def _events(chunks: Any, request: ModelRequest) -> Iterator[ModelEvent]:
    signatures: dict[str, str] = {}
    calls = 0
    used = None
    for chunk in chunks:
        if request.signal.cancelled:
            return
        used = chunk.usage_metadata or used
        for part in _parts(chunk):
            if part.function_call is not None:
                calls += 1
                yield from _call(part, signatures)
            elif part.text:
                yield ReasoningDelta(part.text) if part.thought else TextDelta(part.text)
    _keep_signatures(request.state, signatures, calls)
    if used is not None:
        output = (used.candidates_token_count or 0) + (used.thoughts_token_count or 0)
        yield Usage(used.prompt_token_count or 0, output)


def _parts(chunk: Any) -> list[Any]:
    candidate = chunk.candidates[0] if chunk.candidates else None
    content = candidate.content if candidate is not None else None
    return list(content.parts or ()) if content is not None else []


def _call(part: Any, signatures: dict[str, str]) -> Iterator[ModelEvent]:
    function = part.function_call
    call_id = function.id or new_call_id()
    args = dict(function.args or {})
    if part.thought_signature:
        signatures[call_id] = base64.b64encode(part.thought_signature).decode()
    yield ToolInputStart(call_id, function.name or "")
    yield ToolInputDelta(call_id, json.dumps(args))
    yield ToolCall(call_id, function.name or "", args)


def _keep_signatures(state: dict[str, Any], signatures: dict[str, str], calls: int) -> None:
    """A turn with calls adds their signatures to the loop's; a turn with none ends the loop."""
    if not calls:
        state.pop(SIGNATURE_STATE, None)
    elif signatures:
        state.setdefault(SIGNATURE_STATE, {}).update(signatures)
