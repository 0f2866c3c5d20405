"""Blobs as files in a folder (by default ``<instance>/files``), shared by every process on the host."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from . import URL_PREFIX, blob_id


class FilesystemBlobStore:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]:
        key = uuid.uuid4().hex
        meta = {"url": URL_PREFIX + key, "mimeType": mime_type, "name": name, "size": len(data)}
        # Data first, metadata last: a file whose metadata exists is complete.
        _write_atomically(self.root / key, data)
        _write_atomically(self.root / f"{key}.json", json.dumps(meta).encode())
        return meta

    def get(self, url: str) -> tuple[bytes, dict[str, Any]] | None:
        key = blob_id(url)  # only our own ids: no path reaches the file system
        if key is None or not (self.root / f"{key}.json").is_file():
            return None
        meta = json.loads((self.root / f"{key}.json").read_bytes())
        return (self.root / key).read_bytes(), meta


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, path)


def store(root: str | os.PathLike[str]) -> FilesystemBlobStore:
    return FilesystemBlobStore(root)
