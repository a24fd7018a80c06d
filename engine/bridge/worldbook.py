"""The world-book source: ``getwi`` reads only entries activated for this request.

The activation record comes from the world-info scan (``Activation``) or is made by hand
(``ActivationRecord.from_uids``). The bridge never rolls probabilities or re-scans: an entry the
scan did not activate is not readable (``TEMPLATE_DEPENDENCY_NOT_ACTIVE``), whatever the template
asks. An entry is returned as raw text (never rendered or macro-expanded again). Its lease fails
with ``SOURCE_CONTENT_CHANGED`` once the entry's text differs from the text that was activated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TemplateError
from .leases import Resolution, Revocable
from .revision import revision_of

__all__ = ["ActivationRecord", "WorldBookSource", "book_resource_id"]


def book_resource_id(name: str) -> str:
    """The stable resource id of a book (seed 003: ``world-book:<id>``)."""
    return f"world-book:{name}"


@dataclass(frozen=True)
class ActivationRecord:
    """Which entries fired this request: ``{book name: {uid as text: revision of the activated text}}``.

    A revision of ``None`` means "whatever the book holds when the record is bound to a source".
    """

    activated: Mapping[str, Mapping[str, str | None]]

    @classmethod
    def from_uids(cls, activated: Mapping[str, Iterable[int | str]]) -> ActivationRecord:
        """A hand-made record: ``{"Lore": [0, 3]}``."""
        return cls({book: {str(uid): None for uid in uids} for book, uids in activated.items()})

    @classmethod
    def from_activation(cls, activation: Any) -> ActivationRecord:
        """The record of a world-info scan (``tavernbox.worldinfo.Activation``)."""
        out: dict[str, dict[str, str | None]] = {}
        for item in activation.activated:
            out.setdefault(str(item.book), {})[str(item.uid)] = None
        return cls(out)

    def uids(self, book: str) -> list[str]:
        return list(self.activated.get(book, {}))


@dataclass
class _Entry:
    uid: int | str
    title: str
    content: str


def _book_parts(book: Any, index: int) -> tuple[str, list[_Entry]]:
    if hasattr(book, "entry_list"):
        name = book.name
        entries = [_Entry(e.uid, e.comment, e.content) for e in book.entry_list]
    elif isinstance(book, Mapping):
        name = book.get("name")
        raw = book.get("entries", {})
        items = raw.values() if isinstance(raw, Mapping) else raw if isinstance(raw, list) else []
        entries = []
        for e in items:
            if isinstance(e, Mapping) and isinstance(e.get("uid", e.get("id")), (int, str)):
                entries.append(_Entry(e.get("uid", e.get("id")), str(e.get("comment") or ""), str(e.get("content") or "")))
    else:
        raise TemplateError(f"world book {index} is neither a WorldBook nor a world-book object", code="INPUT_INVALID")
    if not isinstance(name, str) or not name:
        raise TemplateError(f"world book {index} has no name; getwi finds books by name", code="INPUT_INVALID")
    return name, entries


class WorldBookSource:
    """The books selected for this request plus the activation record of this request."""

    adapter_id = "tavern.world-books"

    def __init__(self, books: Sequence[Any], record: ActivationRecord) -> None:
        self._books: dict[str, dict[str, _Entry]] = {}
        for i, book in enumerate(books):
            name, entries = _book_parts(book, i)
            self._books[name] = {str(e.uid): e for e in entries}
        self.lease = Revocable()
        self.reads = 0
        self._activated: dict[str, dict[str, str]] = {}
        for book, uids in record.activated.items():
            entries = self._books.get(book, {})
            for uid, revision in uids.items():
                if uid in entries:
                    self._activated.setdefault(book, {})[uid] = revision or revision_of(entries[uid].content)

    def _select(self, book: str | int | float) -> list[str]:
        key = str(book)
        if key == "":
            return list(self._books)
        if key.startswith("world-book:"):
            key = key[len("world-book:"):]
        return [key] if key in self._books else []

    def update_entry(self, book: str, uid: int | str, content: str) -> None:
        """Edit an entry's text (what an editor does): leases on the activated text go stale."""
        self._books[book][str(uid)].content = content

    def catalog(self, book: str | int | float) -> Resolution:
        """``[[book, uid, title], ...]`` of the selected books matching ``book`` ("" = all), in file order."""
        names = self._select(book)
        listing = [[name, e.uid, e.title] for name in names for e in self._books[name].values()]
        ident = book_resource_id(names[0]) if len(names) == 1 else "world-book:*"
        return Resolution(ident, self.adapter_id, listing, revision_of(listing), None, self.lease.check_current)

    def entry(self, book: str | int | float, uid: str | int | float) -> Resolution:
        """The raw text of an activated entry, or ``TEMPLATE_DEPENDENCY_NOT_ACTIVE``."""
        names = self._select(book) if str(book) != "" else []
        key = str(uid)
        if not names or key not in self._books[names[0]]:
            raise TemplateError(f"world book {book!r} has no entry {key}", code="TEMPLATE_DEPENDENCY_MISSING")
        name = names[0]
        revision = self._activated.get(name, {}).get(key)
        if revision is None:
            raise TemplateError(f"entry {key} of world book {name!r} was not activated for this request; "
                                "only activated entries are readable", code="TEMPLATE_DEPENDENCY_NOT_ACTIVE")
        entry = self._books[name][key]
        if revision_of(entry.content) != revision:
            raise TemplateError(f"entry {key} of world book {name!r} changed since it was activated",
                                code="SOURCE_CONTENT_CHANGED")
        self.reads += 1

        def check() -> str:
            state = self.lease.check_current()
            if state != "current":
                return state
            return "current" if revision_of(entry.content) == revision else "content_changed"

        return Resolution(f"{book_resource_id(name)}#{key}", self.adapter_id, entry.content, revision, None, check)
