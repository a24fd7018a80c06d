"""JavaScript value semantics the Handlebars runtime relies on, over parsed JSON values.

Story-string parameters and template literals are JSON-like values: ``str``, ``int``/``float``,
``bool``, ``None`` (JavaScript's ``null``), ``list`` and ``dict``. JavaScript's ``undefined`` (a
missing property) is :data:`UNDEFINED`. The functions here are what Handlebars 4.7 does with such
values: ``String(x)`` when it appends one, truthiness and ``Utils.isEmpty`` for ``#if``/``#with``,
the runtime's ``lookupProperty`` (own properties only: a string has ``length`` and its UTF-16
code units, an array its indexes and ``length``), ``Object.keys`` order for ``#each``, and the
loose ``!=`` that decides whether a block's context opens a new ``../`` level.
"""

from __future__ import annotations

import math
from typing import Any

from ..macros.variables import js_number_string

__all__ = [
    "NULL_CONTEXT",
    "UNDEFINED",
    "is_empty",
    "js_add",
    "js_keys",
    "js_loose_equal",
    "js_number_text",
    "js_property_key",
    "js_string",
    "js_truthy",
    "lookup_property",
]


class _Undefined:
    """JavaScript's ``undefined``: one instance, falsy, distinct from ``None`` (``null``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Any = _Undefined()


class _NullContext(dict):  # type: ignore[type-arg]
    """Handlebars' ``container.nullContext`` (a sealed ``{}``): what ``this`` is in a helper called
    where the context is ``null`` or ``undefined``. Compared by identity."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:  # pragma: no cover - never written
        raise TypeError("the null context is sealed")


NULL_CONTEXT: Any = _NullContext()


def is_nullish(value: Any) -> bool:
    return value is None or value is UNDEFINED


def js_truthy(value: Any) -> bool:
    """JavaScript's ``!!value``."""
    if value is None or value is UNDEFINED or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def is_empty(value: Any) -> bool:
    """Handlebars' ``Utils.isEmpty``: falsy but not ``0``, or an empty array."""
    if not js_truthy(value) and not (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0):
        return True
    return isinstance(value, list) and not value


def js_number_text(value: float | int) -> str:
    """``String(number)``: JavaScript's shortest round-trip form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return js_number_string(value)


def js_string(value: Any) -> str:
    """``String(value)`` (``null`` and ``undefined`` included: the runtime never appends them)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number_text(value)
    if isinstance(value, list):
        return ",".join("" if is_nullish(item) else js_string(item) for item in value)
    return "[object Object]"


def js_property_key(value: Any) -> str:
    """``ToPropertyKey`` of a parsed value (``lookup``'s field)."""
    return js_string(value)


def _array_index(key: str) -> int | None:
    """The integer of a canonical array-index key (``"0"``, ``"12"``; not ``"01"`` or ``"-1"``)."""
    if key.isdigit() and key.isascii() and (key == "0" or key[0] != "0"):
        index = int(key)
        return index if index < 2**32 - 1 else None
    return None


def _utf16_units(text: str) -> list[str]:
    units: list[str] = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units.append(chr(0xD800 + (code >> 10)))
            units.append(chr(0xDC00 + (code & 0x3FF)))
        else:
            units.append(char)
    return units


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def lookup_property(parent: Any, key: str) -> Any:
    """The runtime's ``lookupProperty(parent, key)``: an own property's value, else ``undefined``
    (prototype members such as ``constructor`` or ``toString`` are refused, as Handlebars 4.6+
    refuses them by default). ``parent`` must not be ``null``/``undefined`` (callers guard)."""
    if isinstance(parent, dict):
        return parent.get(key, UNDEFINED)
    if isinstance(parent, list):
        if key == "length":
            return len(parent)
        index = _array_index(key)
        return parent[index] if index is not None and index < len(parent) else UNDEFINED
    if isinstance(parent, str):
        if key == "length":
            return _utf16_length(parent)
        index = _array_index(key)
        if index is None:
            return UNDEFINED
        if parent.isascii() or all(ord(c) <= 0xFFFF for c in parent):
            return parent[index] if index < len(parent) else UNDEFINED
        units = _utf16_units(parent)
        return units[index] if index < len(units) else UNDEFINED
    return UNDEFINED


def js_keys(value: dict[str, Any]) -> list[str]:
    """``Object.keys`` order: canonical array indexes ascending, then the rest as inserted."""
    indexes = sorted((k for k in value if _array_index(k) is not None), key=int)
    if not indexes:
        return list(value)
    return indexes + [k for k in value if _array_index(k) is None]


def _to_primitive(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return js_string(value)
    return value


def _to_number(value: Any) -> float:
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if value is UNDEFINED:
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip(" \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                       "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
    if text == "":
        return 0.0
    try:
        if text[:2].lower() in ("0x", "0o", "0b"):
            return float(int(text, 0))
        if text in ("Infinity", "+Infinity"):
            return math.inf
        if text == "-Infinity":
            return -math.inf
        if any(c not in "0123456789+-.eE" for c in text):
            return math.nan
        return float(text)
    except ValueError:
        return math.nan


def js_add(a: Any, b: Any) -> Any:
    """JavaScript's ``a + b``: text when either side is (or converts to) a string, else numbers."""
    if a.__class__ is str and b.__class__ is str:
        return a + b
    a, b = _to_primitive(a), _to_primitive(b)
    if isinstance(a, str) or isinstance(b, str):
        return js_string(a) + js_string(b)
    total = _to_number(a) + _to_number(b)
    return int(total) if total.is_integer() and abs(total) < 2**53 else total


def js_loose_equal(a: Any, b: Any) -> bool:
    """JavaScript's ``a == b`` for parsed values (objects and arrays by identity)."""
    if isinstance(a, (list, dict)) and isinstance(b, (list, dict)):
        return a is b
    if is_nullish(a) or is_nullish(b):
        return is_nullish(a) and is_nullish(b)
    a, b = _to_primitive(a), _to_primitive(b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return _to_number(a) == _to_number(b)
