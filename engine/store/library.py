"""The asset library: named JSON documents (presets, cards, books, ...) with revisions.

Why revisions: the service is shared by clients that edit the same assets. Every write creates
the next revision of one ``(kind, id)``; a write may name the revision it was based on
(``if_match``) and then fails with ``LIBRARY_CONFLICT`` unless that is still the current one, so
two clients never silently overwrite each other. A delete is a revision too (a tombstone): a
client holding the revision from before the delete cannot resurrect the asset by accident, and
an assembly record that names an old revision can still read it (history is kept).

Documents are stored as pinned JSON text with a SHA-256 digest (as snapshot records are,
:mod:`.base`), checked on every read (``LIBRARY_CORRUPT``). The SQLite and PostgreSQL
implementations pass the same contract (``tests/test_store_library.py``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import TemplateError

__all__ = [
    "KINDS",
    "MAX_LIST",
    "AssetEntry",
    "AssetLibrary",
    "Heads",
    "check_kind",
    "check_name",
    "decode_value",
    "encode_value",
    "now_iso",
]

#: The kinds of asset the library keeps (``records`` are assembly records the service writes).
KINDS = ("presets", "cards", "books", "templates", "chats", "personas", "mvu", "records")
#: An id: 1-128 characters of ``[A-Za-z0-9._-]`` starting with a letter or digit (safe in a URL path).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: The most entries one list call returns (page with ``after``).
MAX_LIST = 1000
#: What :meth:`AssetLibrary.heads` answers: per item ``(revision, digest)`` or ``None``.
Heads = list[tuple[int, str | None] | None]


@dataclass(frozen=True, slots=True)
class AssetEntry:
    """One revision of one asset. ``data`` is ``None`` for a tombstone or a listing."""

    kind: str
    id: str
    revision: int
    digest: str | None
    updated_at: str
    deleted: bool = False
    data: Any = None

    def to_dict(self, *, with_data: bool = True) -> dict[str, Any]:
        """The JSON form the service answers with."""
        out: dict[str, Any] = {"kind": self.kind, "id": self.id, "revision": self.revision, "digest": self.digest,
                               "updated_at": self.updated_at}
        if self.deleted:
            out["deleted"] = True
        elif with_data:
            out["data"] = self.data
        return out


@runtime_checkable
class AssetLibrary(Protocol):
    """What the service needs from a library. Every method is one atomic operation."""

    def get(self, kind: str, asset_id: str, revision: int | None = None) -> AssetEntry:
        """The current (or the given) revision; ``LIBRARY_NOT_FOUND`` when absent or deleted."""
        ...

    def put(self, kind: str, asset_id: str, data: Any, *, if_match: int | None = None,
            if_absent: bool = False) -> AssetEntry:
        """Write the next revision. ``if_match``: only if ``revision`` is current; ``if_absent``: only if absent.

        Either condition failing raises ``LIBRARY_CONFLICT`` and changes nothing.
        """
        ...

    def delete(self, kind: str, asset_id: str, *, if_match: int | None = None) -> AssetEntry:
        """Delete (a tombstone revision); ``LIBRARY_NOT_FOUND`` when absent, ``LIBRARY_CONFLICT`` when stale."""
        ...

    def list(self, kind: str, *, after: str | None = None, limit: int = MAX_LIST) -> list[AssetEntry]:
        """The live assets of ``kind`` sorted by id (without data), those after ``after`` first."""
        ...

    def heads(self, items: Sequence[tuple[str, str, int | None]]) -> Heads:
        """What the library holds now for each ``(kind, id, revision)``, read in one transaction.

        With ``revision`` ``None``: ``(revision, digest)`` of the newest live revision, ``None`` when
        the asset is deleted or absent. With a revision: that pair if the revision is kept (and is
        no tombstone), else ``None``. This is what a lease on a stored asset is checked against:
        no document is read or decoded.
        """
        ...

    def close(self) -> None:
        """Release resources."""
        ...


def check_kind(kind: Any) -> str:
    """``kind`` must be one of :data:`KINDS`."""
    if kind not in KINDS:
        raise TemplateError(f"unknown library kind {kind!r} (one of {', '.join(KINDS)})", code="LIBRARY_INVALID")
    return str(kind)


def check_name(kind: Any, asset_id: Any) -> tuple[str, str]:
    """A valid ``(kind, id)`` pair or ``LIBRARY_INVALID``."""
    check_kind(kind)
    if not isinstance(asset_id, str) or not _ID.fullmatch(asset_id):
        raise TemplateError(
            f"invalid asset id {asset_id!r}: 1-128 of [A-Za-z0-9._-], starting with a letter or digit",
            code="LIBRARY_INVALID",
        )
    return kind, asset_id


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode_value(data: Any) -> tuple[str, str]:
    """``data`` as ``(pinned JSON text, digest)``; anything that is not JSON data is ``LIBRARY_INVALID``."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as exc:
        raise TemplateError(f"an asset must be JSON data ({type(exc).__name__})", code="LIBRARY_INVALID") from None
    return text, _digest(text)


