"""Small SillyTavern preset fixtures shared by the request, budget and golden tests."""

from __future__ import annotations

from typing import Any

#: markers SillyTavern appends when an order lacks them; the fixtures switch the unused ones off
MERGED_MARKERS = ("worldInfoBefore", "worldInfoAfter", "charDescription", "charPersonality", "scenario")


def prompt(identifier: str, content: str = "", role: str = "system", **extra: Any) -> dict[str, Any]:
    """A prompt-manager prompt; anything but SillyTavern's known prompts is a user prompt."""
    user_prompt = identifier not in ("main", "nsfw", "jailbreak", "enhanceDefinitions")
    return {"identifier": identifier, "name": identifier, "role": role, "content": content,
            "system_prompt": not user_prompt, **extra}


def marker(identifier: str) -> dict[str, Any]:
    return {"identifier": identifier, "name": identifier, "marker": True}


def order(prompts: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    ids = [p["identifier"] for p in prompts]
    return [{"identifier": i, "enabled": True} for i in ids] + [
        {"identifier": i, "enabled": False} for i in MERGED_MARKERS if i not in ids]
