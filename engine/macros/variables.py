"""Chat-local and global variables with SillyTavern's JavaScript value semantics (spec 1.8).

SillyTavern stores whatever the macro wrote (a string) or computed (a number) and converts on
the way out: a stored ``"007"`` reads back as the number 7, ``addvar`` appends to JSON arrays,
concatenates non-numbers and adds numbers. Reproducing that needs JavaScript's ``Number()``
parsing and ``String(number)`` printing, which differ from Python's ``float``/``repr`` in many
corners (``"0x1f"``, ``" 42 "``, ``""``, ``1e21``, ``1e-7``...), so both live here.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "JS_WHITESPACE",
    "VariableStore",
    "js_number",
    "js_number_string",
    "js_string",
    "js_json",
    "js_trim",
    "is_falsy_text",
]

#: The characters JavaScript's ``String.prototype.trim`` and ``\s`` treat as whitespace.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NUMBER_STARTS = frozenset("+-.0123456789I")
#: first characters after which a stored text may read back as a number or be blank
_NOT_PLAIN_START = frozenset(_NUMBER_STARTS | set(JS_WHITESPACE))
_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def js_trim(text: str) -> str:
    """JavaScript's ``trim()`` (Python's ``strip()`` also removes ``\\x1c``-``\\x1f``)."""
    return text.strip(JS_WHITESPACE)


def js_number(value: Any) -> float | None:
    """JavaScript's ``Number(value)``; ``None`` stands for ``NaN``."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        f = float(value)
        return None if math.isnan(f) else f
    if value is None:
        return 0.0
    if not isinstance(value, str):
        return None
    text = js_trim(value)
    if text == "":
        return 0.0
    if text[0] not in _NUMBER_STARTS:
        return None  # decimals, Infinity and 0x/0o/0b all start with one of these (most words do not)
    if _DECIMAL.fullmatch(text):
        if len(text) > 400:  # no hostile giant conversions; JavaScript would give Infinity/0
            mantissa = text.lstrip("+-").split("e")[0].split("E")[0]
            if "e" not in text.lower() and "." not in mantissa:
                return -math.inf if text.startswith("-") else math.inf
        try:
            return float(text)
        except (ValueError, OverflowError):  # pragma: no cover - regex guarantees validity
            return None
    if text in ("Infinity", "+Infinity"):
        return math.inf
    if text == "-Infinity":
        return -math.inf
    m = _RADIX.fullmatch(text)
    if m:
        base = {"x": 16, "o": 8, "b": 2}[m.group(1)[0].lower()]
        return float(int(m.group(1)[1:], base))
    return None


def js_number_string(x: float) -> str:
    """JavaScript's ``Number.prototype.toString()`` for a finite double."""
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    sign, digits_t, exp = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    # repr's mantissa may carry trailing zeros; recompute the exponent of the first digit
    k = len(digits)
    n = len(digits_t) + int(exp)  # decimal point position relative to the digit string
    neg = "-" if sign else ""
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mant = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return neg + body


def js_string(value: Any) -> str:
    """``String(value)`` as SillyTavern's result normalisation applies it.

    ``None`` is ``''``; booleans are ``true``/``false``; lists and dicts become JSON (ST
    serialises objects); numbers print the JavaScript way.
    """
    cls = value.__class__
    if cls is str:
        return value
    if cls is float and value.is_integer() and -1e21 < value < 1e21:
        return str(int(value))  # what js_number_string gives an integral double (-0 too)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else js_number_string(float(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return js_number_string(value)
    if isinstance(value, (list, dict)):
        try:
            return js_json(value)
        except RecursionError:
            return ""
    return str(value)


def _no_constant(name: str) -> Any:
    """``JSON.parse`` knows no ``NaN``/``Infinity`` literals."""
    raise ValueError(f"not JSON: {name}")


def js_json(value: Any) -> str:
    """``JSON.stringify`` for parsed JSON values: numbers print the JavaScript way (``1.0`` is ``1``).

    Raises ``RecursionError`` for absurdly deep values (the caller treats them as text).
    """
    if isinstance(value, list):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + js_json(v) for k, v in value.items()) + "}"
    if isinstance(value, bool) or value is None:
        return "true" if value is True else ("false" if value is False else "null")
    if isinstance(value, (int, float)):
        f = float(value) if not isinstance(value, int) or abs(value) >= 2**53 else value
        if isinstance(f, float) and (math.isnan(f) or math.isinf(f)):
            return "null"
        return js_string(f)
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def is_falsy_text(text: str) -> bool:
    """SillyTavern's condition test: ``''`` or, trimmed and lower-cased, false/off/0."""
    return text == "" or js_trim(text).lower() in ("false", "off", "0")


def _plain(value: Any) -> Any:
    """A stored number in its JSON-friendly form: an int when it is a safe integer.

    ``Infinity`` has no JSON form, so it is given as JavaScript prints it (``"Infinity"``).
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return js_string(value)
        if value.is_integer() and abs(value) <= 2**53:
            return int(value)
    return value


class VariableStore:
    """One scope of variables (chat-local or global), copied from the caller's dict.

    Values are what SillyTavern would store: strings from ``setvar``, numbers from arithmetic.
    The caller's dict is never mutated.
    """

    __slots__ = ("_data",)

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(initial or {})

    def snapshot(self) -> dict[str, Any]:
        """The variables as plain JSON values (numbers stay numbers)."""
        if not self._data:
            return {}
        return {k: _plain(v) if isinstance(v, float) else v for k, v in self._data.items()}

    def has(self, name: str) -> bool:
        return name in self._data

    def raw(self, name: str) -> Any:
        return self._data.get(name)

    def get(self, name: str) -> Any:
        """ST's ``getVariable``: ``''`` when missing or empty, numbers for numeric text."""
        value = self._data.get(name)
        if value.__class__ is str and value and value[0] not in _NOT_PLAIN_START:
            # text that cannot be a number nor blank (its first character is neither a number's
            # nor whitespace): ``js_number`` would give NaN, so the text itself
            return value
        if value is None or value == "":
            return ""
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            if js_trim(value) == "":
                return value
            num = js_number(value)
            return value if num is None else num
        return value

    def set(self, name: str, value: Any) -> None:
        if name == "":
            raise ValueError("variable name is empty")
        self._data[name] = value

    def set_all(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """:meth:`set` of each ``(name, value)`` in order; every name must be non-empty (a plan
        replaying its literal writes, whose names it checked when it was built)."""
        self._data.update(pairs)

    def delete(self, name: str) -> None:
        self._data.pop(name, None)

    def add(self, name: str, value: Any) -> Any:
        """ST's ``addVariable``: push to a JSON array, concatenate text, or add numbers."""
        if name == "":
            raise ValueError("variable name is empty")
        current = self.get(name)
        if isinstance(current, str) and current != "":
            try:
                parsed = json.loads(current, parse_constant=_no_constant)
                if isinstance(parsed, list):
                    parsed.append(value)
                    stored = js_json(parsed)
                    self._data[name] = stored
                    return stored
            except (ValueError, RecursionError):
                pass
        increment = js_number(value)
        cur_num = js_number(current)
        if increment is None or cur_num is None:
            # a missing variable concatenates as '' (ST: `String(value)` of nothing + value)
            # ST: String(currentValue || '') + value, so a zero or empty value concatenates as ''
            prefix = "" if current == "" or current == 0 else js_string(current)
            stored_s = prefix + js_string(value)
            self._data[name] = stored_s
            return stored_s
        total = cur_num + increment
        if math.isnan(total):  # Infinity + -Infinity: ST returns '' and stores nothing
            return ""
        self._data[name] = total
        return total
