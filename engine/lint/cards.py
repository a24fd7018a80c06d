"""Character cards: which fields are prompt text, and the embedded world book.

The fields SillyTavern sends (description, personality, scenario, greetings, example messages,
the card's system prompt and post-history instructions, the depth prompt) are linted as prompts;
``creator_notes`` is never sent and is skipped. The embedded ``character_book`` is converted the
way SillyTavern imports it (``assets.worldbooks.card_book_to_world_book``) and checked as a book.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..assets.cards import CharacterCard
from ..assets.paths import join_path
from ..assets.worldbooks import card_book_to_world_book
from ..errors import Diagnostic, TemplateError
from ..worldinfo.entries import normalize_entry
from .worldinfo import BookEntry

__all__ = ["card_book_entries", "card_prompt_paths"]

_TEXT_FIELDS = ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt",
                "post_history_instructions")
_LIST_FIELDS = ("alternate_greetings", "group_only_greetings")


def _data(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    data = raw.get("data")
    if isinstance(data, Mapping):
        return data, "$.data"
    return raw, "$"  # a v1 card: the fields are top-level


def card_prompt_paths(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(JSON path, text)`` of every sent text field of the card that holds text."""
    data, base = _data(raw)
    out: list[tuple[str, str]] = []
    for name in _TEXT_FIELDS:
        value = data.get(name)
        if isinstance(value, str) and value:
            out.append((join_path(base, name), value))
    for name in _LIST_FIELDS:
        values = data.get(name)
        if isinstance(values, list):
            out.extend((join_path(base, name, i), v) for i, v in enumerate(values) if isinstance(v, str) and v)
    extensions = data.get("extensions")
    depth = extensions.get("depth_prompt") if isinstance(extensions, Mapping) else None
    if isinstance(depth, Mapping) and isinstance(depth.get("prompt"), str) and depth["prompt"]:
        out.append((join_path(base, "extensions", "depth_prompt", "prompt"), depth["prompt"]))
    return out


def card_book_entries(raw: Mapping[str, Any], card: CharacterCard) -> tuple[str, list[BookEntry], Mapping[str, Any]] | None:
    """The embedded book's name, entries (paths into the card) and raw object, or None without one."""
    data, base = _data(raw)
    book = data.get("character_book")
    if not isinstance(book, Mapping) or not isinstance(book.get("entries"), list):
        return None
    name = book.get("name") if isinstance(book.get("name"), str) and book.get("name") else card.name
    try:
        converted = card_book_to_world_book(dict(book), name=name)
    except TemplateError:
        return None
    raw_entries = book["entries"]
    st_entries = list(converted.to_st_dict()["entries"].items())
    book_path = join_path(base, "character_book")
    out: list[BookEntry] = []
    sink: list[Diagnostic] = []
    aligned = len(st_entries) == len(raw_entries)
    for i, (uid, st_entry) in enumerate(st_entries):
        path = join_path(book_path, "entries", i) if aligned else join_path(book_path, "entries")
        entry = normalize_entry(st_entry, name, uid, path, sink)
        if entry is None:
            continue
        source = raw_entries[i] if aligned and isinstance(raw_entries[i], Mapping) else st_entry
        out.append(BookEntry(entry, source, path, key_field="keys", secondary_field="secondary_keys",
                             depth_path=join_path(path, "extensions", "depth") if aligned else path))
    return name, out, book
