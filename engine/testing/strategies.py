"""Hypothesis strategies for tavernbox inputs, exported for users' own fuzzing.

``macro_templates()`` generates macro-heavy text; ``ejs_templates()`` generates EJS templates.
Each family lives in its own module; this one re-exports them (imported on first use so that a
caller who wants one family does not pay for the other).
"""

from __future__ import annotations

import importlib
from typing import Any

_FAMILIES = {
    "macro_templates": "tavernbox.testing.macro_strategies",
    "ejs_templates": "tavernbox.testing.ejs_strategies",
}

__all__ = sorted(_FAMILIES)


def __getattr__(name: str) -> Any:
    module = _FAMILIES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
