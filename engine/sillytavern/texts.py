"""The texts of the card, the persona, the Author's Note, the depth prompts and the group.

SillyTavern reads the card's fields through ``getCharacterCardFields`` (trimmed, carriage returns
removed, the chat's scenario and example overrides winning), joins a group's member cards in the
join modes (:mod:`.groups`), reads the persona description trimmed, and sends the Author's Note
only on the turns its interval says. :func:`card_texts` is that stage; :func:`persona_block` and
:func:`author_note_block` give the placement its persona and Author's Note as the preset source
reads them. Text passes (:mod:`.passes`) read the card fields, the persona, the preset's prompts
and the Author's Note here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..assets.chats import StChat
from .groups import JOIN_MODES, join_group_cards
from .loading import Loaded
from .passes import TextPass, run_passes, wants
from .request import StRequest

__all__ = ["Texts", "author_note_block", "card_texts", "persona_block"]

_PERSONA_POSITIONS = {"in_prompt": 0, "top_an": 2, "bottom_an": 3, "at_depth": 4, "none": 9}

#: card fields SillyTavern reads through ``baseChatReplace(field.trim())`` (``getCharacterCardFields``)
_TRIMMED_FIELDS = ("description", "personality", "scenario", "mes_example", "system_prompt",
                   "post_history_instructions", "creator_notes")

def _card_as_sillytavern_reads_it(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card fields as SillyTavern's prompt builder sees them: trimmed, carriage returns removed.

    SillyTavern has no nickname: ``{{char}}`` is the card's ``name``, so ``nickname`` is dropped.
    """
    out = {k: v for k, v in card.items() if k != "nickname"}
    for key in _TRIMMED_FIELDS:
        if isinstance(out.get(key), str):
            out[key] = out[key].strip().replace("\r", "")
    ext = out.get("extensions")
    if isinstance(ext, Mapping) and isinstance(ext.get("depth_prompt"), Mapping) \
            and isinstance(ext["depth_prompt"].get("prompt"), str):
        dp = dict(ext["depth_prompt"])
        dp["prompt"] = dp["prompt"].strip().replace("\r", "")
        out["extensions"] = {**ext, "depth_prompt": dp}
    return out

def _author_note_active(interval: int, users: int) -> bool:
    """SillyTavern's interval rule (``setFloatingPrompt``): counted in the chat's ``users`` user messages."""
    if interval == 1:
        return True
    if users <= 0 or interval <= 0:
        return False
    left = users % interval if users >= interval else interval - users
    return left == 0


@dataclass(slots=True)
class Texts:
    """The names and texts the prompt is built from, as SillyTavern reads them."""

    loaded: Loaded
    #: the user's name: the request's, else the chat export's ``user_name``, else "User"
    user: str
    #: the replying character's name (``{{char}}``): the card's ``name``, else the chat export's
    #: ``character_name``, else "Assistant"
    char: str
    #: the persona description as read (``baseChatReplace(persona_description.trim())``)
    persona_text: str
    #: the card's data as given (``{}`` without a card)
    card: dict[str, Any]
    #: the card as SillyTavern's prompt builder reads it (None without a card)
    read_card: dict[str, Any] | None
    #: the group members' depth prompts (join modes)
    group_prompts: list[dict[str, Any]] = field(default_factory=list)
    #: ``{"muted": [names]}`` for a group with muted members, else empty
    muted: dict[str, Any] = field(default_factory=dict)
    #: ``names_behavior``: the request's, else the preset's
    behavior: int = 0
    #: the preset as placement reads it (its prompts through the text passes, when any read them)
    preset: dict[str, Any] = field(default_factory=dict)


def card_texts(loaded: Loaded) -> Texts:
    """Stage 2: the card (joined for a group), the persona and the names, as SillyTavern reads them."""
    req, inputs, preset = loaded.req, loaded.inputs, loaded.preset
    card = inputs.card or {}
    user = _user_name(req, inputs.chat)
    read_card = _card_as_sillytavern_reads_it(card) if inputs.card is not None else None
    group_prompts: list[dict[str, Any]] = []
    overrides = {"scenario": inputs.chat.scenario, "mes_example": inputs.chat.mes_example}
    if req.group is not None and req.group.generation_mode in JOIN_MODES:
        # the members' cards joined into the replying member's (``getGroupCharacterCardsLazy``)
        read_card, group_prompts, group_diags = join_group_cards(read_card, inputs.members, req.group, user,
                                                                 _card_as_sillytavern_reads_it, overrides)
        loaded.warnings.extend(group_diags)
    elif read_card is not None:
        # the chat's overrides, when set, replace the card's fields (``getCharacterCardFieldsLazy``)
        read_card.update({k: v.strip().replace("\r", "") for k, v in overrides.items() if v})
    muted = {"muted": list(req.group.disabled_members)} if req.group is not None and req.group.disabled_members else {}
    behavior = req.options.names_behavior if req.options.names_behavior is not None else int(preset["names_behavior"])
    char = str(card.get("name") or inputs.chat.character_name or "Assistant")
    texts = Texts(loaded, user, char,
                  req.user.persona.description.strip().replace("\r", ""), card, read_card, group_prompts, muted,
                  behavior, preset)
    if loaded.passes:
        _pass_texts(texts, loaded.passes)
    return texts


def _user_name(req: StRequest, chat: StChat) -> str:
    """The user's name: the request's; else the one a chat export records (``user_name``); else "User"."""
    if "name" in req.user.model_fields_set or not chat.user_name:
        return req.user.name
    return chat.user_name


def _pass_texts(texts: Texts, passes: Sequence[TextPass]) -> None:
    """The card fields, the persona and the preset's prompts through the text passes that read them."""
    if texts.read_card is not None and wants(passes, "card_field"):
        for key in _TRIMMED_FIELDS:
            if isinstance(texts.read_card.get(key), str):
                texts.read_card[key] = run_passes(passes, "card_field", texts.read_card[key], {"field": key})
    if wants(passes, "persona"):
        texts.persona_text = run_passes(passes, "persona", texts.persona_text)
    prompts = texts.preset.get("prompts")
    if wants(passes, "preset_prompt") and isinstance(prompts, Sequence) and not isinstance(prompts, str):
        texts.preset = {**texts.preset, "prompts": [
            {**p, "content": run_passes(passes, "preset_prompt", p["content"],
                                        {"identifier": p.get("identifier"), "role": p.get("role")})}
            if isinstance(p, Mapping) and isinstance(p.get("content"), str) else p for p in prompts]}


def persona_block(texts: Texts) -> dict[str, Any]:
    """The persona as the preset source places it (its marker, or a position around the Author's Note)."""
    persona = texts.loaded.req.user.persona
    return {"name": texts.user, "description": texts.persona_text,
            "position": _PERSONA_POSITIONS[persona.position], "depth": persona.depth, "role": persona.role}


def author_note_block(req: StRequest, users: int, passes: Sequence[TextPass] = ()) -> dict[str, Any]:
    """The Author's Note as the preset source places it: its text only on the turns its interval
    says, counted in the chat's ``users`` user messages."""
    note = req.author_note
    active = _author_note_active(note.interval, users)
    content = note.content if active else ""
    if content and wants(passes, "author_note"):
        content = run_passes(passes, "author_note", content, {"position": note.position, "depth": note.depth})
    return {"content": content, "depth": note.depth, "role": note.role, "position": note.position, "active": active}
