"""A message's parts as a run's input, and as the answer to a paused task."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from ...blobs import OPAQUE, is_media_type
from ...files import FILE, is_file_ref
from ..answers import text_answer

#: The most an inline file part may hold, decoded; its base64 is measured before it is decoded.
MAX_INLINE_BYTES = 10 * 1024 * 1024


class BadParams(ValueError):
    """-32602: the message's params are not acceptable, for the reason it says."""


def check_inline_sizes(params: Any, path: tuple[str, ...]) -> None:
    """Refuse an inline file part over :data:`MAX_INLINE_BYTES` from its base64's length, before
    anything decodes it. ``path`` is where a part holds its bytes (``("file", "bytes")``,
    ``("raw",)``)."""
    message = params.get("message") if isinstance(params, dict) else None
    for part in (message.get("parts") if isinstance(message, dict) else None) or []:
        value = part
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and decoded_size(value) > MAX_INLINE_BYTES:
            raise BadParams(f"an inline file part is over the {MAX_INLINE_BYTES}-byte limit: pass it by uri")


def decoded_size(text: str) -> int:
    """The size base64 ``text`` decodes to (at most; whitespace counts)."""
    return len(text) * 3 // 4 - text[-2:].count("=")


def run_input(
    parts: list[dict[str, Any]],
    blob_store: Any,
    owner: str | None = None,
    before_storing: Callable[[list[str]], None] | None = None,
) -> Any:
    """The run's input: text parts joined by newlines; one data part, its value; one file part,
    a file reference ``{type: "file", uri, mimeType?, name?}`` (bread_sync/files.py); any other
    mix, the tagged parts in order, each file part as its reference. Inline bytes are stored in
    ``blob_store`` first, as ``owner``'s (the caller's, as an upload is), and named by the url it
    gives; a uri is the run's to check (only this server's files are references a model
    receives). ``before_storing`` is told the media type of each inline file part
    (``application/octet-stream`` when it names none), in order, before any is stored: it may
    refuse them, and then nothing is."""
    if not parts:
        raise BadParams("the message has no parts")
    typed = [(part, _media_type(part["file"]) if "file" in part else None) for part in parts]
    if before_storing is not None:
        before_storing([media_type or OPAQUE for part, media_type in typed if _is_inline(part)])
    resolved = [
        _file(part["file"], media_type, blob_store, owner) if "file" in part else part for part, media_type in typed
    ]
    if all("text" in part for part in resolved):
        return "\n".join(part["text"] for part in resolved)
    if len(resolved) == 1:
        return resolved[0] if is_file_ref(resolved[0]) else next(iter(resolved[0].values()))
    return resolved


def _is_inline(part: dict[str, Any]) -> bool:
    """Whether ``part`` is a file part that carries its bytes."""
    return "file" in part and "uri" not in part["file"]


def _media_type(file: dict[str, Any]) -> str | None:
    mime_type = file.get("mimeType")
    if mime_type and not is_media_type(mime_type):  # "" is none given, as ProtoJSON reads it
        raise BadParams(f"a file part's mimeType must be a media type such as image/png, not {mime_type!r}")
    return mime_type


def _file(file: dict[str, Any], mime_type: str | None, blob_store: Any, owner: str | None) -> dict[str, Any]:
    name = file.get("name")
    if "uri" in file:
        uri = file["uri"]
    else:
        if blob_store is None:
            raise BadParams("an inline file part needs a blob store, and none is configured: pass it by uri")
        uri = blob_store.put(_decoded(file["bytes"]), mime_type or OPAQUE, name, owner)["url"]
    typed = {"mimeType": mime_type} if mime_type else {}
    return {"type": FILE, "uri": uri, **typed, **({"name": name} if name else {})}


def _decoded(data: str | bytes) -> bytes:
    if isinstance(data, bytes):  # v1.0's ProtoJSON reader has decoded it already
        return data
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadParams("an inline file part's bytes are not base64") from None


def pause_answer(parts: list[dict[str, Any]], kind: str) -> Any:
    """What a message answers a paused task with: a data part's value as it is; a text answers an
    input ``{"answer": text}``, an approval ``{"approved": bool}``."""
    if len(parts) != 1 or "file" in parts[0]:
        raise BadParams("an answer to a paused task is one text or one data part")
    part = parts[0]
    if "data" in part:
        return part["data"]
    return text_answer(part["text"], kind)
