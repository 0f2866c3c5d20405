"""Blobs in a dict: the reference implementation and the tests' double."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection
from typing import Any

from . import URL_PREFIX, blob_id


class MemoryBlobStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[str, tuple[bytes, dict[str, Any]]] = {}
        self._stored_at: dict[str, float] = {}

    def put(self, data: bytes, mime_type: str, name: str | None = None, owner: str | None = None) -> dict[str, Any]:
        key = uuid.uuid4().hex
        meta = {"url": URL_PREFIX + key, "mimeType": mime_type, "name": name, "size": len(data), "owner": owner}
        with self._lock:
            self._blobs[key] = (bytes(data), meta)
            self._stored_at[key] = time.time()
        return dict(meta)

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        found = self._found(url)
        return (found[0], dict(found[1])) if found else None

    def meta(self, url: str) -> dict[str, Any] | None:
        found = self._found(url)
        return dict(found[1]) if found else None

    def purge(self, before: float, keep: Collection[str] = (), dry_run: bool = False) -> int:
        """Delete the files stored before ``before`` (epoch seconds) whose url is not in ``keep``."""
        with self._lock:
            doomed = [k for k, at in self._stored_at.items() if at < before and URL_PREFIX + k not in keep]
            if not dry_run:
                for key in doomed:
                    del self._blobs[key], self._stored_at[key]
        return len(doomed)

    def _found(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        key = blob_id(url)
        with self._lock:
            return self._blobs.get(key) if key else None


def store() -> MemoryBlobStore:
    return MemoryBlobStore()
