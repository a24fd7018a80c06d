"""Strict JSON at every boundary: the project's one rule for text Python cannot encode, and for NaN.

JSON may spell a lone UTF-16 surrogate (``"\\ud800"``): the grammar allows the escape, but the result
is not Unicode text, and no UTF-8 output (a terminal, a JSON answer a strict consumer reads, an HTTP
body) can carry it. Replacing it with U+FFFD would change what the user gave without their knowing, so
tavernbox **refuses** such input with ``TEXT_SURROGATE`` and the JSON path of the string (or key) that
holds it, at every place text enters: asset files, CLI inputs (context, vars, chat, settings, each
``--jsonl`` row on its own, so a batch goes on past a bad row) and the answers a command writes (a
template that cuts a JavaScript string inside a surrogate pair gets the same code for ``$.text``).

``NaN``, ``Infinity`` and numbers beyond a double (``1e999``) are not JSON either, though Python's
parser accepts them: :func:`loads` refuses them with the caller's code at the line:column they sit at.

Everything here is linear in the input: the surrogate walk only runs when the text contains an escape
that could produce one (``\\ud800``-``\\udfff``), and on output only when encoding actually fails.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import TemplateError

__all__ = [
    "NonFiniteNumber",
    "SURROGATE_CODE",
    "check_json_source",
    "check_json_text",
    "check_output",
    "find_surrogate",
    "join_pairs",
    "loads",
    "refuse_non_finite",
    "refuse_surrogates",
]

#: The stable code of every refusal under the lone-surrogate rule.
SURROGATE_CODE = "TEXT_SURROGATE"

_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON (``\ud8xx``) or YAML (``\U0000d8xx``) escape that can stand for a surrogate code point.
_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")
_PLAIN_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$|^[0-9]+$")
#: String literals (skipped whole), the non-JSON constants, and number literals, for locating a refusal.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)\b|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)', re.S)


def _join(path: str, part: str | int) -> str:
    """Extend a JSON path; a key holding a surrogate is written ASCII-escaped so the path itself is printable."""
    if isinstance(part, int):
        return f"{path}[{part}]"
    if _PLAIN_KEY.match(part):
        return f"{path}.{part}"
    return f"{path}[{json.dumps(part, ensure_ascii=_SURROGATE.search(part) is not None)}]"


def _has_surrogate(value: Any) -> bool:
    """Whether any string or key in ``value`` holds a surrogate (no paths built: the common, clean case)."""
    stack = [value]
    search = _SURROGATE.search
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if search(node) is not None:
                return True
        elif isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and search(key) is not None:
                    return True
                if isinstance(child, (str, dict, list, tuple)):
                    stack.append(child)
        elif isinstance(node, (list, tuple)):
            stack.extend(child for child in node if isinstance(child, (str, dict, list, tuple)))
    return False


def find_surrogate(value: Any, base_path: str = "$") -> tuple[str, int, int] | None:
    """The first lone surrogate in ``value`` in document order: ``(JSON path, offset, code point)``, else ``None``.

    The walk is iterative (no recursion limit); paths are only built once a surrogate is known to be
    there. A surrogate in an object key reports the path of that key.
    """
    if not _has_surrogate(value):
        return None
    # (node, path, is_key): a key is checked just before its value, so the first hit is the first in the text
    stack: list[tuple[Any, str, bool]] = [(value, base_path, False)]
    while stack:
        node, path, is_key = stack.pop()
        if isinstance(node, str):
            m = _SURROGATE.search(node)
            if m is not None:
                return path, m.start(), ord(m.group())
        elif is_key:
            continue
        elif isinstance(node, dict):
            for key, child in reversed(list(node.items())):
                child_path = _join(path, key if isinstance(key, (str, int)) else str(key))
                if isinstance(child, (str, dict, list, tuple)):
                    stack.append((child, child_path, False))
                if isinstance(key, str):
                    stack.append((key, child_path, True))
        elif isinstance(node, (list, tuple)):
            for index in range(len(node) - 1, -1, -1):
                if isinstance(node[index], (str, dict, list, tuple)):
                    stack.append((node[index], _join(path, index), False))
    return None


def join_pairs(value: Any) -> Any:
    """``value`` with each high+low surrogate pair in its strings (and keys) joined into one character.

    YAML parsers read ``"\\ud83d\\ude00"`` as two code points, where JSON (which YAML 1.2 contains) means
    one emoji; joining them first means only truly lone surrogates meet :func:`refuse_surrogates`.
    Returns ``value`` itself when nothing needed joining.
    """
    if not _has_surrogate(value):
        return value

    def fix(text: str) -> str:
        if _SURROGATE.search(text) is None:
            return text
        # surrogatepass writes each surrogate as its UTF-16 unit; decoding joins pairs and keeps lone
        # ones (as lone surrogates again) for the refusal to find.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return fix(node)
        if isinstance(node, dict):
            return {fix(k) if isinstance(k, str) else k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value)


def refuse_surrogates(value: Any, *, what: str, base_path: str = "$") -> None:
    """Raise ``TEXT_SURROGATE`` (with the JSON path) when ``value`` holds a lone surrogate anywhere."""
    found = find_surrogate(value, base_path)
    if found is None:
        return
    path, offset, code_point = found
    raise TemplateError(
        f"{what} holds a lone surrogate U+{code_point:04X} at {path} (character {offset}); it is not Unicode "
        "text and cannot be written as UTF-8, so it is refused rather than silently replaced",
        code=SURROGATE_CODE,
        path=path,
    )


def check_json_text(text: str, value: Any, *, what: str, base_path: str = "$") -> None:
    """:func:`refuse_surrogates` for a value parsed from ``text``, skipped when no escape could have made one.

    Decoded UTF-8 never holds a surrogate, so only an escape in the source can: the text pre-check keeps
    the walk off the common path.
    """
    if _ESCAPE.search(text) is not None:
        refuse_surrogates(value, what=what, base_path=base_path)


def check_json_source(text: str, *, what: str) -> None:
    """Refuse JSON text whose strings would hold a lone surrogate, for text a later stage parses itself.

    Parses only when an escape that could make one is present; text that is not JSON is left for that
    stage to report in its own words.
    """
    if _ESCAPE.search(text) is None:
        return
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return
    refuse_surrogates(value, what=what)


def check_output(value: Any, *, what: str = "the answer") -> None:
    """Refuse an answer that could not be written as UTF-8 (``TEXT_SURROGATE`` with its path).

    Tried as one encode first, so a clean answer costs one serialisation and nothing more.
    """
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        refuse_surrogates(value, what=what)
    except (TypeError, ValueError):
        return  # not JSON data: the caller's serialiser reports it


def refuse_non_finite(value: Any, *, what: str, code: str, base_path: str = "$") -> None:
    """Raise ``code`` with the JSON path of the first NaN or infinite number in ``value`` (JSON5, YAML).

    JSON5 spells ``NaN``/``Infinity`` and YAML ``.nan``/``.inf``; the asset formats are JSON, which has
    neither, and SillyTavern would hold values no JSON file can save back.
    """
    stack: list[tuple[Any, str]] = [(value, base_path)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise NonFiniteNumber(f"{what} holds {node!r} at {path}; JSON has no NaN or Infinity", code=code, path=path)
        if isinstance(node, dict):
            stack.extend((child, _join(path, key if isinstance(key, (str, int)) else str(key)))
                         for key, child in reversed(list(node.items())) if isinstance(child, (float, dict, list)))
        elif isinstance(node, list):
            stack.extend((node[i], _join(path, i)) for i in range(len(node) - 1, -1, -1)
                         if isinstance(node[i], (float, dict, list)))


class NonFiniteNumber(TemplateError):
    """A ``NaN``, ``Infinity`` or overflowing number: refused whatever other syntax could read it."""


class _NotJson(Exception):
    """Raised inside the parser hooks; turned into a located TemplateError by :func:`loads`."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _constant(token: str) -> Any:
    raise _NotJson(token)


