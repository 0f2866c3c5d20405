"""The blob store seam: where generated and uploaded files live.

A blob store module ``blobs/<name>.py`` exports ``store(**opts)``. ``put`` returns
``{"url", "mimeType", "name", "size"}``; ``url`` is ``/files/<id>``, the route that serves it.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

BLOB_STORES = {"filesystem": "bread_sync.blobs.filesystem", "memory": "bread_sync.blobs.memory"}
URL_PREFIX = "/files/"
_ID = re.compile(r"^[0-9a-f]{32}$")


class BlobStore(Protocol):
    def put(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]: ...

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        """The file's bytes and its metadata, or None when there is no such file."""

    # Optional, for retention (``bread-sync gc``), found with ``getattr``:
    # ``purge(before: float, keep: Collection[str] = (), dry_run: bool = False) -> int`` deletes
    # the files stored before ``before`` (epoch seconds) whose url is not in ``keep``.


def blob_id(url: str) -> str | None:
    """The id in a blob url; None for anything that is not one of ours (``..``, slashes, NUL)."""
    candidate = url[len(URL_PREFIX) :] if url.startswith(URL_PREFIX) else url
    return candidate if _ID.match(candidate) else None
