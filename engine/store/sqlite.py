"""The default snapshot store: one SQLite file.

Why SQLite: one file beside the user's chats, no server, and atomic commits. Every save is one
``BEGIN IMMEDIATE`` transaction (the new revision's rows, the session's pointer, the pruning of
old revisions), so a process killed at any instruction leaves either the old revision or the new
one, never a mixture: SQLite's write-ahead log (default) or rollback journal restores the last
committed state when the file is next opened. ``synchronous=FULL`` additionally makes a commit
durable against power loss, not only against a killed process.

Each record is stored as its pinned JSON text with a digest, and each revision with the digest of
its record digests (:mod:`.base`), so :meth:`SQLiteSnapshotStore.load` proves it returns what was
committed and :meth:`SQLiteSnapshotStore.check` can audit the whole file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ..errors import TemplateError
from .base import SnapshotSet, SnapshotStore, check_session_id, decode_record, encode_records, set_digest
from .library import MAX_LIST, AssetEntry, Heads, RevisionWrites, check_kind, check_name, check_write, decode_value, not_found, now_iso
from .memory import MemorySnapshotStore
from .migrations import SCHEMA_VERSION, migrate_sqlite

__all__ = ["SCHEMA_VERSION", "SQLiteLibrary", "SQLiteSnapshotStore", "open_store"]


def _unavailable(exc: BaseException, what: str) -> TemplateError:
    code = "SNAPSHOT_STORE_CORRUPT" if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc) else (
        "SNAPSHOT_STORE_UNAVAILABLE"
    )
    return TemplateError(f"snapshot store: {what} failed ({exc})", code=code)

def _open(path: Path, journal: str, timeout: float) -> sqlite3.Connection:
    """The database file opened for autocommit use from any thread, journalled as asked, migrated.

    The snapshot store and the asset library share one file and open it the same way.
    """
    try:
        db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _unavailable(exc, f"opening {path}") from None
    try:
        db.execute(f"PRAGMA journal_mode={'WAL' if journal == 'wal' else 'DELETE'}")
        db.execute("PRAGMA synchronous=FULL")
        migrate_sqlite(db, str(path))
    except TemplateError:
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        raise _unavailable(exc, f"opening {path}") from None
    return db



class SQLiteSnapshotStore:
    """A :class:`~tavernbox.store.SnapshotStore` in one SQLite file.

    ``journal`` is ``"wal"`` (default: readers never block the writer) or ``"rollback"`` (a
    classic rollback journal, for file systems without shared memory); ``keep`` is the number of
    revisions kept per session; ``timeout`` how long to wait for another writer's lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        journal: Literal["wal", "rollback"] = "wal",
        keep: int = 16,
        timeout: float = 10.0,
    ) -> None:
        if journal not in ("wal", "rollback"):
            raise TemplateError("journal must be 'wal' or 'rollback'", code="SNAPSHOT_STORE_INVALID")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise TemplateError("keep must be a positive integer", code="SNAPSHOT_STORE_INVALID")
        self.path = Path(path)
        self.keep = keep
        self._lock = threading.Lock()
        self._db = _open(self.path, journal, timeout)

    # -- reading ---------------------------------------------------------------------------------

    def _read(self, session_id: str, revision: int) -> SnapshotSet:
        row = self._db.execute(
            "SELECT count, digest FROM revisions WHERE session_id = ? AND revision = ?", (session_id, revision)
        ).fetchone()
        where = f"{session_id}@{revision}"
        if row is None:
            raise TemplateError(f"stored revision {where} is missing", code="SNAPSHOT_STORE_CORRUPT")
        rows = self._db.execute(
            "SELECT position, body, digest FROM records WHERE session_id = ? AND revision = ? ORDER BY position",
            (session_id, revision),
        ).fetchall()
        if [r[0] for r in rows] != list(range(row[0])) or set_digest([r[2] for r in rows]) != row[1]:
            raise TemplateError(f"stored revision {where} is incomplete or reordered", code="SNAPSHOT_STORE_CORRUPT")
        records = tuple(decode_record(body, digest, f"{where}[{pos}]") for pos, body, digest in rows)
        return SnapshotSet(session_id, revision, records)

    def load(self, session_id: str) -> SnapshotSet:
        """The newest records of ``session_id`` (one consistent read)."""
        check_session_id(session_id)
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    row = self._db.execute("SELECT revision FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
                    return self._read(session_id, row[0]) if row else SnapshotSet(session_id, 0)
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "load") from None

    def history(self, session_id: str) -> list[SnapshotSet]:
        """The kept revisions of ``session_id``, oldest first."""
        check_session_id(session_id)
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    numbers = self._db.execute(
                        "SELECT revision FROM revisions WHERE session_id = ? ORDER BY revision", (session_id,)
                    ).fetchall()
                    return [self._read(session_id, n) for (n,) in numbers]
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "history") from None

    def sessions(self) -> list[str]:
        """Session ids with stored records, sorted."""
        with self._lock:
            try:
                return [r[0] for r in self._db.execute("SELECT session_id FROM sessions ORDER BY session_id")]
            except sqlite3.Error as exc:
                raise _unavailable(exc, "sessions") from None

    # -- writing ---------------------------------------------------------------------------------

    def save(
        self, session_id: str, records: Sequence[Mapping[str, Any]], *, expected_revision: int | None = None
    ) -> SnapshotSet:
        """Replace the session's records in one transaction (compare-and-set with ``expected_revision``)."""
        check_session_id(session_id)
        encoded = encode_records(records)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    row = self._db.execute("SELECT revision FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
                    current = row[0] if row else 0
                    if expected_revision is not None and expected_revision != current:
                        raise TemplateError(
                            f"session {session_id!r} is at revision {current}, not {expected_revision}",
                            code="SNAPSHOT_STORE_CONFLICT",
                        )
                    new = current + 1
                    self._db.execute(
                        "INSERT INTO revisions (session_id, revision, count, digest) VALUES (?, ?, ?, ?)",
                        (session_id, new, len(encoded), set_digest([d for _, d in encoded])),
                    )
                    self._db.executemany(
                        "INSERT INTO records (session_id, revision, position, body, digest) VALUES (?, ?, ?, ?, ?)",
                        [(session_id, new, i, text, digest) for i, (text, digest) in enumerate(encoded)],
                    )
                    self._db.execute(
                        "INSERT INTO sessions (session_id, revision) VALUES (?, ?) "
                        "ON CONFLICT (session_id) DO UPDATE SET revision = excluded.revision",
                        (session_id, new),
                    )
                    cutoff = new - self.keep
                    self._db.execute("DELETE FROM records WHERE session_id = ? AND revision <= ?", (session_id, cutoff))
                    self._db.execute("DELETE FROM revisions WHERE session_id = ? AND revision <= ?", (session_id, cutoff))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "save") from None
        return SnapshotSet(session_id, new, tuple(decode_record(t, d, f"{session_id}@{new}") for t, d in encoded))

    def delete(self, session_id: str) -> None:
        """Forget a session and its history (one transaction)."""
        check_session_id(session_id)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for table in ("records", "revisions", "sessions"):
                        self._db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "delete") from None

    # -- maintenance -----------------------------------------------------------------------------

    def check(self) -> list[str]:
        """Audit the file: SQLite's own integrity check, then every kept revision's digests.

        Returns the problems found (empty when the store is sound).
        """
        problems: list[str] = []
        with self._lock:
            try:
                result = [r[0] for r in self._db.execute("PRAGMA integrity_check")]
                if result != ["ok"]:
                    problems.extend(result)
                self._db.execute("BEGIN")
                try:
                    pointers = self._db.execute("SELECT session_id, revision FROM sessions").fetchall()
                    for session_id, revision in pointers:
                        if self._db.execute(
                            "SELECT 1 FROM revisions WHERE session_id = ? AND revision = ?", (session_id, revision)
                        ).fetchone() is None:
                            problems.append(f"session {session_id!r} points at missing revision {revision}")
                    for session_id, revision in self._db.execute("SELECT session_id, revision FROM revisions").fetchall():
                        try:
                            self._read(session_id, revision)
                        except TemplateError as exc:
                            problems.append(exc.message)
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                problems.append(f"sqlite: {exc}")
        return problems

    def close(self) -> None:
        """Close the connection (a WAL file is checkpointed by SQLite on the last close)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteSnapshotStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SQLiteLibrary(RevisionWrites):
    """An :class:`~tavernbox.store.library.AssetLibrary` in one SQLite file (the snapshot store's file).

    Every write is one ``BEGIN IMMEDIATE`` transaction: the condition check, the new revision's
    row and the asset's pointer commit together or not at all, and SQLite's write lock makes the
    check exclusive across threads and processes sharing the file. History is kept in full
    (assembly records name the revisions they used).
    """

    def __init__(self, path: str | os.PathLike[str], *, journal: Literal["wal", "rollback"] = "wal",
                 timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = _open(self.path, journal, timeout)

    def get(self, kind: str, asset_id: str, revision: int | None = None) -> AssetEntry:
        """The current revision (or ``revision`` from the history)."""
        check_name(kind, asset_id)
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    if revision is None:
                        head = self._db.execute("SELECT revision, deleted FROM assets WHERE kind = ? AND id = ?",
                                                (kind, asset_id)).fetchone()
                        if head is None or head[1]:
                            raise not_found(kind, asset_id)
                        number = head[0]
                    else:
                        number = revision
                    row = self._db.execute(
                        "SELECT body, digest, updated_at FROM asset_revisions WHERE kind = ? AND id = ? AND revision = ?",
                        (kind, asset_id, number)).fetchone()
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "library read") from None
        if row is None or row[0] is None:
            raise not_found(kind, asset_id, revision)
        data = decode_value(row[0], row[1], f"{kind}/{asset_id}@{number}")
        return AssetEntry(kind, asset_id, number, row[1], row[2], False, data)

    def _write(self, kind: str, asset_id: str, encoded: tuple[str, str] | None, if_match: int | None,
               if_absent: bool) -> AssetEntry:
        stamp = now_iso()
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    head = self._db.execute("SELECT revision, deleted FROM assets WHERE kind = ? AND id = ?",
                                            (kind, asset_id)).fetchone()
                    current, deleted = (head[0], bool(head[1])) if head else (0, False)
                    if encoded is None and (current == 0 or deleted):
                        raise not_found(kind, asset_id)
                    check_write(kind, asset_id, current, deleted, if_match, if_absent)
                    new = current + 1
                    body, digest = encoded if encoded is not None else (None, None)
                    self._db.execute(
                        "INSERT INTO asset_revisions (kind, id, revision, body, digest, updated_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)", (kind, asset_id, new, body, digest, stamp))
                    self._db.execute(
                        "INSERT INTO assets (kind, id, revision, deleted, updated_at) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (kind, id) DO UPDATE SET revision = excluded.revision, "
                        "deleted = excluded.deleted, updated_at = excluded.updated_at",
                        (kind, asset_id, new, int(encoded is None), stamp))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "library write") from None
        return AssetEntry(kind, asset_id, new, digest, stamp, encoded is None)

    def list(self, kind: str, *, after: str | None = None, limit: int = MAX_LIST) -> list[AssetEntry]:
        """Live assets of ``kind`` by id, without data."""
        check_kind(kind)
        limit = max(1, min(int(limit), MAX_LIST))
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT a.id, a.revision, r.digest, a.updated_at FROM assets a JOIN asset_revisions r "
                    "ON r.kind = a.kind AND r.id = a.id AND r.revision = a.revision "
                    "WHERE a.kind = ? AND a.deleted = 0 AND a.id > ? ORDER BY a.id LIMIT ?",
                    (kind, after or "", limit)).fetchall()
            except sqlite3.Error as exc:
                raise _unavailable(exc, "library list") from None
        return [AssetEntry(kind, i, rev, digest, stamp) for i, rev, digest, stamp in rows]

    def heads(self, items: Sequence[tuple[str, str, int | None]]) -> Heads:
        """The current (or kept) revision and digest of each item, in one read transaction (no bodies read)."""
        out: Heads = []
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    for kind, asset_id, revision in items:
                        if revision is None:
                            row = self._db.execute(
                                "SELECT a.revision, r.digest FROM assets a JOIN asset_revisions r ON r.kind = a.kind "
                                "AND r.id = a.id AND r.revision = a.revision WHERE a.kind = ? AND a.id = ? "
                                "AND a.deleted = 0", (kind, asset_id)).fetchone()
                        else:
                            row = self._db.execute(
                                "SELECT revision, digest FROM asset_revisions WHERE kind = ? AND id = ? "
                                "AND revision = ? AND body IS NOT NULL", (kind, asset_id, revision)).fetchone()
                        out.append((int(row[0]), row[1]) if row is not None else None)
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _unavailable(exc, "library read") from None
        return out

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteLibrary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(target: str | os.PathLike[str] | None = None, **options: Any) -> SnapshotStore:
    """A store for ``target``: a path means SQLite (the default); ``None`` or ``":memory:"`` memory."""
    if target is None or str(target) == ":memory:":
        return MemorySnapshotStore(**{k: v for k, v in options.items() if k == "keep"})
    return SQLiteSnapshotStore(target, **options)