def _float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise _NotJson(token)
    return value


def _locate(text: str, token: str) -> tuple[int, int] | None:
    """Line and column of the first ``token`` outside a string literal (string-aware scan)."""
    for m in _TOKEN.finditer(text):
        if token in (m.group(1), m.group(2)):
            line = text.count("\n", 0, m.start()) + 1
            column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            return line, column
    return None


def loads(
    text: str,
    *,
    what: str,
    code: str = "INPUT_INVALID",
    strict: bool = True,
    parse_int: Any = None,
    base_path: str = "$",
) -> Any:
    """Parse JSON text under the project's rules, raising ``TemplateError`` for what is not JSON.

    ``code`` is the caller's code for syntax errors and for ``NaN``/``Infinity``/``1e999`` (which
    Python accepts and JSON does not); a lone surrogate is ``TEXT_SURROGATE`` whatever ``code`` is.
    ``json.JSONDecodeError`` (and ``RecursionError``) propagate for the caller to word, since callers
    report positions differently.
    """
    try:
        value = json.loads(text, strict=strict, parse_constant=_constant, parse_float=_float, parse_int=parse_int)
    except _NotJson as exc:
        where = _locate(text, exc.token)
        kind = "a number beyond a double" if exc.token[-1:].isdigit() else "a non-JSON constant"
        raise NonFiniteNumber(
            f"{what} is not valid JSON: {kind} {exc.token[:40]}; JSON has no NaN or Infinity",
            code=code,
            line=where[0] if where else None,
            column=where[1] if where else None,
            path=None if where else base_path,
        ) from None
    check_json_text(text, value, what=what, base_path=base_path)
    return value
