"""One call from a ``--database`` value to the stores a service needs.

``open_database("service.db")`` (a path, or ``sqlite:///path``) opens one SQLite file for both
the snapshot store and the asset library; ``open_database("postgresql://...")`` opens one
connection pool to PostgreSQL shared by both. Either way the schema is migrated on open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .base import SnapshotStore
from .library import AssetLibrary

__all__ = ["Storage", "open_database"]


@dataclass
class Storage:
    """The snapshot store and the library on one database; ``backend`` is ``"sqlite"`` or ``"postgresql"``."""

    backend: str
    where: str
    snapshots: SnapshotStore
    library: AssetLibrary
    _pool: Any = None

    def close(self) -> None:
        """Close both stores (and the shared pool)."""
        self.snapshots.close()
        self.library.close()
        if self._pool is not None:
            self._pool.close()


def open_database(target: str | os.PathLike[str]) -> Storage:
    """Open (and migrate) the database ``target`` names: a PostgreSQL URL, else an SQLite file path."""
    from .postgres import is_postgres_url

    if is_postgres_url(target):
        from .postgres import PostgresDatabase, PostgresLibrary, PostgresSnapshotStore

        pool = PostgresDatabase(str(target))
        return Storage("postgresql", pool.where, PostgresSnapshotStore(pool), PostgresLibrary(pool), pool)
    from .sqlite import SQLiteLibrary, SQLiteSnapshotStore

    path = str(target)
    if path.startswith("sqlite:///"):
        path = path[len("sqlite:///") - 1:] if path.startswith("sqlite:////") else path[len("sqlite:///"):]
    snapshots = SQLiteSnapshotStore(path)
    try:
        library = SQLiteLibrary(path)
    except BaseException:
        snapshots.close()
        raise
    return Storage("sqlite", path, snapshots, library)
