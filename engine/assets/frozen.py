"""Deeply immutable JSON views, so a cached asset can be handed out without being copied.

The asset cache (:mod:`.cache`) keeps one validated copy of each asset and gives every caller the
same data. Handing out the plain dicts would let one caller's edit change every later result, and
copying 1-2 MB per request would cost more than the request itself; so the cached data is frozen
once: objects become :class:`FrozenDict` (a read-only ``Mapping``), arrays :class:`FrozenList` (a
``tuple``), scalars stay as they are.

A frozen value also knows a content digest of its JSON text, computed once. :func:`fingerprint`
uses it to key any JSON-like value that *contains* frozen parts (a preset copied with a few
settings added, a book dict with a name and source added) by walking only its plain parts, so
later stages (the assembler's detached assets, the prepared world-info books) can recognise an
unchanged asset in time proportional to what changed, not to its size.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FrozenDict", "FrozenList", "fingerprint", "freeze_json", "is_frozen", "json_digest", "json_text",
           "text_digest", "thaw_json"]


class FrozenDict(Mapping[str, Any]):
    """A read-only JSON object whose values are frozen too (built by :func:`freeze_json` only).

    Reads behave as on a dict (``get``, ``items``, ``in``, ``==`` with a dict of the same items);
    there is no way to write. ``dict(view)`` or ``{**view}`` gives a shallow mutable copy whose
    values are still frozen; :func:`thaw_json` a deep mutable copy.
    """

    __slots__ = ("_data", "_digest")

    _data: dict[str, Any]
    _digest: bytes | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is built by freeze_json(), not directly")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> Any:
        return self._data.keys()

    def items(self) -> Any:
        return self._data.items()

    def values(self) -> Any:
        return self._data.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a dict: equal to a dict, so not hashable

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __reduce__(self) -> Any:
        return (freeze_json, (thaw_json(self),))


class FrozenList(tuple):  # type: ignore[type-arg]
    """A JSON array as a tuple (read-only), with room for its memoised content digest."""

    _digest: bytes | None = None

    def __reduce__(self) -> Any:
        return (freeze_json, (thaw_json(self),))


def _new_dict(data: dict[str, Any]) -> FrozenDict:
    view = object.__new__(FrozenDict)
    view._data = data
    view._digest = None
    return view


def freeze_json(value: Any) -> Any:
    """A deeply frozen copy of JSON data (dicts, lists and tuples copied; scalars shared).

    Frozen parts inside ``value`` are kept as they are (they cannot change). Iterative, so nesting
    depth is bounded by memory, not by Python's stack.
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList or not (isinstance(value, (Mapping, list, tuple))):
        return value
    # post-order over containers with an explicit stack: (source, target container, pending keys)
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    out_stack: list[tuple[Any, Any, Any]] = []
    while stack:
        src, parent, slot = stack.pop()
        kind = type(src)
        if kind is FrozenDict or kind is FrozenList:
            parent[slot] = src
            continue
        if isinstance(src, Mapping):
            data = {k if type(k) is str else _json_key(k): v for k, v in src.items()}
            out_stack.append((data, parent, slot))
            for k, v in data.items():
                if isinstance(v, (Mapping, list, tuple)) and type(v) is not FrozenDict and type(v) is not FrozenList:
                    stack.append((v, data, k))
        elif isinstance(src, (list, tuple)):
            items = list(src)
            out_stack.append((items, parent, slot))
            for i, v in enumerate(items):
                if isinstance(v, (Mapping, list, tuple)) and type(v) is not FrozenDict and type(v) is not FrozenList:
                    stack.append((v, items, i))
        else:
            parent[slot] = src
    # children were pushed after their parent, so building in reverse order freezes children first
    for data, parent, slot in reversed(out_stack):
        parent[slot] = _new_dict(data) if type(data) is dict else FrozenList(data)
    return root[0]


def _json_key(key: Any) -> str:
    """The object key JSON makes of a non-string key (``True`` -> ``"true"``, ``1`` -> ``"1"``)."""
    return next(iter(json.loads(json.dumps({key: None}))))


def is_frozen(value: Any) -> bool:
    """Whether ``value`` is a frozen JSON container (:class:`FrozenDict` or :class:`FrozenList`)."""
    kind = type(value)
    return kind is FrozenDict or kind is FrozenList


def thaw_json(value: Any) -> Any:
    """A plain, mutable deep copy (dicts and lists) of JSON data that may hold frozen parts."""
    return json.loads(json_text(value))


def _plain(value: Any) -> Any:
    if type(value) is FrozenDict:
        return value._data
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_text(value: Any) -> str:
    """``json.dumps(value)`` for JSON data that may hold frozen parts: the same text as its plain twin."""
    return json.dumps(value, default=_plain)


def text_digest(text: str) -> bytes:
    """The content digest of a JSON text (what :func:`json_digest` computes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()


def json_digest(value: Any) -> bytes:
    """A digest of :func:`json_text` (memoised on a frozen container, computed once)."""
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        digest = value._digest
        if digest is None:
            digest = value._digest = text_digest(json_text(value))
        return digest
    return text_digest(json_text(value))


def fingerprint(value: Any) -> Any:
    """A hashable key such that equal keys mean equal JSON texts (a cache key for JSON values).

    Frozen parts stand for their content digest (computed once each), plain containers are
    walked, scalars are kept with their type (``1``, ``1.0`` and ``True`` differ in JSON). The
    same content in the same shape (frozen here, plain there) gets the same key; a frozen part
    and its plain twin get different keys, which costs a cache miss, never a wrong hit. The cost
    is the size of the plain parts, so a frozen asset wrapped in a fresh dict is keyed at once.
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        return (b"F", json_digest(value))
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return (kind, value)
    if isinstance(value, Mapping):
        return (b"D", tuple([(k if type(k) is str else (type(k), k), fingerprint(v)) for k, v in value.items()]))
    if isinstance(value, (list, tuple)):
        return (b"L", tuple([fingerprint(v) for v in value]))
    if isinstance(value, (str, int, float)):
        return (kind, value)
    raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")
