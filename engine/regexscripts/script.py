"""SillyTavern regex scripts read from their JSON objects, with SillyTavern's field names and coercions.

A script is the object SillyTavern's regex extension stores (in its global settings, in a preset's
``extensions.regex_scripts``, in a card's ``data.extensions.regex_scripts``, or in an exported file):
``scriptName``, ``findRegex``, ``replaceString``, ``trimStrings``, ``placement``, ``disabled``,
``markdownOnly``, ``promptOnly``, ``runOnEdit``, ``substituteRegex``, ``minDepth``, ``maxDepth``.

SillyTavern reads some of them with JavaScript's loose rules (a flag is any truthy value, a depth
``"3"`` is the number 3, ``substituteRegex: true`` is 1); :class:`RegexScript` keeps what those rules
make of the written values, so the prompt-time checks are plain comparisons. A field of a type
SillyTavern would fail on (``placement`` that is not a list, a ``replaceString`` that is not text) is a
``REGEX_SCRIPT_INVALID`` error naming its JSON path; an absent field takes the value SillyTavern's
editor gives a new script.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from ..errors import TemplateError

__all__ = ["Placement", "RegexScript", "ScriptOrigin", "ScriptSetKind", "Substitution", "read_scripts",
           "read_scripts_cached"]

ScriptSetKind = Literal["global", "preset", "card"]


class Placement(IntEnum):
    """Where a script applies (SillyTavern's ``regex_placement``); 4 was never used."""

    MD_DISPLAY = 0
    USER_INPUT = 1
    AI_OUTPUT = 2
    SLASH_COMMAND = 3
    WORLD_INFO = 5
    REASONING = 6


class Substitution(IntEnum):
    """What happens to macros in ``findRegex`` (``substituteRegex``); any other value reads the pattern as written."""

    NONE = 0
    RAW = 1
    ESCAPED = 2


@dataclass(frozen=True, slots=True)
class ScriptOrigin:
    """Which set a script came from, the asset that holds it and its index there."""

    kind: ScriptSetKind
    asset: str
    index: int
    #: the script's JSON path in the file or request that holds it
    path: str = ""

    def label(self) -> str:
        return f"{self.kind} script #{self.index}" + (f" of {self.asset}" if self.asset else "")


@dataclass(frozen=True, slots=True)
class RegexScript:
    """One script as SillyTavern's prompt-time code reads it.

    ``min_depth`` / ``max_depth`` are ``None`` when SillyTavern's check is off for the written value
    (absent, ``null``, not a number, or below its floor: -1 for the minimum, 0 for the maximum).
    ``substitution`` is the :class:`Substitution` value, or ``None`` for a value SillyTavern does not
    know (the pattern is then used as written, as with ``NONE``).
    """

    origin: ScriptOrigin
    name: str
    find_regex: str
    replace_string: str
    trim_strings: tuple[str, ...]
    placement: tuple[int, ...]
    disabled: bool
    markdown_only: bool
    prompt_only: bool
    substitution: Substitution | None
    min_depth: float | None
    max_depth: float | None

    def label(self) -> str:
        return f"regex script {self.name!r} ({self.origin.label()})"

    def runs_in_prompt(self, placement: int, depth: int | None) -> bool:
        """Whether SillyTavern runs this script on a prompt text of ``placement`` at ``depth``.

        At prompt time only ``promptOnly`` scripts run (the others ran when the message was stored,
        or only change what is displayed); the depth bounds are checked only for texts that have a
        depth.
        """
        if not self.prompt_only or self.disabled or not self.find_regex or placement not in self.placement:
            return False
        if depth is not None:
            if self.min_depth is not None and depth < self.min_depth:
                return False
            if self.max_depth is not None and depth > self.max_depth:
                return False
        return True


# JavaScript's Number() of a string: trimmed; "" is 0; decimal, exponent, Infinity, 0x/0o/0b integers
_JS_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_JS_RADIX = re.compile(r"0([xXoObB])([0-9a-fA-F]+)")
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_number(value: Any) -> float:
    """JavaScript's ``Number(value)`` for a JSON value (NaN where JavaScript gives NaN)."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip(_JS_SPACE)
        if not text:
            return 0.0
        if _JS_DECIMAL.fullmatch(text):
            return float(text.replace("Infinity", "inf"))
        radix = _JS_RADIX.fullmatch(text)
        if radix:
            base = {"x": 16, "o": 8, "b": 2}[radix.group(1).lower()]
            try:
                return float(int(radix.group(2), base))
            except ValueError:
                return math.nan
        return math.nan
    if isinstance(value, list | tuple):
        return js_number(value[0]) if len(value) == 1 and not isinstance(value[0], list | dict) else \
            (0.0 if not value else math.nan)
    return math.nan


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a JSON value."""
    if isinstance(value, float) and math.isnan(value):
        return False
    if isinstance(value, list | tuple | Mapping):
        return True
    return bool(value)


def _depth_bound(value: Any, floor: float) -> float | None:
    """``!isNaN(v) && v !== null && v >= floor``: the bound, or ``None`` when SillyTavern skips the check."""
    if value is None:
        return None
    number = js_number(value)
    if math.isnan(number) or number < floor:
        return None
    return number


def _fail(path: str, message: str) -> TemplateError:
    return TemplateError(f"{path}: {message}", code="REGEX_SCRIPT_INVALID", path=path)


def _text(obj: Mapping[str, Any], key: str, path: str, default: str = "") -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _fail(f"{path}.{key}", f"must be text, not {type(value).__name__}")
    return value


def _texts(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise _fail(f"{path}.{key}", "must be a list of texts")
    return tuple(value)


def _placements(obj: Mapping[str, Any], path: str) -> tuple[int, ...]:
    value = obj.get("placement")
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise _fail(f"{path}.placement", "must be a list of placement numbers (1 user input, 2 AI output, "
                                         "3 slash command, 5 world info, 6 reasoning)")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise _fail(f"{path}.placement[{i}]", f"must be a placement number, not {item!r}")
        if float(item).is_integer():
            out.append(int(item))
    return tuple(out)


def _depth(obj: Mapping[str, Any], key: str, path: str, floor: float) -> float | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, int | float | str):
        raise _fail(f"{path}.{key}", "must be a number, a numeric text or null")
    return _depth_bound(value, floor)


def _substitution(obj: Mapping[str, Any], path: str) -> Substitution | None:
    value = obj.get("substituteRegex")
    if value is not None and not isinstance(value, int | float | str | bool):
        raise _fail(f"{path}.substituteRegex", "must be 0, 1 or 2")
    number = js_number(value) if value is not None else math.nan
    return Substitution(int(number)) if number in (0, 1, 2) else None


def read_script(obj: Any, origin: ScriptOrigin, path: str) -> RegexScript:
    """One script object; ``path`` is its JSON path for errors."""
    if not isinstance(obj, Mapping):
        raise _fail(path, "a regex script must be an object")
    return RegexScript(
        origin=origin, name=_text(obj, "scriptName", path), find_regex=_text(obj, "findRegex", path),
        replace_string=_text(obj, "replaceString", path), trim_strings=_texts(obj, "trimStrings", path),
        placement=_placements(obj, path), disabled=js_truthy(obj.get("disabled")),
        markdown_only=js_truthy(obj.get("markdownOnly")), prompt_only=js_truthy(obj.get("promptOnly")),
        substitution=_substitution(obj, path), min_depth=_depth(obj, "minDepth", path, -1),
        max_depth=_depth(obj, "maxDepth", path, 0))


def read_scripts(value: Any, kind: ScriptSetKind, asset: str, path: str) -> list[RegexScript]:
    """A list of script objects (or one object, as a single-script export is) read in order.

    ``None`` is no scripts. Raises ``REGEX_SCRIPT_INVALID`` with the JSON path of the first bad field.
    """
    if value is None:
        return []
    items: Sequence[Any]
    if isinstance(value, Mapping):
        items, paths = [value], [path]
    elif isinstance(value, list | tuple):
        items, paths = value, [f"{path}[{i}]" for i in range(len(value))]
    else:
        raise _fail(path, "regex scripts must be a list of script objects (or one script object)")
    return [read_script(obj, ScriptOrigin(kind, asset, i, p), p) for i, (obj, p) in enumerate(zip(items, paths))]


#: scripts read from frozen (immutable, cached) asset lists, by the list's identity; the list is kept
#: alive by its entry, so its id is not reused while the entry is here
_READ: dict[tuple[int, str, str, str], tuple[Any, list[RegexScript]]] = {}
_READ_ENTRIES = 64


def read_scripts_cached(value: Any, kind: ScriptSetKind, asset: str, path: str) -> list[RegexScript]:
    """:func:`read_scripts` of an immutable list (a frozen asset's), read once per list object.

    A preset's 118 scripts cost milliseconds to read; the asset cache hands out the same frozen
    list for every request with that preset. Other values are read each time.
    """
    if not isinstance(value, tuple):
        return read_scripts(value, kind, asset, path)
    key = (id(value), kind, asset, path)
    found = _READ.get(key)
    if found is not None and found[0] is value:
        return list(found[1])
    scripts = read_scripts(value, kind, asset, path)
    if len(_READ) >= _READ_ENTRIES:
        _READ.pop(next(iter(_READ)))
    _READ[key] = (value, scripts)
    return list(scripts)
