"""Strategies: SillyTavern's prompt manager as a source, and the built-in assembly strategies.

``sillytavern`` places a SillyTavern chat-completion preset plus a card as SillyTavern does (the
``builtin-st`` strategy's source); ``builtin`` holds the three built-in strategies (immutable,
copy-on-edit) and the per-session selection (apply, select, preview); ``components`` the prompt
studio's components. The request SillyTavern sends, built on these, is :mod:`tavernbox.sillytavern`.
"""

from __future__ import annotations

from .builtin import (
    BUILTIN_IDS,
    DEFAULT_STRATEGY,
    SelectionStore,
    StrategyLibrary,
    builtin_strategy,
    is_builtin,
)
from .sillytavern import (
    PRESET_SOURCE,
    apply_names_behavior,
    register_preset_source,
    split_examples,
    squash_system_messages,
    st_messages,
    st_registry,
)

__all__ = [
    "BUILTIN_IDS",
    "DEFAULT_STRATEGY",
    "PRESET_SOURCE",
    "SelectionStore",
    "StrategyLibrary",
    "apply_names_behavior",
    "builtin_strategy",
    "is_builtin",
    "register_preset_source",
    "split_examples",
    "squash_system_messages",
    "st_messages",
    "st_registry",
]
