"""Every real preset of ``shared/corpora`` assembles through the request file with default options.

A user's first try: a corpus preset, a corpus card (cycling), a short chat, nothing else set. It must
succeed, send the chat once and in order, and a card with an embedded lorebook must have its
constant entries in the request (``world-info.js`` always activates constants).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED

from tavernbox import assemble_request
from tavernbox.assets import load_asset
from tavernbox.errors import CODES


CORPORA = SHARED / "corpora"
CHAT = {"messages": [{"role": "assistant", "content": "The gates creak open."},
                     {"role": "user", "content": "Hello there. Tell me about the city and the king."}]}

pytestmark = pytest.mark.needs_shared("corpora/presets", "corpora/cards")


def presets(shared: Any) -> list[Path]:
    return sorted(shared("corpora", "presets").glob("*.json"))


def cards(shared: Any) -> list[Path]:
    return sorted(p for p in shared("corpora", "cards").iterdir() if p.suffix in (".json", ".png"))


@pytest.mark.cases("preset_path", presets, ids=lambda p: p.stem)
def test_corpus_preset_assembles_with_default_options(preset_path: Path, shared: Any) -> None:
    all_presets, all_cards = presets(shared), cards(shared)
    card = all_cards[all_presets.index(preset_path) % len(all_cards)]
    sends_chat = _sends_chat(preset_path)
    if _max_context(preset_path) < 16_000 or not sends_chat:
        # a small context holds a small card only; a preset without a chat-history marker sends the
        # card and world info alone (as in SillyTavern), so it gets a card with a description
        card = CORPORA / "cards" / "st-default-seraphina.v2.json"
    result = assemble_request({"preset": str(preset_path), "card": str(card), "chat": CHAT})
    sent = [m["content"] for m in result.messages]
    if not sends_chat:
        assert not any(CHAT["messages"][1]["content"] in t for t in sent) and sent
        return
    # names_behavior may prefix the speaker ("Name: ..."), as SillyTavern does; the preset's own regex
    # scripts may rewrite a chat message around its text (tawa-delta wraps every one in tags)
    edited = {e["target"] for e in result.regex_edits}

    def is_chat(message: dict[str, Any], j: int) -> bool:
        text, content = CHAT["messages"][j]["content"], message["content"]
        if content == text or content.endswith(": " + text):
            return True
        return f"chat[{j}]" in edited and message["role"] == CHAT["messages"][j]["role"] and text in content

    chat_at = [i for i, m in enumerate(result.messages) for j in (0, 1) if is_chat(m, j)]
    assert len(chat_at) == 2 and chat_at[0] < chat_at[1]
    assert all(m["role"] in ("system", "user", "assistant") and isinstance(m["content"], str) for m in result.messages)
    assert not {w.code for w in result.warnings} - set(CODES)


def _sends_chat(preset: Path) -> bool:
    from tavernbox.strategies.sillytavern import prompt_sequence

    prompts, _ = prompt_sequence(load_asset(preset, kind="preset").model)
    return any(p.identifier == "chatHistory" for p in prompts)


def _max_context(preset: Path) -> int:
    return int(load_asset(preset, kind="preset").model.model_dump().get("openai_max_context") or 4095)


def test_a_card_larger_than_the_context_is_a_coded_error_naming_the_fix() -> None:
    """SillyTavern refuses to send when the prompts that must go in exceed the budget."""
    from tavernbox.errors import TemplateError

    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": str(CORPORA / "presets" / "st-default-openai.json"),
                          "card": str(CORPORA / "cards" / "prolix-shinobu.v3.json"), "chat": CHAT})
    assert err.value.code == "ST_CONTEXT_TOO_SMALL"
    assert "budget.max_context" in err.value.message
    bigger = assemble_request({"preset": str(CORPORA / "presets" / "st-default-openai.json"),
                               "card": str(CORPORA / "cards" / "prolix-shinobu.v3.json"), "chat": CHAT,
                               "budget": {"max_context": 1_000_000}})
    assert bigger.messages


def _constant_contents(card: Path) -> list[str]:
    book = load_asset(card, kind="card").model.character_book
    if book is None:
        return []
    return [e.content for e in book.entries.values() if e.constant and not e.disable and e.content.strip()
            and "{{" not in e.content and "<%" not in e.content]


@pytest.mark.cases("card_path", lambda shared: [c for c in cards(shared) if _constant_contents(c)],
                   ids=lambda p: p.stem)
def test_embedded_lorebook_constants_fire(card_path: Path) -> None:
    result = assemble_request({"preset": str(CORPORA / "presets" / "st-default-openai.json"), "card": str(card_path),
                               "chat": CHAT, "world_info": {"world_info_budget": 100},
                               "budget": {"max_context": 1_000_000}})
    sent = "\n".join(m["content"] for m in result.messages)
    fired = [c for c in _constant_contents(card_path) if c.strip() in sent]
    assert fired, f"no constant entry of {card_path.name} reached the request"
