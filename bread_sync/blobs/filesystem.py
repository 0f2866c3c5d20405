"""Blobs as files in a folder (by default ``<instance>/files``), shared by every process on the host.
The folder is made with the first file: a ``Bread`` that stores none writes nothing to disk."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

from . import URL_PREFIX, blob_id


class FilesystemBlobStore:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def put(self, data: bytes, mime_type: str, name: str | None = None, owner: str | None = None) -> dict[str, Any]:
        key = uuid.uuid4().hex
        self.root.mkdir(parents=True, exist_ok=True)
        meta = {"url": URL_PREFIX + key, "mimeType": mime_type, "name": name, "size": len(data), "owner": owner}
        # Data first, metadata last: a file whose metadata exists is complete.
        _write_atomically(self.root / key, data)
        _write_atomically(self.root / f"{key}.json", json.dumps(meta).encode())
        return meta

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        key = blob_id(url)  # only our own ids: no path reaches the file system
        if key is None:
            return None
        meta = self._meta(key)
        return None if meta is None else ((self.root / key).read_bytes(), meta)

    def meta(self, url: str) -> dict[str, Any] | None:
        """The metadata file alone: the data file is never opened."""
        key = blob_id(url)
        return None if key is None else self._meta(key)

    def purge(self, before: float, keep: Collection[str] = (), dry_run: bool = False) -> int:
        """Delete the files stored before ``before`` (epoch seconds) whose url is not in
        ``keep``, with any leftover of an interrupted write; how many files."""
        purged = set()
        if not self.root.is_dir():
            return 0  # nothing stored yet
        # Metadata first: a file without it is already gone for get(), never half there.
        for path in sorted(self.root.iterdir(), key=lambda p: p.suffix != ".json"):
            key = path.name.split(".", 1)[0]
            if blob_id(key) is None or URL_PREFIX + key in keep or _mtime(path) >= before:
                continue
            if path.suffix == ".json":
                purged.add(key)
            if not dry_run:
                path.unlink(missing_ok=True)
        return len(purged)

    def _meta(self, key: str) -> dict[str, Any] | None:
        path = self.root / f"{key}.json"
        return json.loads(path.read_bytes()) if path.is_file() else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("inf")  # removed meanwhile: nothing to purge


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, path)


def store(root: str | os.PathLike[str]) -> FilesystemBlobStore:
    return FilesystemBlobStore(root)
