"""An in-memory snapshot store: the reference behaviour, for tests and short-lived processes.

Records are stored encoded (pinned JSON text + digest, :mod:`.base`), exactly as the database
stores them, so a caller mutating its dicts after a save cannot change what was stored, and a
load returns fresh copies.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TemplateError
from .base import SnapshotSet, check_session_id, decode_record, encode_records

__all__ = ["MemorySnapshotStore"]

_Revision = tuple[int, list[tuple[str, str]]]


class MemorySnapshotStore:
    """A :class:`~tavernbox.store.SnapshotStore` in a dict; ``keep`` revisions of history per session."""

    def __init__(self, *, keep: int = 16) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise TemplateError("keep must be a positive integer", code="SNAPSHOT_STORE_INVALID")
        self.keep = keep
        self._data: dict[str, list[_Revision]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _set(session_id: str, revision: _Revision) -> SnapshotSet:
        number, encoded = revision
        records = tuple(decode_record(t, d, f"{session_id}@{number}[{i}]") for i, (t, d) in enumerate(encoded))
        return SnapshotSet(session_id, number, records)

    def load(self, session_id: str) -> SnapshotSet:
        """The newest records of ``session_id``."""
        check_session_id(session_id)
        with self._lock:
            revisions = self._data.get(session_id)
            return self._set(session_id, revisions[-1]) if revisions else SnapshotSet(session_id, 0)

    def save(
        self, session_id: str, records: Sequence[Mapping[str, Any]], *, expected_revision: int | None = None
    ) -> SnapshotSet:
        """Replace the session's records (compare-and-set with ``expected_revision``)."""
        check_session_id(session_id)
        encoded = encode_records(records)
        with self._lock:
            revisions = self._data.setdefault(session_id, [])
            current = revisions[-1][0] if revisions else 0
            if expected_revision is not None and expected_revision != current:
                raise TemplateError(
                    f"session {session_id!r} is at revision {current}, not {expected_revision}",
                    code="SNAPSHOT_STORE_CONFLICT",
                )
            revisions.append((current + 1, encoded))
            del revisions[: -self.keep]
            return self._set(session_id, revisions[-1])

    def history(self, session_id: str) -> list[SnapshotSet]:
        """The kept revisions, oldest first."""
        check_session_id(session_id)
        with self._lock:
            return [self._set(session_id, r) for r in self._data.get(session_id, [])]

    def sessions(self) -> list[str]:
        """Session ids with stored records, sorted."""
        with self._lock:
            return sorted(s for s, r in self._data.items() if r)

    def delete(self, session_id: str) -> None:
        """Forget a session."""
        check_session_id(session_id)
        with self._lock:
            self._data.pop(session_id, None)

    def close(self) -> None:
        """Nothing to release."""
