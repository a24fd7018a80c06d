"""The request path's world-info fast path: cached assets' books read once, not per request.

:func:`~.assemble.world_info_books` hands :func:`~tavernbox.worldinfo.activate_world_info` one
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["clear_scan_books", "derived", "memo_count", "scan_books", "shared_frozen"]

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


_DERIVED: OrderedDict[Any, Any] = OrderedDict()
_DERIVED_SIZE = 64


def derived(tag: Any, value: Any, compute: Callable[[], T]) -> T:
    """``compute()``, remembered for ``value`` when it is built from cached assets' frozen views.

    For work a request does on its preset or card that depends on nothing else (``tag`` says
    which work and its other inputs): the same asset gives the same answer, so it is computed once
    per asset. A value without frozen parts (nothing to key it by cheaply) is computed each time.
    The answer is shared: ``compute`` must return something its callers only read.
    """
    from ..assets.frozen import fingerprint, is_frozen

    if not (is_frozen(value) or (isinstance(value, Mapping) and _has_views(value))):
        return compute()
    key = (tag, fingerprint(value))
    with _LOCK:
        if key in _DERIVED:
            _DERIVED.move_to_end(key)
            return _DERIVED[key]  # type: ignore[no-any-return]
    out = compute()
    with _LOCK:
        _DERIVED[key] = out
        while len(_DERIVED) > _DERIVED_SIZE:
            _DERIVED.popitem(last=False)
    return out


_SHARED: OrderedDict[Any, Any] = OrderedDict()
_SHARED_SIZE = 32


def shared_frozen(value: Any) -> Any:
    """A frozen copy of plain JSON data (:mod:`tavernbox.assets.frozen`), the same object for
    equal data (keyed by :func:`~tavernbox.assets.frozen.fingerprint`).

    For assets the request path rebuilds each time from cached parts (the activated world-info
    entries): the assembler detaches plain assets through their JSON text (hundreds of KiB for a
    large book's activated entries, escaped and hashed every request), but recognises a frozen
    value it has seen by identity. The fingerprint walks the plain data without serialising it.
    """
    from ..assets.frozen import fingerprint, freeze_json

    try:
        key = fingerprint(value)
        with _LOCK:
            hit = _SHARED.get(key)
            if hit is not None:
                _SHARED.move_to_end(key)
                return hit
    except TypeError:  # not JSON data: the assembler reports it as usual
        return value
    frozen = freeze_json(value)
    with _LOCK:
        _SHARED[key] = frozen
        while len(_SHARED) > _SHARED_SIZE:
            _SHARED.popitem(last=False)
    return frozen


class _CountMemo:
    """A tokenizer's counts by text (bounded by characters kept; cleared when full)."""

    def __init__(self, count: Callable[[str], int], max_chars: int = 16 * 1024 * 1024) -> None:
        from ..tokenizers import at_most_utf8_bytes

        self.count, self.max_chars = count, max_chars
        #: the tokenizer's promise (counts never above UTF-8 bytes) passed on to the budget
        self.at_most_utf8_bytes = at_most_utf8_bytes(getattr(count, "__self__", None))
        self.counts: dict[str, int] = {}
        self.chars = 0

    def __call__(self, text: str) -> int:
        found = self.counts.get(text)
        if found is None:
            found = self.count(text)
            if self.chars + len(text) > self.max_chars:
                self.counts.clear()
                self.chars = 0
            if len(text) <= self.max_chars // 4:
                self.counts[text] = found
                self.chars += len(text)
        return found


_COUNTERS: dict[Any, _CountMemo] = {}


def memo_count(count: Callable[[str], int]) -> Callable[[str], int]:
    """``count`` (a tokenizer's ``count``) remembering each text's answer across requests.

    World-info budgets count the same activated entries request after request; a BPE count of a
    long entry costs milliseconds. Keyed by the ``count`` callable itself (a bound method of one
    tokenizer instance), so a tokenizer registered anew under the same name starts afresh.
    """
    with _LOCK:
        memo = _COUNTERS.get(count)
        if memo is None:
            if len(_COUNTERS) >= 16:
                _COUNTERS.clear()
            memo = _COUNTERS[count] = _CountMemo(count)
    return memo


def clear_scan_books() -> None:
    """Forget the normalised books and derived values (tests comparing cold and warm results)."""
    with _LOCK:
        _BOOKS.clear()
        _DERIVED.clear()
        _COUNTERS.clear()
        _SHARED.clear()
