"""Import real-world assets: character cards, world books, chat-completion presets, MVU variables.

``load_asset(path_or_bytes)`` detects the kind, validates it into a pydantic model with SillyTavern's
defaults, keeps every unknown field, and reports repairs as diagnostics. Nothing a file carries
(scripts, regexes, templates) is ever run here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> submodule; imported on first use, so a stage that needs only the frozen views
# (:mod:`.frozen`, read by the assembler) does not pay for pydantic and the models
_LAZY: dict[str, str] = {
    "CharacterCard": "cards", "CharacterCardData": "cards", "DepthPrompt": "cards", "parse_card": "cards",
    "read_png_card": "cards",
    "KINDS": "detect", "detect_kind": "detect",
    "LoadedAsset": "loader", "load_asset": "loader", "parse_structured": "loader",
    "MvuVariables": "mvu", "is_value_with_description": "mvu", "parse_mvu": "mvu",
    "GLOBAL_CHARACTER_ID": "presets", "Preset": "presets", "PresetPrompt": "presets", "PromptOrder": "presets",
    "PromptOrderItem": "presets", "parse_preset": "presets",
    "ST_ENTRY_DEFAULTS": "worldbooks", "CharacterBook": "worldbooks", "CharacterBookEntry": "worldbooks",
    "CharacterFilter": "worldbooks", "WorldBook": "worldbooks", "WorldInfoEntry": "worldbooks",
    "card_book_to_world_book": "worldbooks", "parse_world_book": "worldbooks",
    "AssetCache": "cache", "AssetView": "cache", "clear_asset_cache": "cache", "load_cached": "cache",
    "parse_cached": "cache",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover - the lazy exports' real types, for type checkers only
    # (``X as X`` marks a re-export)
    from .cache import (
        AssetCache as AssetCache,
        AssetView as AssetView,
        clear_asset_cache as clear_asset_cache,
        load_cached as load_cached,
        parse_cached as parse_cached,
    )
    from .cards import (
        CharacterCard as CharacterCard,
        CharacterCardData as CharacterCardData,
        DepthPrompt as DepthPrompt,
        parse_card as parse_card,
        read_png_card as read_png_card,
    )
    from .detect import KINDS as KINDS, detect_kind as detect_kind
    from .loader import LoadedAsset as LoadedAsset, load_asset as load_asset, parse_structured as parse_structured
    from .mvu import (
        MvuVariables as MvuVariables,
        is_value_with_description as is_value_with_description,
        parse_mvu as parse_mvu,
    )
    from .presets import (
        GLOBAL_CHARACTER_ID as GLOBAL_CHARACTER_ID,
        Preset as Preset,
        PresetPrompt as PresetPrompt,
        PromptOrder as PromptOrder,
        PromptOrderItem as PromptOrderItem,
        parse_preset as parse_preset,
    )
    from .worldbooks import (
        ST_ENTRY_DEFAULTS as ST_ENTRY_DEFAULTS,
        CharacterBook as CharacterBook,
        CharacterBookEntry as CharacterBookEntry,
        CharacterFilter as CharacterFilter,
        WorldBook as WorldBook,
        WorldInfoEntry as WorldInfoEntry,
        card_book_to_world_book as card_book_to_world_book,
        parse_world_book as parse_world_book,
    )
