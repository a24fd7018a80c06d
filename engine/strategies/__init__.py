"""Strategies: SillyTavern's prompt manager as a source, and the built-in assembly strategies.

``sillytavern`` places a SillyTavern chat-completion preset plus a card as SillyTavern does;
``builtin`` holds the three built-in strategies (immutable, copy-on-edit) and the per-session
selection (apply, select, preview); ``st_request``/``st_chat``/``st_assemble``/``st_postprocess``
turn a request file into exactly the messages SillyTavern sends (:func:`assemble_request`).
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
from .st_assemble import StAssembly, assemble_request
from .st_batch import assemble_requests
from .st_request import StRequest, parse_request
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
    "StAssembly",
    "StRequest",
    "StrategyLibrary",
    "apply_names_behavior",
    "assemble_request",
    "assemble_requests",
    "builtin_strategy",
    "is_builtin",
    "parse_request",
    "register_preset_source",
    "split_examples",
    "squash_system_messages",
    "st_messages",
    "st_registry",
]
