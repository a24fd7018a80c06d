"""PostgreSQL storage: the snapshot store and the asset library on a server database (psycopg 3).

Why a server database: several service processes, on one machine or many, share one state.
Renders are stateless, so scaling out is starting more processes against the same database.
Each operation is one transaction on a connection taken from a small per-process pool.
Conditional writes stay exclusive across processes because every write first takes a
transaction-scoped advisory lock on its key (``pg_advisory_xact_lock``), then re-reads the
current revision; a second writer on the same key waits for the first to commit and then sees
its revision. Records and documents carry the same digests as in SQLite (:mod:`.base`,
:mod:`.library`), checked on every read.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import TemplateError
from .base import SnapshotSet, check_session_id, decode_record, encode_records, set_digest
from .library import MAX_LIST, AssetEntry, Heads, RevisionWrites, check_kind, check_name, check_write, decode_value, not_found, now_iso
from .migrations import migrate_postgres

__all__ = ["PostgresDatabase", "PostgresLibrary", "PostgresSnapshotStore", "is_postgres_url"]


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def _lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for a row key (stable across processes and versions)."""
    raw = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(raw, "big", signed=True)


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, tail = url.partition("@")
    if not sep:
        return url
    scheme, _, cred = head.partition("://")
    return f"{scheme}://{cred.split(':', 1)[0]}@{tail}"


