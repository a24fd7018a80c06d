"""Persistence of retained snapshot records between requests.

The assembler hands every result's ``snapshots`` to the next request of the same session; a
:class:`SnapshotStore` keeps them in between. :class:`SQLiteSnapshotStore` is the default (one
file, one transaction per save, nothing lost when the process is killed mid-write);
:class:`MemorySnapshotStore` serves tests and short-lived processes. Both implement the
:class:`SnapshotStore` protocol, which a server-grade database can implement later
(``tests/test_store_contract.py`` is the behaviour such an implementation must pass).
:class:`PostgresSnapshotStore` is that server database (PostgreSQL, psycopg 3).

The same databases hold the service's asset library (:mod:`.library`: presets, cards, books...
with revisions and conditional writes), in SQLite (:class:`SQLiteLibrary`) or PostgreSQL
(:class:`PostgresLibrary`); :func:`open_database` opens both from one ``--database`` value, and
:mod:`.migrations` versions the schema of both backends.
"""

from __future__ import annotations

from .base import SnapshotSet, SnapshotStore, check_session_id, encode_records
from .database import Storage, open_database
from .library import KINDS, AssetEntry, AssetLibrary
from .memory import MemorySnapshotStore
from .postgres import PostgresLibrary, PostgresSnapshotStore
from .sqlite import SQLiteLibrary, SQLiteSnapshotStore, open_store

__all__ = [
    "KINDS",
    "AssetEntry",
    "AssetLibrary",
    "PostgresLibrary",
    "PostgresSnapshotStore",
    "SQLiteLibrary",
    "Storage",
    "open_database",
    "MemorySnapshotStore",
    "SQLiteSnapshotStore",
    "SnapshotSet",
    "SnapshotStore",
    "check_session_id",
    "encode_records",
    "open_store",
]
