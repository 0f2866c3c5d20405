"""The blob store seam: where generated and uploaded files live.

A blob store module ``blobs/<name>.py`` exports ``store(**opts)``. ``put`` returns
``{"url", "mimeType", "name", "size", "owner"}``; ``url`` is ``/files/<id>``, the route that
serves it; ``owner`` is who uploaded it (``POST /files``: a digest of the caller's identity), None
for a file anyone who may read files may read (a model's, a remote agent's).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ..errors import BLOB_STORE_NOT_CONFIGURED, BreadError

BLOB_STORES = {"filesystem": "bread_sync.blobs.filesystem", "memory": "bread_sync.blobs.memory"}
URL_PREFIX = "/files/"
_ID = re.compile(r"[0-9a-f]{32}")
#: What a file whose media type says nothing (or nothing valid) is served as.
OPAQUE = "application/octet-stream"
#: A media type as RFC 9110 spells one: type/subtype, then ;-separated parameters whose values
#: are tokens or quoted strings (no CR, LF or other control character anywhere).
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[^"\\\x00-\x1f\x7f]|\\[^\x00-\x1f\x7f])*"'
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*")


class BlobStore(Protocol):
    def put(self, data: bytes, mime_type: str, name: str | None = None, owner: str | None = None) -> dict[str, Any]: ...

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        """The file's bytes and its metadata, or None when there is no such file."""

    # Optional, found with ``getattr`` (the built-in stores have both):
    # ``meta(url) -> dict | None``: the file's metadata alone, as ``get`` gives it, its bytes
    # unread; None when there is no such file. Asked through :func:`meta_of`, which reads the
    # whole file through ``get`` for a store without it.
    # For retention (``bread-sync gc``):
    # ``purge(before: float, keep: Collection[str] = (), dry_run: bool = False) -> int`` deletes
    # the files stored before ``before`` (epoch seconds) whose url is not in ``keep``.


def is_media_type(text: Any) -> bool:
    """Whether ``text`` is a media type (``image/png``, ``text/plain; charset=utf-8``) that can
    be sent back in a ``Content-Type`` header."""
    return isinstance(text, str) and _MEDIA_TYPE.fullmatch(text) is not None


def media_type_or_opaque(text: Any) -> str:
    """``text`` when it is a media type, else :data:`OPAQUE`."""
    return text if is_media_type(text) else OPAQUE


def base_type(media_type: str) -> str:
    """A media type without its parameters, lowercased: ``Image/PNG; x=y`` -> ``image/png``."""
    return media_type.split(";", 1)[0].strip().lower()


def configured(blob_store: Any, message: str = "no blob store is configured") -> Any:
    """``blob_store``, or ``BLOB_STORE_NOT_CONFIGURED`` when there is none."""
    if blob_store is None:
        raise BreadError(BLOB_STORE_NOT_CONFIGURED, message)
    return blob_store


def meta_of(blob_store: Any, url: str) -> dict[str, Any] | None:
    """The metadata of the file ``url`` names, None when there is none: ``blob_store.meta``, or
    ``get``'s for a store without it (a user's store of the ``put``/``get`` contract)."""
    meta = getattr(blob_store, "meta", None)
    if callable(meta):
        return meta(url)
    found = blob_store.get(url)
    return None if found is None else found[1]


def blob_id(url: str) -> str | None:
    """The id in a blob url; None for anything that is not one of ours (``..``, slashes, NUL)."""
    candidate = url[len(URL_PREFIX) :] if url.startswith(URL_PREFIX) else url
    return candidate if _ID.fullmatch(candidate) else None
