"""JSON paths for diagnostics: ``$.data.character_book.entries[3].keys``.

A user fixing a 1.8 MB single-line card needs to know *which* field is wrong; a line:column into one
enormous line helps little, a path helps at once. Object keys that are plain identifiers or digits are
written with a dot, anything else in brackets and quotes; list indices in brackets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

__all__ = ["join_path", "path_from_loc"]

_PLAIN = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$|^[0-9]+$")


def join_path(base: str, *parts: str | int) -> str:
    """Append object keys (str) and list indices (int) to a JSON path."""
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def path_from_loc(base: str, loc: Iterable[str | int]) -> str:
    """A JSON path from a pydantic error location (its tuple of keys and indices)."""
    return join_path(base, *[p for p in loc if isinstance(p, (str, int))])
