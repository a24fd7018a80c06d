"""SillyTavern 1.18's built-in macros, one module per family.

Each module exposes ``register(registry)``; :func:`builtin_registry` builds the shared default
table once. Hosts get a private copy through ``MacroRegistry.default()``.
"""

from __future__ import annotations

from functools import lru_cache

from ..registry import MacroRegistry

__all__ = ["builtin_registry"]


@lru_cache(maxsize=1)
def builtin_registry() -> MacroRegistry:
    """The built-in catalogue (do not mutate: copy it first)."""
    from . import character, chat, core, instruct, random, time, variables

    registry = MacroRegistry()
    for family in (core, character, chat, variables, random, time, instruct):
        family.register(registry)
    return registry
