"""Huey's Postgres storage, its tables made under an advisory lock.

Huey makes its tables with ``CREATE TABLE IF NOT EXISTS`` when a storage is made, and Postgres's
``IF NOT EXISTS`` does not hold against another session making the same table at that moment:
of web processes and workers started together against an empty database, all but one failed
with a unique violation on ``pg_type`` (``huey_kv``) and the process died at boot. Here the
tables are made in the same one transaction, after an advisory lock that makes the processes
take turns, as the store's migrations do (stores/postgres/migrations.py): the first makes them,
the others find them. Only the storage's start-up takes the lock; no task does.
"""

from __future__ import annotations

from huey import PostgresHuey
from huey.storage import PostgresStorage

#: The advisory lock key that serialises the making of Huey's tables (any fixed bigint: "breadq"
#: in ASCII), apart from the store's migrations' so that neither waits for the other.
QUEUE_TABLES_LOCK = 0x627265616471


class LockedSchemaPostgresStorage(PostgresStorage):
    def initialize_schema(self) -> None:
        # Huey's own step, the lock first: the transaction holds it until its tables commit.
        with self.db(commit=True, close=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(%s)", [QUEUE_TABLES_LOCK])
            for sql in self.ddl:
                curs.execute(sql)


class LockedSchemaPostgresHuey(PostgresHuey):
    storage_class = LockedSchemaPostgresStorage
