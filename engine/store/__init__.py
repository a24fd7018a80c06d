"""Persistence of retained snapshot records between requests.

The assembler hands every result's ``snapshots`` to the next request of the same session; a
:class:`SnapshotStore` keeps them in between. :class:`SQLiteSnapshotStore` is the default (one
file, one transaction per save, nothing lost when the process is killed mid-write);
:class:`MemorySnapshotStore` serves tests and short-lived processes. Both implement the
:class:`SnapshotStore` protocol, which a server-grade database can implement later
(``tests/test_store_contract.py`` is the behaviour such an implementation must pass).
"""

from __future__ import annotations

from .base import SnapshotSet, SnapshotStore, check_session_id, encode_records
from .memory import MemorySnapshotStore
from .sqlite import SQLiteSnapshotStore, open_store

__all__ = [
    "MemorySnapshotStore",
    "SQLiteSnapshotStore",
    "SnapshotSet",
    "SnapshotStore",
    "check_session_id",
    "encode_records",
    "open_store",
]
