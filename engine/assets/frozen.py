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

__all__ = ["FrozenDict", "FrozenList", "as_plain", "fingerprint", "freeze_json", "freeze_owned", "is_frozen",
           "json_digest", "json_text", "plain_data", "text_digest", "thaw_json"]


class FrozenDict(Mapping[str, Any]):
    """A read-only JSON object (built by :func:`freeze_json` / :func:`freeze_owned` only).

    It wraps a plain dict that nothing else can reach, and freezes a nested object or array only
    when it is read (then keeps that frozen value, so every read returns the same object): a
    caller pays for what it reads, and the JSON text of a view is the C encoder's work on the
    plain dict. Reads behave as on a dict (``get``, ``items``, ``in``, ``==`` with a dict of the
    same items); there is no way to write. ``dict(view)`` or ``{**view}`` gives a shallow mutable
    copy whose values are still frozen; :func:`thaw_json` a deep mutable copy.
    """

    __slots__ = ("_data", "_frozen", "_digest")

    _data: dict[str, Any]
    _frozen: dict[str, Any] | None
    _digest: bytes | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is built by freeze_json(), not directly")

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        kind = type(value)
        if kind is dict or kind is list:
            frozen = self._frozen
            if frozen is None:
                frozen = self._frozen = {}
            hit = frozen.get(key)
            if hit is None:
                hit = frozen[key] = _wrap(value)
            return hit
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._data else default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> Any:
        return self._data.keys()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (FrozenDict, FrozenList)):
            return type(other) is FrozenDict and self._data == other._data
        if isinstance(other, Mapping):
            try:
                return thaw_json(self) == thaw_json(dict(other.items()))
            except (TypeError, ValueError):
                return False
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a dict: equal to a dict, so not hashable

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __reduce__(self) -> Any:
        return (freeze_owned, (thaw_json(self),))


class FrozenList(tuple):  # type: ignore[type-arg]
    """A JSON array as a tuple (read-only); objects inside are :class:`FrozenDict` views.

    ``_data`` keeps the plain list it was built from (for the JSON text), and ``_digest`` room
    for its memoised content digest.
    """

    _data: list[Any]
    _digest: bytes | None = None

    def __reduce__(self) -> Any:
        return (freeze_owned, (thaw_json(self),))


def _new_dict(data: dict[str, Any]) -> FrozenDict:
    view = object.__new__(FrozenDict)
    view._data = data
    view._frozen = None
    view._digest = None
    return view


def _wrap(value: Any) -> Any:
    """The frozen form of an owned plain value: objects wrapped at once (their insides on
    demand), arrays built as tuples level by level with an explicit stack (no recursion)."""
    kind = type(value)
    if kind is dict:
        return _new_dict(value)
    if kind is not list:
        return value
    # arrays of arrays are built bottom-up; an object inside is wrapped (O(1)) and stops the walk
    order: list[list[Any]] = []
    stack = [value]
    while stack:
        items = stack.pop()
        order.append(items)
        stack.extend(v for v in items if type(v) is list)
    built: dict[int, FrozenList] = {}
    for items in reversed(order):
        out = FrozenList([built[id(v)] if type(v) is list else (_new_dict(v) if type(v) is dict else v)
                          for v in items])
        out._data = items
        built[id(items)] = out
    return built[id(value)]


def freeze_owned(value: Any) -> Any:
    """Freeze plain JSON data the caller hands over (made just for this, referenced by nothing
    else): no copy is made, so the caller must never change it afterwards."""
    return _wrap(value)


def freeze_json(value: Any) -> Any:
    """A frozen copy of JSON data (a JSON round trip, so the result shares nothing with ``value``).

    Frozen parts inside ``value`` are welcome (their JSON text is their plain data's). A frozen
    value is returned as it is.
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList or not isinstance(value, (Mapping, list, tuple)):
        return value
    return _wrap(json.loads(json_text(value)))


def is_frozen(value: Any) -> bool:
    """Whether ``value`` is a frozen JSON container (:class:`FrozenDict` or :class:`FrozenList`)."""
    kind = type(value)
    return kind is FrozenDict or kind is FrozenList


def plain_data(value: Any) -> Any:
    """The plain JSON data behind a frozen container (``value`` itself otherwise), without a copy.

    For trusted stages that need plain dicts and lists and only read them (the world-info reader):
    the data is the cache's own, so writing to it would change every later result. Everything
    behind a frozen container is plain (frozen views are made over plain data only).
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        return value._data
    return value


def as_plain(value: Any) -> Any:
    """``value`` itself when it holds no frozen view at its top, else a plain deep copy of it.

    Readers that check for ``dict`` and ``list`` (the asset parsers) take a cached asset's views,
    or a dict built around them, through this; frozen parts sit only at the top of such a value
    (everything behind a view is plain).
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        return thaw_json(value)
    if isinstance(value, Mapping):
        if any(type(v) is FrozenDict or type(v) is FrozenList for v in value.values()):
            return thaw_json(value)
    elif isinstance(value, (list, tuple)):
        if any(type(v) is FrozenDict or type(v) is FrozenList for v in value):
            return thaw_json(value)
    return value


def thaw_json(value: Any) -> Any:
    """A plain, mutable deep copy (dicts and lists) of JSON data that may hold frozen parts."""
    return json.loads(json_text(value))


def _plain(value: Any) -> Any:
    if type(value) is FrozenDict:
        return value._data
    if type(value) is FrozenList:
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


class _Same:
    """A key part that is equal only to itself's object: a frozen value stands for itself (it
    cannot change), and the key keeps it alive, so its ``id`` is never reused while keyed."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Same and other.obj is self.obj


def fingerprint(value: Any) -> Any:
    """A hashable key such that equal keys mean equal JSON texts (a cache key for JSON values).

    A frozen part stands for itself (by identity: it cannot change), plain containers are
    walked, scalars are kept with their type (``1``, ``1.0`` and ``True`` differ in JSON). The
    same frozen parts in equal plain surroundings get the same key; equal content in other
    objects may get another key, which costs a cache miss, never a wrong hit. The cost is the
    size of the plain parts, so a cached asset wrapped in a fresh dict is keyed at once.
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        return (b"F", _Same(value))
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return (kind, value)
    if isinstance(value, Mapping):
        return (b"D", tuple([(k if type(k) is str else (type(k), k), fingerprint(v)) for k, v in value.items()]))
    if isinstance(value, (list, tuple)):
        return (b"L", tuple([fingerprint(v) for v in value]))
    if isinstance(value, (str, int, float)):
        return (kind, value)
    raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")
