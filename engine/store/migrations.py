"""Versioned schema migrations for the SQLite and PostgreSQL stores.

Why one list for both databases: a database opened by an older tavernbox must be upgraded in
place, and one opened by a newer tavernbox must be refused rather than misread. Each
:class:`Migration` has a number, a name and the statements that take a database from the
previous version to it, once per dialect; both dialects always describe the same tables.

SQLite keeps its version in ``PRAGMA user_version`` (version 1 is the snapshot store's original
schema, so existing files upgrade without a copy). PostgreSQL keeps a ``schema_migrations``
table with one row per applied migration; concurrent service processes starting against one
database take a transaction-scoped advisory lock, so exactly one of them applies each migration.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from ..errors import TemplateError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "migrate_postgres", "migrate_sqlite"]


@dataclass(frozen=True, slots=True)
class Migration:
    """The statements that bring a database from ``version - 1`` to ``version``."""

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "snapshot sets",
        sqlite=(
            "CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, revision INTEGER NOT NULL) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS revisions (session_id TEXT NOT NULL, revision INTEGER NOT NULL, count INTEGER "
            "NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (session_id, revision)) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS records (session_id TEXT NOT NULL, revision INTEGER NOT NULL, position INTEGER "
            "NOT NULL, body TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (session_id, revision, position)) "
            "WITHOUT ROWID",
        ),
        postgres=(
            "CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, revision BIGINT NOT NULL)",
            "CREATE TABLE IF NOT EXISTS revisions (session_id TEXT NOT NULL, revision BIGINT NOT NULL, count INTEGER "
            "NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (session_id, revision))",
            "CREATE TABLE IF NOT EXISTS records (session_id TEXT NOT NULL, revision BIGINT NOT NULL, position INTEGER "
            "NOT NULL, body TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (session_id, revision, position))",
        ),
    ),
    Migration(
        2,
        "asset library",
        sqlite=(
            "CREATE TABLE IF NOT EXISTS assets (kind TEXT NOT NULL, id TEXT NOT NULL, revision INTEGER NOT NULL, "
            "deleted INTEGER NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS asset_revisions (kind TEXT NOT NULL, id TEXT NOT NULL, revision INTEGER NOT "
            "NULL, body TEXT, digest TEXT, updated_at TEXT NOT NULL, PRIMARY KEY (kind, id, revision)) WITHOUT ROWID",
        ),
        postgres=(
            "CREATE TABLE IF NOT EXISTS assets (kind TEXT NOT NULL, id TEXT NOT NULL, revision BIGINT NOT NULL, "
            "deleted BOOLEAN NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (kind, id))",
            "CREATE TABLE IF NOT EXISTS asset_revisions (kind TEXT NOT NULL, id TEXT NOT NULL, revision BIGINT NOT "
            "NULL, body TEXT, digest TEXT, updated_at TEXT NOT NULL, PRIMARY KEY (kind, id, revision))",
        ),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version

#: Any constant: the advisory-lock key every tavernbox process takes while migrating PostgreSQL.
_PG_MIGRATION_LOCK = 0x7461766572


def _too_new(version: int, where: str) -> TemplateError:
    return TemplateError(
        f"the database {where} has schema {version}, newer than this tavernbox ({SCHEMA_VERSION})",
        code="SNAPSHOT_STORE_UNAVAILABLE",
    )


def migrate_sqlite(db: sqlite3.Connection, where: str) -> int:
    """Bring an open SQLite connection (autocommit mode) to :data:`SCHEMA_VERSION`; returns it.

    All pending migrations run in one ``BEGIN IMMEDIATE`` transaction, re-reading the version
    under the write lock, so two processes opening one new file cannot both apply them.
    """
    if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return SCHEMA_VERSION
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise _too_new(version, where)
        for migration in MIGRATIONS:
            if migration.version > version:
                for statement in migration.sqlite:
                    db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return SCHEMA_VERSION


def migrate_postgres(conn: Any, where: str) -> int:
    """Bring a PostgreSQL database (a psycopg 3 connection) to :data:`SCHEMA_VERSION`; returns it."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise _too_new(version, where)
        for migration in MIGRATIONS:
            if migration.version > version:
                for statement in migration.postgres:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
    return SCHEMA_VERSION
