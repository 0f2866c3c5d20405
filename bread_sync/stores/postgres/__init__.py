"""The Postgres store, for replicas on several hosts sharing one database: the store itself
(database.py), its schema's numbered migrations and the purge. Needs the ``postgres`` extra."""

from .database import PostgresStore, store

__all__ = ["PostgresStore", "store"]
