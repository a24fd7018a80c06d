"""Where a JSON path's string value sits in the file, and an offset inside it in file terms.

Findings are positioned inside the prompt text (what an author edits in SillyTavern), but SARIF
regions and editors need the file's own line and column. A regex tokenizer walks the JSON text
once (the C regex engine does the per-character work, so a 1.8 MB card costs a few tens of
milliseconds) and records the offset of every string value by its JSON path; an offset in the
decoded string is then mapped through the escapes of its literal (``\\n``, ``\\uXXXX``, surrogate
pairs) to an offset in the file.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from ..assets.paths import join_path

__all__ = ["JsonLocator"]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
#: deeper documents are not located (positions then fall back to the JSON path alone)
_MAX_DEPTH = 512


class JsonLocator:
    """String-value offsets of one JSON text, by JSON path (``assets.paths.join_path`` form)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._strings: dict[str, tuple[int, int]] | None = None
        self._maps: dict[str, tuple[list[int], list[int]]] = {}
        self._lines: list[int] | None = None

    @property
    def strings(self) -> dict[str, tuple[int, int]]:
        """path -> (start, end) of each string literal, quotes included (scanned on first use:
        most linted files have no finding that needs a file position)."""
        if self._strings is None:
            self._strings = {}
            self._scan()
        return self._strings

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a file offset, through a line index built once."""
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._lines, offset)
        return line, offset - self._lines[line - 1] + 1

    def _scan(self) -> None:
        strings = self._strings
        assert strings is not None
        # stack of [container kind, path, next index, pending key]
        stack: list[list] = []
        key: str | None = None
        expect_key = False
        for m in _TOKEN.finditer(self.text):
            tok = m.group(0)
            c = tok[0]
            if c in "{[":
                if len(stack) >= _MAX_DEPTH:
                    return
                stack.append([c, self._value_path(stack, key), 0])
                expect_key = c == "{"
                key = None
            elif c in "}]":
                if stack:
                    stack.pop()
                if stack and stack[-1][0] == "[":
                    stack[-1][2] += 1
                expect_key = False
            elif c == ",":
                expect_key = bool(stack) and stack[-1][0] == "{"
                key = None if expect_key else key
            elif c == ":":
                expect_key = False
            elif c == '"':
                if expect_key and stack and stack[-1][0] == "{":
                    key = _decode(tok)
                    expect_key = False
                    continue
                path = self._value_path(stack, key)
                strings[path] = (m.start(), m.end())
                if stack and stack[-1][0] == "[":
                    stack[-1][2] += 1
            else:  # number, true, false, null
                if stack and stack[-1][0] == "[":
                    stack[-1][2] += 1

    @staticmethod
    def _value_path(stack: list[list], key: str | None) -> str:
        if not stack:
            return "$"
        kind, path, index = stack[-1]
        return join_path(path, index) if kind == "[" else join_path(path, key if key is not None else "")

    def offset(self, path: str, k: int) -> int | None:
        """The file offset of character ``k`` of the string at ``path``, or None when unknown."""
        found = self.strings.get(path)
        if found is None:
            return None
        start, end = found
        maps = self._maps.get(path)
        if maps is None:
            maps = self._maps[path] = _escape_map(self.text, start + 1, end - 1)
        decoded, raw = maps
        i = bisect.bisect_right(decoded, k) - 1
        return raw[i] + (k - decoded[i])

    def locator(self, path: str) -> Callable[[int], tuple[int, int] | None]:
        """``offset -> (line, column)`` in the file for the string at ``path`` (None if not found)."""

        def locate(k: int) -> tuple[int, int] | None:
            at = self.offset(path, k)
            return None if at is None else self.line_col(at)

        return locate


def _decode(token: str) -> str:
    if "\\" not in token:
        return token[1:-1]
    import json

    try:
        value = json.loads(token, strict=False)
    except ValueError:
        return token[1:-1]
    return value if isinstance(value, str) else token[1:-1]


def _escape_map(text: str, lo: int, hi: int) -> tuple[list[int], list[int]]:
    """Breakpoints ``(decoded offset, raw offset)`` between which the literal maps one to one."""
    decoded = [0]
    raw = [lo]
    d = 0
    pos = lo
    pending_high = False
    for m in _ESCAPE.finditer(text, lo, hi):
        d += m.start() - pos
        unit = m.group(1)
        if unit is not None and pending_high and 0xDC00 <= int(unit, 16) <= 0xDFFF:
            width = 0  # the low half of a surrogate pair: the pair is one Python character
        else:
            width = 1
        pending_high = unit is not None and 0xD800 <= int(unit, 16) <= 0xDBFF
        d += width
        pos = m.end()
        decoded.append(d)
        raw.append(pos)
    return decoded, raw
