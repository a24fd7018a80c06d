"""Every real-world SillyTavern preset assembles with a real card, under every built-in strategy.

Each preset of ``shared/corpora/presets`` is paired with a card of ``shared/corpora/cards``
(cycling), the card's embedded book is activated against the chat, and the request is assembled
with ``builtin-st`` and ``builtin-native-slots``. It must succeed, keep every native message exactly
once, and report only catalogued diagnostic codes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tavernbox.assembler import Assembler
from tavernbox.assembler.sources import world_info_from_activation
from tavernbox.assets import load_asset
from tavernbox.errors import CODES
from tavernbox.assets.presets import parse_preset as parse_st_preset
from tavernbox.strategies import builtin_strategy, st_registry
from tavernbox.strategies.sillytavern import prompt_sequence
from tavernbox.worldinfo import activate_world_info

CHAT = [
    {"id": "u1", "role": "user", "content": "Hello there. Tell me about the city and the king."},
    {"id": "a1", "role": "assistant", "content": "The city is quiet tonight."},
    {"id": "u2", "role": "user", "content": "What happens next?"},
]


def presets(shared: Any) -> list[Path]:
    return sorted(shared("corpora", "presets").glob("*.json"))


def cards(shared: Any) -> list[Path]:
    return sorted(p for p in shared("corpora", "cards").iterdir() if p.suffix in (".json", ".png"))


@cache
def _card(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    model = load_asset(path, kind="card").model
    data = model.model_dump(mode="json")
    data = data.get("data", data)
    book = model.character_book
    entries: list[dict[str, Any]] = []
    if book is not None:
        chat = [{"role": m["role"], "content": m["content"]} for m in CHAT]
        entries = world_info_from_activation(activate_world_info(book.to_st_dict(), chat, seed=1))
    return {k: v for k, v in data.items() if k != "character_book"}, entries


@cache
def _st(path: Path) -> dict[str, Any]:
    return load_asset(path, kind="preset").model.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("strategy", ["builtin-st", "builtin-native-slots"])
@pytest.mark.cases("preset_path", presets, ids=lambda p: p.stem)
def test_corpus_preset_assembles_with_a_card(preset_path: Path, strategy: str, shared: Any) -> None:
    st = _st(preset_path)
    all_presets, all_cards = presets(shared), cards(shared)
    card, world_info = _card(all_cards[all_presets.index(preset_path) % len(all_cards)])
    result = Assembler(st_registry()).assemble({
        "preset": builtin_strategy(strategy), "messages": CHAT, "input_ids": ["u2"],
        "assets": {"st_preset": st, "character": card, "world_info": world_info, "include_greeting_reference": True,
                   "persona": {"name": "Ann", "description": "A traveller."}},
        "system_prompt_update": "in-history"})
    native_ids = [m["id"] for m in result.logical_messages if m["id"] in {"u1", "a1", "u2"}]
    assert native_ids == ["u1", "a1", "u2"]
    assert len(result.logical_messages) > 3
    unknown = {d.code for d in result.diagnostics} - set(CODES)
    assert not unknown, f"uncatalogued diagnostic codes {unknown}"
    prompts, _ = prompt_sequence(parse_st_preset(st))
    markers = {p.identifier for p in prompts}
    if {"worldInfoBefore", "worldInfoAfter", "dialogueExamples"} <= markers:
        # every activated entry has a place in such a preset: none may be dropped silently
        assert "ST_WORLD_INFO_UNPLACED" not in {d.code for d in result.diagnostics}