def decode_value(text: str, digest: str, where: str) -> Any:
    """A stored document back as data, after checking its digest."""
    if _digest(text) != digest:
        raise TemplateError(f"stored asset {where} does not match its digest", code="LIBRARY_CORRUPT")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise TemplateError(f"stored asset {where} is not JSON", code="LIBRARY_CORRUPT") from None


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (what ``updated_at`` holds)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def conflict(kind: str, asset_id: str, current: int, wanted: int | None, deleted: bool) -> TemplateError:
    """The ``LIBRARY_CONFLICT`` error for a stale or unexpected write."""
    state = "deleted" if deleted else ("absent" if current == 0 else f"at revision {current}")
    want = "absent" if wanted is None else f"revision {wanted}"
    return TemplateError(f"{kind}/{asset_id} is {state}, not {want}", code="LIBRARY_CONFLICT")


def not_found(kind: str, asset_id: str, revision: int | None = None) -> TemplateError:
    """The ``LIBRARY_NOT_FOUND`` error."""
    at = f" at revision {revision}" if revision is not None else ""
    return TemplateError(f"no asset {kind}/{asset_id}{at}", code="LIBRARY_NOT_FOUND")


def check_write(kind: str, asset_id: str, current: int, deleted: bool, if_match: int | None,
                if_absent: bool) -> None:
    """Raise ``LIBRARY_CONFLICT`` unless a write with these conditions may proceed.

    ``current`` is the stored revision (0 when the asset never existed); a deleted asset counts
    as absent, and no revision number matches it.
    """
    live = current > 0 and not deleted
    if if_absent and live:
        raise conflict(kind, asset_id, current, None, deleted)
    if if_match is not None and (not live or if_match != current):
        raise conflict(kind, asset_id, current, if_match, deleted)


class RevisionWrites:
    """``put`` and ``delete`` of a library, over its one conditional write.

    Both stores keep the same contract (a write is the next revision, a delete its tombstone, both
    conditional), so only ``_write`` — one transaction in the store's own database — differs.
    """

    def _write(self, kind: str, asset_id: str, encoded: tuple[str, str] | None, if_match: int | None,
               if_absent: bool) -> AssetEntry:
        raise NotImplementedError

    def put(self, kind: str, asset_id: str, data: Any, *, if_match: int | None = None,
            if_absent: bool = False) -> AssetEntry:
        """Write the next revision in one transaction (conditional with ``if_match``/``if_absent``)."""
        check_name(kind, asset_id)
        encoded = encode_value(data)
        entry = self._write(kind, asset_id, encoded, if_match, if_absent)
        return AssetEntry(kind, asset_id, entry.revision, entry.digest, entry.updated_at, False,
                          decode_value(*encoded, f"{kind}/{asset_id}"))

    def delete(self, kind: str, asset_id: str, *, if_match: int | None = None) -> AssetEntry:
        """Write a tombstone revision."""
        check_name(kind, asset_id)
        return self._write(kind, asset_id, None, if_match, False)
