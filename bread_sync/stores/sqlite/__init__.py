"""The SQLite store, the default: the store itself (database.py), its schema's numbered
migrations, the busy waits that keep a locked file from stalling a gevent worker, the WAL
checkpointer and the purge."""

from .database import SQLiteStore, store

__all__ = ["SQLiteStore", "store"]
