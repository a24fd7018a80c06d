"""MVU variable files and ``[InitVar]`` world-info entries: the variables they define.

An MVU file is data, not prompt text: it is not linted for macros, but every variable it defines
counts as *set* for the asset set, so a macro or template reading it is not reported as reading
a variable nothing sets. MVU keeps the state under ``stat_data`` (and ``display_data`` /
``delta_data``), which count as set too once any MVU data is linted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MVU_ROOTS", "initvar_names", "mvu_names"]

MVU_ROOTS = ("stat_data", "display_data", "delta_data")
#: an [InitVar] entry larger than this is not parsed for names
_MAX_INITVAR_CHARS = 256 * 1024


def mvu_names(value: Any) -> set[str]:
    """The variable names an MVU file defines: its top-level keys and MVU's own roots."""
    names = set(MVU_ROOTS)
    if isinstance(value, Mapping):
        names.update(str(k) for k in value if not str(k).startswith("$"))
    return names


def initvar_names(content: str) -> set[str]:
    """The names an ``[InitVar]`` entry's YAML/JSON content defines (empty when it does not parse)."""
    if len(content) > _MAX_INITVAR_CHARS:
        return set(MVU_ROOTS)
    from ..assets.loader import parse_structured
    from ..errors import TemplateError

    try:
        value, _, _ = parse_structured(content, suffix=".yaml", prefer_yaml=True)
    except (TemplateError, RecursionError, ValueError):
        return set(MVU_ROOTS)
    return mvu_names(value)
