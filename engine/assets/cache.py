"""Validated assets cached between calls, handed out as read-only views.

A chat front end assembles a request per turn from the same preset, card and books. Reading and
validating them again each time (1-4 MB of JSON, thousands of pydantic objects) cost far more
than the assembly itself, so :class:`AssetCache` keeps the validated asset:

* a file by its identity and version: absolute path, device, inode, size, and modification and
  change times in nanoseconds (an edited file is read again; a file rewritten in place within
  the same nanosecond with the same size is the one case not seen);
* an object by a digest of its JSON text (and the JSON path its errors would name).

What a caller gets is an :class:`AssetView`, never the cached model: its dumps are frozen JSON
(:mod:`.frozen`), computed once and shared, so no caller can change what the next one sees.
Anything else is answered from the view's own deep copy of the model (made on first use), so
even a caller that edits it changes only its copy. Failures are not cached: a file that does not
validate is read again next time.

The cache is bounded (entries and source bytes, least recently used out first) and thread-safe.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..errors import BoundedDiagnostics, Diagnostic
from .frozen import freeze_owned, is_frozen, json_digest, json_text, text_digest

__all__ = ["AssetCache", "AssetView", "ASSET_CACHE", "clear_asset_cache", "load_cached", "parse_cached"]

T = TypeVar("T")
_MISSING = object()


class _Entry:
    """One validated asset and what has been derived from it (shared by every view)."""

    __slots__ = ("kind", "model", "diagnostics", "name", "encoding", "syntax", "counts", "size", "memo", "lock")

    def __init__(self, kind: str, model: Any, diagnostics: tuple[Diagnostic, ...], name: str | None,
                 encoding: str, syntax: str, counts: Mapping[str, int], size: int) -> None:
        self.kind, self.model, self.diagnostics, self.name = kind, model, diagnostics, name
        self.encoding, self.syntax, self.counts, self.size = encoding, syntax, dict(counts), size
        self.memo: dict[Any, Any] = {}
        self.lock = threading.Lock()

    def derive(self, key: Any, factory: Callable[[Any], T]) -> T:
        value = self.memo.get(key, _MISSING)
        if value is _MISSING:
            with self.lock:
                value = self.memo.get(key, _MISSING)
                if value is _MISSING:
                    value = self.memo[key] = factory(self.model)
        return value  # type: ignore[return-value]


class AssetView:
    """A read-only handle on a cached asset: kind, name, diagnostics and frozen dumps.

    It answers the read-only parts of the asset models' interface from shared frozen data
    (``model_dump(mode="json")``, ``to_st_dict()``, ``name``, ``with_name()``, a card's
    ``character_book``); any other attribute is read from the view's private deep copy of the
    model. ``with_name`` returns a new view rather than renaming anything shared.
    """

    __slots__ = ("_entry", "_name", "_copy")

    def __init__(self, entry: _Entry, name: str | None = None) -> None:
        self._entry = entry
        self._name = name
        self._copy: Any = None

    @property
    def kind(self) -> str:
        """``card``, ``world_book``, ``preset`` or ``mvu``."""
        return self._entry.kind

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """What the loader noticed or repaired (the same as :func:`~.loader.load_asset` reports)."""
        return self._entry.diagnostics

    @property
    def encoding(self) -> str:
        return self._entry.encoding

    @property
    def syntax(self) -> str:
        return self._entry.syntax

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._entry.counts)

    @property
    def name(self) -> str | None:
        """The name given by :meth:`with_name`, else the model's own (a book's file stem or name field)."""
        if self._name is not None:
            return self._name
        return getattr(self._entry.model, "name", None)

    def with_name(self, name: str | None) -> AssetView:
        """A view of the same asset under another name (nothing shared is renamed)."""
        return AssetView(self._entry, name)

    def model_dump(self, *, mode: str = "json", exclude_none: bool = False, by_alias: bool = False) -> Any:
        """``model.model_dump(mode="json", ...)``, frozen, computed once per option set."""
        if mode != "json":
            return self.model_copy().model_dump(mode=mode, exclude_none=exclude_none, by_alias=by_alias)
        return self._entry.derive(("model_dump", exclude_none, by_alias), lambda m: freeze_owned(
            m.model_dump(mode="json", exclude_none=exclude_none, by_alias=by_alias)))

    def to_st_dict(self) -> Any:
        """A world book's ``to_st_dict()`` (SillyTavern's world-file object), frozen, computed once."""
        # fresh dicts, or extras shared only with the cached model, which nothing changes
        return self._entry.derive("to_st_dict", lambda m: freeze_owned(m.to_st_dict()))

    @property
    def character_book(self) -> AssetView | None:
        """A card's embedded book, converted as on import, as a view (``None`` without one)."""
        entry = self._entry

        def convert(model: Any) -> _Entry | None:
            book = model.character_book
            if book is None:
                return None
            return _Entry("world_book", book, (), book.name, entry.encoding, entry.syntax, {}, 0)

        sub = entry.derive("character_book", convert)
        return AssetView(sub) if sub is not None else None

    def derive(self, key: Any, factory: Callable[[Any], T]) -> T:
        """``factory(model)`` computed once per cached asset and ``key``, then shared.

        ``factory`` must only read the model and should return immutable data (frozen JSON, a
        frozen dataclass), since every later caller gets the same object.
        """
        return self._entry.derive(("derived", key), factory)

    def model_copy(self) -> Any:
        """A private deep copy of the validated model, free to edit."""
        return self._entry.model.model_copy(deep=True)

    def loaded(self) -> Any:
        """A :class:`~.loader.LoadedAsset` with a private copy of the model."""
        from .loader import LoadedAsset

        e = self._entry
        return LoadedAsset(kind=e.kind, model=self.model_copy(), diagnostics=e.diagnostics, name=self.name,
                           encoding=e.encoding, syntax=e.syntax, counts=dict(e.counts))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        copy = self._copy
        if copy is None:
            copy = self._copy = self.model_copy()
            if self._name is not None and hasattr(copy, "with_name"):
                copy.with_name(self._name)
        return getattr(copy, name)

    def __repr__(self) -> str:
        return f"AssetView({self.kind}, {self.name!r})"