class PostgresDatabase:
    """A small pool of psycopg connections to one database, migrated on open.

    ``size`` connections at most are opened (lazily); a caller waits up to ``timeout`` seconds
    for one to be free. A connection that fails is discarded, not returned to the pool.
    """

    def __init__(self, url: str, *, size: int = 4, timeout: float = 30.0) -> None:
        from ..extras import require_extra

        require_extra("postgres", "a PostgreSQL database")
        import psycopg

        self._psycopg = psycopg
        self.url = url
        self.where = _redact(url)
        self.size = size
        self.timeout = timeout
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._count = 0
        self._count_lock = threading.Lock()
        self._closed = False
        with self.connection() as conn:
            migrate_postgres(conn, self.where)

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True, connect_timeout=int(self.timeout))
        except self._psycopg.Error as exc:
            raise self.unavailable(exc, "connecting") from None

    def unavailable(self, exc: BaseException, what: str) -> TemplateError:
        """The ``SNAPSHOT_STORE_UNAVAILABLE`` error for a database failure (password never shown)."""
        message = str(exc).replace(self.url, self.where).strip().splitlines()[0] if str(exc) else type(exc).__name__
        return TemplateError(f"database {self.where}: {what} failed ({message})", code="SNAPSHOT_STORE_UNAVAILABLE")

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection for one operation (autocommit; use ``conn.transaction()`` for atomicity)."""
        if self._closed:
            raise TemplateError(f"database {self.where} is closed", code="SNAPSHOT_STORE_UNAVAILABLE")
        conn = None
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            with self._count_lock:
                grow = self._count < self.size
                if grow:
                    self._count += 1
            if grow:
                try:
                    conn = self._connect()
                except BaseException:
                    with self._count_lock:
                        self._count -= 1
                    raise
            else:
                try:
                    conn = self._idle.get(timeout=self.timeout)
                except queue.Empty:
                    raise TemplateError(f"database {self.where}: no free connection", code="SNAPSHOT_STORE_UNAVAILABLE") from None
        healthy = False
        try:
            yield conn
            healthy = True
        except TemplateError:
            healthy = not conn.closed and conn.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE
            raise
        except self._psycopg.Error as exc:
            raise self.unavailable(exc, "a query") from None
        finally:
            if healthy and not self._closed and not conn.closed:
                self._idle.put(conn)
            else:
                with self._count_lock:
                    self._count -= 1
                conn.close()

    def close(self) -> None:
        """Close every idle connection; connections in use close when returned."""
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class PostgresSnapshotStore:
    """A :class:`~tavernbox.store.SnapshotStore` in PostgreSQL (same contract as SQLite)."""

    def __init__(self, database: PostgresDatabase | str, *, keep: int = 16) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise TemplateError("keep must be a positive integer", code="SNAPSHOT_STORE_INVALID")
        self._owns = isinstance(database, str)
        self.db = PostgresDatabase(database) if isinstance(database, str) else database
        self.keep = keep

    def _read(self, conn: Any, session_id: str, revision: int) -> SnapshotSet:
        where = f"{session_id}@{revision}"
        row = conn.execute("SELECT count, digest FROM revisions WHERE session_id = %s AND revision = %s",
                           (session_id, revision)).fetchone()
        if row is None:
            raise TemplateError(f"stored revision {where} is missing", code="SNAPSHOT_STORE_CORRUPT")
        rows = conn.execute("SELECT position, body, digest FROM records WHERE session_id = %s AND revision = %s "
                            "ORDER BY position", (session_id, revision)).fetchall()
        if [r[0] for r in rows] != list(range(row[0])) or set_digest([r[2] for r in rows]) != row[1]:
            raise TemplateError(f"stored revision {where} is incomplete or reordered", code="SNAPSHOT_STORE_CORRUPT")
        return SnapshotSet(session_id, revision, tuple(decode_record(b, d, f"{where}[{p}]") for p, b, d in rows))

    def load(self, session_id: str) -> SnapshotSet:
        """The newest records (one repeatable-read transaction)."""
        check_session_id(session_id)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT revision FROM sessions WHERE session_id = %s", (session_id,)).fetchone()
            return self._read(conn, session_id, row[0]) if row else SnapshotSet(session_id, 0)

    def save(self, session_id: str, records: Sequence[Mapping[str, Any]], *,
             expected_revision: int | None = None) -> SnapshotSet:
        """Replace the session's records in one transaction (compare-and-set with ``expected_revision``)."""
        check_session_id(session_id)
        encoded = encode_records(records)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("session", session_id),))
            row = conn.execute("SELECT revision FROM sessions WHERE session_id = %s", (session_id,)).fetchone()
            current = row[0] if row else 0
            if expected_revision is not None and expected_revision != current:
                raise TemplateError(f"session {session_id!r} is at revision {current}, not {expected_revision}",
                                    code="SNAPSHOT_STORE_CONFLICT")
            new = current + 1
            conn.execute("INSERT INTO revisions (session_id, revision, count, digest) VALUES (%s, %s, %s, %s)",
                         (session_id, new, len(encoded), set_digest([d for _, d in encoded])))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO records (session_id, revision, position, body, digest) VALUES (%s, %s, %s, %s, %s)",
                    [(session_id, new, i, text, digest) for i, (text, digest) in enumerate(encoded)])
            conn.execute("INSERT INTO sessions (session_id, revision) VALUES (%s, %s) ON CONFLICT (session_id) "
                         "DO UPDATE SET revision = excluded.revision", (session_id, new))
            cutoff = new - self.keep
            conn.execute("DELETE FROM records WHERE session_id = %s AND revision <= %s", (session_id, cutoff))
            conn.execute("DELETE FROM revisions WHERE session_id = %s AND revision <= %s", (session_id, cutoff))
        return SnapshotSet(session_id, new, tuple(decode_record(t, d, f"{session_id}@{new}") for t, d in encoded))

    def history(self, session_id: str) -> list[SnapshotSet]:
        """The kept revisions, oldest first."""
        check_session_id(session_id)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            numbers = conn.execute("SELECT revision FROM revisions WHERE session_id = %s ORDER BY revision",
                                   (session_id,)).fetchall()
            return [self._read(conn, session_id, n) for (n,) in numbers]

    def sessions(self) -> list[str]:
        """Session ids with stored records, sorted (byte order, as SQLite sorts)."""
        with self.db.connection() as conn:
            return [r[0] for r in conn.execute('SELECT session_id FROM sessions ORDER BY session_id COLLATE "C"')]

    def delete(self, session_id: str) -> None:
        """Forget a session and its history."""
        check_session_id(session_id)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("session", session_id),))
            for table in ("records", "revisions", "sessions"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))

    def close(self) -> None:
        """Close the pool when this store opened it."""
        if self._owns:
            self.db.close()


