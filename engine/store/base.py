"""The snapshot-store interface and the record encoding every implementation shares.

A store maps a session id to a *set* of snapshot records with a revision number. Each save
replaces the whole set atomically and increments the revision (revision 0 = nothing stored yet);
``expected_revision`` turns a save into a compare-and-set, so two processes assembling the same
session cannot silently overwrite each other (``SNAPSHOT_STORE_CONFLICT``). Older revisions may be
kept as history; only the newest is ever read back for assembly.

Records are stored as their pinned JSON text with a SHA-256 digest each, and the set carries the
digest of its ordered record digests: a reader can prove that what it got back is exactly what
was committed (``SNAPSHOT_STORE_CORRUPT`` otherwise), whatever the database underneath.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import TemplateError

__all__ = ["MAX_SESSION_ID", "SnapshotSet", "SnapshotStore", "check_session_id", "decode_record", "encode_records",
           "set_digest"]

MAX_SESSION_ID = 512


@dataclass(frozen=True, slots=True)
class SnapshotSet:
    """One stored revision of a session's records (``revision`` 0 and no records: nothing stored)."""

    session_id: str
    revision: int
    records: tuple[dict[str, Any], ...] = ()


@runtime_checkable
class SnapshotStore(Protocol):
    """What the assembler needs from a snapshot store. Every method is one atomic operation."""

    def load(self, session_id: str) -> SnapshotSet:
        """The newest records of ``session_id`` (revision 0, no records, when none were saved)."""
        ...

    def save(
        self, session_id: str, records: Sequence[Mapping[str, Any]], *, expected_revision: int | None = None
    ) -> SnapshotSet:
        """Replace the session's records atomically; returns the new revision.

        With ``expected_revision`` the save fails with ``SNAPSHOT_STORE_CONFLICT`` unless the
        session is still at that revision.
        """
        ...

    def history(self, session_id: str) -> list[SnapshotSet]:
        """The revisions still kept for ``session_id``, oldest first."""
        ...

    def sessions(self) -> list[str]:
        """Every session id with stored records, sorted."""
        ...

    def delete(self, session_id: str) -> None:
        """Forget a session and its history."""
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...


def check_session_id(session_id: Any) -> str:
    """A session id is a non-empty string of at most 512 characters."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > MAX_SESSION_ID:
        raise TemplateError(
            f"a session id is a non-empty string of at most {MAX_SESSION_ID} characters", code="SNAPSHOT_STORE_INVALID"
        )
    return session_id


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode_records(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each record as ``(pinned JSON text, digest)``; anything that is not JSON data is refused."""
    if not isinstance(records, Sequence) or isinstance(records, (str, bytes)):
        raise TemplateError("snapshot records must be a list", code="SNAPSHOT_STORE_INVALID")
    out = []
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise TemplateError(f"snapshot record {i} is not an object", code="SNAPSHOT_STORE_INVALID", path=f"$[{i}]")
        try:
            text = json.dumps(rec, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise TemplateError(
                f"snapshot record {i} is not JSON data ({exc})", code="SNAPSHOT_STORE_INVALID", path=f"$[{i}]"
            ) from None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise TemplateError(
                f"snapshot record {i} holds a lone surrogate", code="SNAPSHOT_STORE_INVALID", path=f"$[{i}]"
            ) from None
        out.append((text, _digest(text)))
    return out


def set_digest(digests: Sequence[str]) -> str:
    """The digest of a whole set: of its ordered record digests."""
    return _digest("\n".join(digests))


def decode_record(text: str, digest: str, where: str) -> dict[str, Any]:
    """A stored record back as data, after checking its digest."""
    if _digest(text) != digest:
        raise TemplateError(f"stored snapshot record {where} does not match its digest", code="SNAPSHOT_STORE_CORRUPT")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise TemplateError(f"stored snapshot record {where} is not JSON", code="SNAPSHOT_STORE_CORRUPT") from None
    if not isinstance(value, dict):
        raise TemplateError(f"stored snapshot record {where} is not an object", code="SNAPSHOT_STORE_CORRUPT")
    return value
