"""Warnings for object keys an input has but tavernbox does not read, naming the nearest known key.

A context with ``"card"`` where the contract says ``"character"`` used to render with no card at all
and no word why. Each unknown key now gives an ``INPUT_UNKNOWN_KEY`` warning at its JSON path with
the known key it most likely meant: an explicit alias when one is listed (``card`` -> ``character``),
else the closest spelling. The input is still read; the key is still ignored.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import Diagnostic

__all__ = ["nearest_key", "unknown_key_warnings"]

_PLAIN = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
#: Most warnings one object yields; an object with thousands of stray keys is summarised in one more.
MAX_WARNINGS = 50


def nearest_key(key: str, known: Iterable[str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The known key ``key`` most likely meant: an alias, a known key with a common prefix added, or the closest spelling."""
    names = list(known)
    lowered = key.lower()
    if aliases and lowered in aliases:
        return aliases[lowered]
    for name in names:
        if name.lower() == lowered or name.lower().endswith("_" + lowered):
            return name
    close = difflib.get_close_matches(lowered, names, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key_warnings(
    data: Any,
    known: Iterable[str],
    *,
    path: str = "$",
    what: str = "key",
    aliases: Mapping[str, str] | None = None,
) -> list[Diagnostic]:
    """One ``INPUT_UNKNOWN_KEY`` warning per key of ``data`` not in ``known`` (at most :data:`MAX_WARNINGS`)."""
    if not isinstance(data, Mapping):
        return []
    names = set(known)
    out: list[Diagnostic] = []
    unknown = [k for k in data if k not in names]
    for key in unknown[:MAX_WARNINGS]:
        text = str(key)
        where = f"{path}.{text}" if _PLAIN.match(text) else f"{path}[{json.dumps(text, ensure_ascii=True)}]"
        guess = nearest_key(text, sorted(names), aliases)
        hint = f"; did you mean {guess!r}?" if guess else ""
        out.append(
            Diagnostic(
                "INPUT_UNKNOWN_KEY",
                f"unknown {what} {json.dumps(text, ensure_ascii=True)} is ignored{hint}",
                severity="warning",
                path=where,
                data={"key": text, "nearest": guess} if guess else {"key": text},
            )
        )
    if len(unknown) > MAX_WARNINGS:
        out.append(Diagnostic("INPUT_UNKNOWN_KEY", f"{len(unknown) - MAX_WARNINGS} more unknown keys are ignored",
                              severity="warning", path=path))
    return out