class AssetCache:
    """Validated assets by file identity or content digest (LRU, bounded, thread-safe)."""

    def __init__(self, max_entries: int = 32, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[Any, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _get(self, key: Any) -> _Entry | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return entry

    def _put(self, key: Any, entry: _Entry) -> None:
        if entry.size > self.max_bytes // 4:
            return  # too large to keep: read it each time rather than evict everything else
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._items[key] = entry
            self._bytes += entry.size
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, gone = self._items.popitem(last=False)
                self._bytes -= gone.size

    def clear(self) -> None:
        """Forget every cached asset."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def load(self, source: str | Path, *, kind: str | None = None, name: str | None = None) -> AssetView:
        """:func:`~.loader.load_asset` of a file, cached by the file's identity and version.

        Raises what ``load_asset`` raises (``INPUT_INVALID`` for a file that cannot be read).
        """
        from .loader import load_asset

        path = os.fspath(source)
        try:
            st = os.stat(path)
        except OSError:
            load_asset(path, kind=kind, name=name)  # raises the loader's own error for it
            raise
        key = ("file", os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
               kind, name)
        entry = self._get(key)
        if entry is None:
            loaded = load_asset(path, kind=kind, name=name)
            entry = _Entry(loaded.kind, loaded.model, loaded.diagnostics, loaded.name, loaded.encoding,
                           loaded.syntax, loaded.counts, st.st_size)
            self._put(key, entry)
        return AssetView(entry)

    def parse(self, value: Any, *, kind: str, name: str | None = None, base_path: str = "$") -> AssetView:
        """Validate an asset object (``card``, ``world_book`` or ``preset``), cached by its content.

        The object is copied through JSON before validation, so the cached model never shares a
        list or dict with the caller. Errors carry JSON paths under ``base_path``.
        """
        if kind not in ("card", "world_book", "preset"):
            raise ValueError(f"parse_cached: unsupported kind {kind!r}")
        try:
            text = None if is_frozen(value) else json_text(value)
        except (TypeError, ValueError, RecursionError):
            # not JSON data (a set, a cycle, nesting past Python's stack): validated as it is,
            # uncached, so its errors are the validator's own
            return AssetView(self._validate(value, kind, name, base_path, 0))
        digest = json_digest(value) if text is None else text_digest(text)
        key = ("object", kind, name, base_path, digest)
        entry = self._get(key)
        if entry is None:
            if text is None:
                text = json_text(value)
            entry = self._validate(json.loads(text), kind, name, base_path, len(text))
            self._put(key, entry)
        return AssetView(entry)

    @staticmethod
    def _validate(data: Any, kind: str, name: str | None, base_path: str, size: int) -> _Entry:
        from .cards import parse_card
        from .presets import parse_preset
        from .worldbooks import parse_world_book

        diags = BoundedDiagnostics()
        model: Any
        if kind == "preset":
            model = parse_preset(data, name=name, base_path=base_path, diagnostics=diags)
        elif kind == "card":
            model = parse_card(data, base_path=base_path, diagnostics=diags)
        else:
            model = parse_world_book(data, name=name, base_path=base_path, diagnostics=diags)
        display = name if kind == "preset" else getattr(model, "name", None)
        return _Entry(kind, model, tuple(diags.finished()), display, "utf-8", "json", {}, size)


#: the process-wide cache used by the request path
ASSET_CACHE = AssetCache()


def load_cached(source: str | Path, *, kind: str | None = None, name: str | None = None) -> AssetView:
    """:meth:`AssetCache.load` on the process-wide cache."""
    return ASSET_CACHE.load(source, kind=kind, name=name)


def parse_cached(value: Any, *, kind: str, name: str | None = None, base_path: str = "$") -> AssetView:
    """:meth:`AssetCache.parse` on the process-wide cache."""
    return ASSET_CACHE.parse(value, kind=kind, name=name, base_path=base_path)


def clear_asset_cache() -> None:
    """Empty the process-wide cache (tests comparing cold and warm results use it)."""
    ASSET_CACHE.clear()
