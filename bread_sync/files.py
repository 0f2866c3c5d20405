"""File references in a run's input, ``{"type": "file", "uri": "/files/<id>", "mimeType": ...}``:
which are acceptable, the user message that carries them, and their bytes for a model call.

Only files of this server's blob store are referenced (uploaded with ``POST /files``): a
provider is never handed a URL, which it would fetch from wherever it runs, whatever it names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from .blobs import URL_PREFIX, base_type, blob_id, configured, meta_of
from .errors import FILE_NOT_ACCEPTED, FILE_NOT_FOUND, INPUT_INVALID, BreadError
from .models import FileInput

FILE = "file"
#: Whether the caller may read a stored file, given its metadata (the server's ownership rule).
MayRead = Callable[[dict[str, Any]], bool]


def is_file_ref(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == FILE


def file_refs(value: Any) -> list[dict[str, Any]]:
    """Every file reference in a JSON value, in document order."""
    found: list[dict[str, Any]] = []
    pending = [value]  # a stack, not recursion: JSON nests deeper than Python calls
    while pending:
        item = pending.pop()
        if is_file_ref(item):
            found.append(item)
        elif isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return found


def check_files(value: Any, blob_store: Any, may_read: MayRead | None = None, provider: Any = None) -> None:
    """Refuse a run whose input references a file that is not this server's (``INPUT_INVALID``),
    not stored or not the caller's (``FILE_NOT_FOUND``, alike so an id tells nothing), or of a
    type ``provider`` (when given) does not take (``FILE_NOT_ACCEPTED``), before the run opens."""
    for ref in file_refs(value):
        meta = stored_meta(ref, blob_store)
        if meta is None or (may_read is not None and may_read(meta) is not True):
            raise BreadError(FILE_NOT_FOUND, f"no file {ref['uri']}")
        if provider is not None:
            check_accepted(provider, meta["mimeType"])


def check_handed_down(value: Any, blob_store: Any, held: Collection[str]) -> None:
    """Refuse an input a run's model wrote for the run's next model call (a subagent's or a
    task's, a pipeline step's, a loop iteration's) that names an owned file whose uri ``held``
    (the files its conversation was given) lacks: ``FILE_NOT_FOUND``, as :func:`check_files`.

    A model may write any file id, and only its caller's rule, applied where the run's input
    entered, says which files the run may read: what a model hands on is one of those, or one
    no one owns (a model's). A reference to no file of this server's (a URL, or any file where
    no blob store is configured) reaches no one's bytes: the next model call names it as not
    stored, as it did before this check."""
    if blob_store is None:
        return
    not_given = [ref for ref in file_refs(value) if names_ours(ref.get("uri")) and ref["uri"] not in held]
    check_files(not_given, blob_store, lambda meta: meta.get("owner") is None)


def input_files(value: Any) -> set[str]:
    """The uris of the files a JSON value (a run's input) references."""
    return {ref.get("uri") for ref in file_refs(value)}


def message_files(messages: list[dict[str, Any]]) -> set[str]:
    """The uris of the files a conversation's messages hold (see :func:`user_message`)."""
    return {ref["uri"] for message in messages for ref in message.get("files") or ()}


def stored_meta(ref: dict[str, Any], blob_store: Any) -> dict[str, Any] | None:
    """The stored metadata of the file ``ref`` names, None when there is none."""
    uri = ref.get("uri")
    if not names_ours(uri):
        raise BreadError(
            INPUT_INVALID,
            f"a file reference's uri must be {URL_PREFIX}<id> as POST /files answers it, not {str(uri)[:100]!r}: "
            "upload the file first (a URL is never fetched)",
        )
    return meta_of(configured(blob_store, "a file is referenced and no blob store is configured"), uri)


def names_ours(uri: Any) -> bool:
    """Whether ``uri`` names a file of this server's, ``/files/<id>`` as ``POST /files`` answers."""
    return isinstance(uri, str) and uri.startswith(URL_PREFIX) and blob_id(uri) is not None


def check_accepted(provider: Any, media_type: str) -> None:
    """``FILE_NOT_ACCEPTED`` unless ``provider`` lists the type in its ``file_types``."""
    if base_type(media_type) not in getattr(provider, "file_types", ()):
        name = getattr(provider, "name", type(provider).__name__)
        raise BreadError(FILE_NOT_ACCEPTED, f"the model provider {name} does not take {media_type} files")


def user_message(value: Any) -> dict[str, Any]:
    """The user message of a run's input: its text (a string as it is; text parts and file
    references, their texts; else its JSON) and, when it holds any, its ``files``."""
    refs = file_refs(value)
    message: dict[str, Any] = {"role": "user", "content": _text_of(value, bool(refs))}
    if refs:
        message["files"] = [{"uri": ref.get("uri"), "mimeType": ref.get("mimeType")} for ref in refs]
    return message


def _text_of(value: Any, has_files: bool) -> str:
    if isinstance(value, str):
        return value
    if has_files and is_file_ref(value):
        return ""
    if has_files and isinstance(value, list) and all(_is_part(item) for item in value):
        return "\n".join(_part_text(item) for item in value if not is_file_ref(item))
    return json.dumps(value, ensure_ascii=False)


def _is_part(item: Any) -> bool:
    return isinstance(item, str) or is_file_ref(item) or (isinstance(item, dict) and isinstance(item.get("text"), str))


def _part_text(item: Any) -> str:
    return item if isinstance(item, str) else item["text"]


def for_model_call(
    messages: list[dict[str, Any]], blob_store: Any, provider: Any
) -> tuple[list[dict[str, Any]], dict[str, FileInput]]:
    """The messages of a model call and the files they reference, by uri, read from the blob
    store. A file deleted since its message (``bread-sync gc``) is named in the text instead, so
    the conversation goes on; one the provider does not take is ``FILE_NOT_ACCEPTED``."""
    files: dict[str, FileInput] = {}
    sent = []
    for message in messages:
        if message.get("files"):
            message = _with_stored_files(message, blob_store, provider, files)
        sent.append(message)
    return sent, files


def _with_stored_files(
    message: dict[str, Any], blob_store: Any, provider: Any, files: dict[str, FileInput]
) -> dict[str, Any]:
    kept, gone = [], []
    for ref in message["files"]:
        found = blob_store.get(ref["uri"]) if blob_store is not None else None
        if found is None:
            gone.append(ref["uri"])
            continue
        data, meta = found
        check_accepted(provider, meta["mimeType"])
        files[ref["uri"]] = FileInput(data, meta["mimeType"], meta.get("name"))
        kept.append({**ref, "mimeType": meta["mimeType"]})
    notes = [f"(the file {uri} is no longer stored)" for uri in gone]
    return {**message, "content": "\n".join([message["content"], *notes]).strip(), "files": kept}
