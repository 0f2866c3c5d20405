"""The config of the browser tests' server whose files live elsewhere
(``BREAD_CONFIG=tests.browser.hostile_files_config:config``): auth on, as auth_config.py, and a
blob store whose every file names the uri in ``$HOSTILE_FILE_URI``, as a remote agent's or a
store of another's making may: what the page must never send its key to."""

from __future__ import annotations

import os

from bread_sync.blobs.memory import MemoryBlobStore

from .auth_config import config as auth_config


class ElsewhereBlobStore(MemoryBlobStore):
    def put(self, data, mime_type, name=None):
        return {**super().put(data, mime_type, name), "url": os.environ["HOSTILE_FILE_URI"]}


def config():
    return auth_config().model_copy(update={"blob_store": ElsewhereBlobStore()})
