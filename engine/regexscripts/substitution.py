"""Macro substitution for regex scripts: SillyTavern's ``substituteParams``, plain and escaped for a pattern.

A script's replacement and trim strings have their macros expanded as any prompt text; a pattern with
``substituteRegex`` 1 too, and with 2 each macro's value is escaped first so that a name such as
``Ash.K`` matches only itself (``\\n \\r \\t \\v \\f \\0`` for those characters, a backslash before
``. ^ $ * + ? { } [ ] \\ / | ( )``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..macros import MacroContext, expand_macros

__all__ = ["escape_for_pattern", "macro_substituters"]

_SPECIAL = re.compile(r"[\n\r\t\v\f\0.^$*+?{}\[\]\\/|()]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"}


def escape_for_pattern(value: str) -> str:
    """A macro's value made literal inside a JavaScript pattern, as SillyTavern escapes it."""
    return _SPECIAL.sub(lambda m: _NAMED.get(m.group(0), "\\" + m.group(0)), value)


def macro_substituters(context: MacroContext | Mapping[str, Any], seed: int = 0
                       ) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """``(plain, escaped)`` macro expansion for ``context``; the context is built once, on first use."""
    built: list[MacroContext] = []

    def ready() -> MacroContext:
        if not built:
            built.append(context if isinstance(context, MacroContext) else MacroContext.from_dict(context))
        return built[0]

    def plain(text: str) -> str:
        return expand_macros(text, ready(), seed=seed).text

    def escaped(text: str) -> str:
        result = expand_macros(text, ready(), seed=seed, trace=True)
        out, at = [], 0
        for seg in result.segments:
            out.append(result.text[at:seg.start])
            out.append(escape_for_pattern(result.text[seg.start:seg.end]))
            at = seg.end
        out.append(result.text[at:])
        return "".join(out)

    return plain, escaped
