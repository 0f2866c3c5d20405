"""Blobs in a dict: the reference implementation and the tests' double."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from . import URL_PREFIX, blob_id


class MemoryBlobStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[str, tuple[bytes, dict[str, Any]]] = {}

    def put(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]:
        key = uuid.uuid4().hex
        meta = {"url": URL_PREFIX + key, "mimeType": mime_type, "name": name, "size": len(data)}
        with self._lock:
            self._blobs[key] = (bytes(data), meta)
        return dict(meta)

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        key = blob_id(url)
        with self._lock:
            found = self._blobs.get(key) if key else None
        return (found[0], dict(found[1])) if found else None


def store() -> MemoryBlobStore:
    return MemoryBlobStore()
