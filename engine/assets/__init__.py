"""Import real-world assets: character cards, world books, chat-completion presets, MVU variables.

``load_asset(path_or_bytes)`` detects the kind, validates it into a pydantic model with SillyTavern's
defaults, keeps every unknown field, and reports repairs as diagnostics. Nothing a file carries
(scripts, regexes, templates) is ever run here.
"""

from __future__ import annotations

from .cards import CharacterCard, CharacterCardData, DepthPrompt, parse_card, read_png_card
from .detect import KINDS, detect_kind
from .loader import LoadedAsset, load_asset, parse_structured
from .mvu import MvuVariables, is_value_with_description, parse_mvu
from .presets import GLOBAL_CHARACTER_ID, Preset, PresetPrompt, PromptOrder, PromptOrderItem, parse_preset
from .worldbooks import (
    ST_ENTRY_DEFAULTS,
    CharacterBook,
    CharacterBookEntry,
    CharacterFilter,
    WorldBook,
    WorldInfoEntry,
    card_book_to_world_book,
    parse_world_book,
)

__all__ = [
    "GLOBAL_CHARACTER_ID",
    "KINDS",
    "ST_ENTRY_DEFAULTS",
    "CharacterBook",
    "CharacterBookEntry",
    "CharacterCard",
    "CharacterCardData",
    "CharacterFilter",
    "DepthPrompt",
    "LoadedAsset",
    "MvuVariables",
    "Preset",
    "PresetPrompt",
    "PromptOrder",
    "PromptOrderItem",
    "WorldBook",
    "WorldInfoEntry",
    "card_book_to_world_book",
    "detect_kind",
    "is_value_with_description",
    "load_asset",
    "parse_card",
    "parse_mvu",
    "parse_preset",
    "parse_structured",
    "parse_world_book",
    "read_png_card",
]
