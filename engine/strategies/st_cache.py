"""The request path's world-info fast path: cached assets' books read once, not per request.

:func:`~.st_assemble.world_info_books` hands :func:`~tavernbox.worldinfo.activate_world_info` one
dict per book. When that dict is built from a cached asset (its entries are the asset's frozen
view, :mod:`tavernbox.assets.frozen`), reading it again each request would rebuild thousands of
entries, and the world-info engine's prepared-book cache (keyed by the book objects) would miss
every time. :func:`scan_books` instead gives the engine the same normalised
:class:`~tavernbox.worldinfo.entries.WorldBook` for the same content, so both the reading and the
preparation (key index, sorted entries) happen once per book and settings.

Only books whose reading produced no diagnostics are kept as normalised books: a book that needs
repairs goes to the engine as plain data, so its diagnostics appear exactly where they would
without the cache. Plain books (no frozen parts) pass through unchanged.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["clear_scan_books", "scan_books"]

_BOOKS: OrderedDict[Any, Any] = OrderedDict()
_BOOKS_SIZE = 16
_LOCK = threading.Lock()


def _has_views(book: Mapping[str, Any]) -> bool:
    from ..assets.frozen import is_frozen

    return any(is_frozen(v) for v in book.values())


def scan_books(books: Sequence[Any]) -> list[Any]:
    """``books`` with each book built from a cached asset replaced by its normalised book."""
    from ..assets.frozen import fingerprint, plain_data

    out: list[Any] = []
    for i, book in enumerate(books):
        if not (isinstance(book, Mapping) and _has_views(book)):
            out.append(book)
            continue
        # what normalize_books would name and place it by (entry paths say "$[i]")
        default_name, path = ("book" if len(books) == 1 else f"book{i}"), f"$[{i}]"
        key = (default_name, path, fingerprint(book))
        with _LOCK:
            hit = _BOOKS.get(key)
            if hit is not None:
                _BOOKS.move_to_end(key)
        if hit is None:
            from ..worldinfo.entries import normalize_book

            # the reader only reads: it gets the cached plain data itself (no copy)
            plain = {k: plain_data(v) for k, v in book.items()}
            normalised, diagnostics = normalize_book(plain, default_name, path=path)
            hit = (normalised, None) if not diagnostics else (None, None)
            with _LOCK:
                _BOOKS[key] = hit
                while len(_BOOKS) > _BOOKS_SIZE:
                    _BOOKS.popitem(last=False)
        # a book with diagnostics goes as plain data, so the engine reports them as usual
        out.append(hit[0] if hit[0] is not None else {k: plain_data(v) for k, v in book.items()})
    return out


def clear_scan_books() -> None:
    """Forget the normalised books (tests comparing cold and warm results use it)."""
    with _LOCK:
        _BOOKS.clear()