class PostgresLibrary(RevisionWrites):
    """An :class:`~tavernbox.store.library.AssetLibrary` in PostgreSQL (same contract as SQLite)."""

    def __init__(self, database: PostgresDatabase | str) -> None:
        self._owns = isinstance(database, str)
        self.db = PostgresDatabase(database) if isinstance(database, str) else database

    def get(self, kind: str, asset_id: str, revision: int | None = None) -> AssetEntry:
        """The current revision (or ``revision`` from the history)."""
        check_name(kind, asset_id)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            if revision is None:
                head = conn.execute("SELECT revision, deleted FROM assets WHERE kind = %s AND id = %s",
                                    (kind, asset_id)).fetchone()
                if head is None or head[1]:
                    raise not_found(kind, asset_id)
                number = head[0]
            else:
                number = revision
            row = conn.execute("SELECT body, digest, updated_at FROM asset_revisions WHERE kind = %s AND id = %s "
                               "AND revision = %s", (kind, asset_id, number)).fetchone()
        if row is None or row[0] is None:
            raise not_found(kind, asset_id, revision)
        return AssetEntry(kind, asset_id, number, row[1], row[2], False,
                          decode_value(row[0], row[1], f"{kind}/{asset_id}@{number}"))

    def _write(self, kind: str, asset_id: str, encoded: tuple[str, str] | None, if_match: int | None,
               if_absent: bool) -> AssetEntry:
        stamp = now_iso()
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("asset", kind, asset_id),))
            head = conn.execute("SELECT revision, deleted FROM assets WHERE kind = %s AND id = %s",
                                (kind, asset_id)).fetchone()
            current, deleted = (head[0], bool(head[1])) if head else (0, False)
            if encoded is None and (current == 0 or deleted):
                raise not_found(kind, asset_id)
            check_write(kind, asset_id, current, deleted, if_match, if_absent)
            new = current + 1
            body, digest = encoded if encoded is not None else (None, None)
            conn.execute("INSERT INTO asset_revisions (kind, id, revision, body, digest, updated_at) "
                         "VALUES (%s, %s, %s, %s, %s, %s)", (kind, asset_id, new, body, digest, stamp))
            conn.execute("INSERT INTO assets (kind, id, revision, deleted, updated_at) VALUES (%s, %s, %s, %s, %s) "
                         "ON CONFLICT (kind, id) DO UPDATE SET revision = excluded.revision, "
                         "deleted = excluded.deleted, updated_at = excluded.updated_at",
                         (kind, asset_id, new, encoded is None, stamp))
        return AssetEntry(kind, asset_id, new, digest, stamp, encoded is None)

    def list(self, kind: str, *, after: str | None = None, limit: int = MAX_LIST) -> list[AssetEntry]:
        """Live assets of ``kind`` by id (byte order), without data."""
        check_kind(kind)
        limit = max(1, min(int(limit), MAX_LIST))
        with self.db.connection() as conn:
            rows = conn.execute(
                'SELECT a.id, a.revision, r.digest, a.updated_at FROM assets a JOIN asset_revisions r '
                'ON r.kind = a.kind AND r.id = a.id AND r.revision = a.revision '
                'WHERE a.kind = %s AND NOT a.deleted AND a.id COLLATE "C" > %s ORDER BY a.id COLLATE "C" LIMIT %s',
                (kind, after or "", limit)).fetchall()
        return [AssetEntry(kind, i, rev, digest, stamp) for i, rev, digest, stamp in rows]

    def heads(self, items: Sequence[tuple[str, str, int | None]]) -> Heads:
        """The current (or kept) revision and digest of each item: one query, one round trip, no bodies read."""
        if not items:
            return []
        kinds = [k for k, _, _ in items]
        ids = [i for _, i, _ in items]
        revisions = [r for _, _, r in items]
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT q.ord, r.revision, r.digest FROM unnest(%s::text[], %s::text[], %s::bigint[]) "
                "WITH ORDINALITY AS q(kind, id, rev, ord) "
                "LEFT JOIN assets a ON a.kind = q.kind AND a.id = q.id "
                "LEFT JOIN asset_revisions r ON r.kind = q.kind AND r.id = q.id "
                "AND r.revision = COALESCE(q.rev, a.revision) AND r.body IS NOT NULL "
                "ORDER BY q.ord", (kinds, ids, revisions)).fetchall()
        return [(int(rev), digest) if rev is not None else None for _, rev, digest in rows]

    def close(self) -> None:
        """Close the pool when this library opened it."""
        if self._owns:
            self.db.close()
