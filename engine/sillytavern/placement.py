"""Placement: the front's texts placed into messages by the preset's prompt manager.

SillyTavern's ``populateChatCompletion`` places the preset's prompts in its ``prompt_order``, the
world info at its markers and depths, the card fields, the persona, the Author's Note and the
history with its in-chat injections. tavernbox places them with the compact assembler and the
``builtin-st`` strategy, whose preset source (:mod:`tavernbox.strategies.sillytavern`) follows
SillyTavern's prompt manager. :func:`place` is that stage; it then moves a continued message where
``populateChatHistory`` sends it (after the continue nudge, or last as a prefill).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..assembler import Assembler, AssemblyRequest
from ..strategies.builtin import builtin_strategy
from ..strategies.sillytavern import st_registry
from .diagnostics import named_render_warning, said_before
from .front import Front
from .templates import take_macro_writes
from .texts import author_note_block, persona_block

__all__ = ["Placed", "place", "placement_assets"]


@dataclass(slots=True)
class Placed:
    """The assembler's result and the messages it placed, each with the block that produced it."""

    front: Front
    #: the assembler's result (nodes, spans, record)
    result: Any
    #: the placed messages (``id``, ``role``, ``content``...), the continued message moved
    logical: list[dict[str, Any]]
    #: message id -> the id of the block that produced it
    block_of: dict[str, str]


def place(front: Front) -> Placed:
    """Stage 6: the messages the preset's prompt manager places, in order."""
    req = front.req
    result = Assembler(_registry()).assemble(AssemblyRequest.from_dict({
        "preset": builtin_strategy("builtin-st"), "messages": front.history, "input_ids": front.input_ids,
        "assets": placement_assets(front), "preview": req.options.dry_run, "system_prompt_update": "in-history",
        "seed": req.options.seed}))
    loaded = front.loaded
    loaded.warnings.extend(
        named_render_warning(d, loaded.preset, loaded.inputs.preset_name, front.lore.world_info or (), front.texts.char)
        for d in result.diagnostics
        if d.severity in ("warning", "error") and not said_before(d, loaded.inputs.diagnostics))
    take_macro_writes(loaded, result.variables)
    placed = Placed(front, result, [dict(m) for m in result.logical_messages],
                    {mid: str(n.get("block_id") or "") for n in result.nodes for mid in n.get("input_message_ids", ())})
    chat = front.chat
    if chat.continued is not None and not chat.prefill_mode:
        _after_the_nudge(placed)
    if chat.continued is not None and chat.prefill_mode:
        _as_prefill(placed)
    return placed


def placement_assets(front: Front) -> dict[str, Any]:
    """The assets the preset source reads: the preset, names, persona, card, Author's Note, group,
    world info and the macro context (in the order the record keeps them)."""
    loaded, texts, chat, lore = front.loaded, front.texts, front.chat, front.lore
    req = loaded.req
    assets: dict[str, Any] = {
        "st_preset": texts.preset,
        "st_preset_name": loaded.inputs.preset_name,
        "user": texts.user,
        "persona": persona_block(texts),
        "prefer_character_prompt": req.options.prefer_character_prompt,
        "prefer_character_jailbreak": req.options.prefer_character_jailbreak,
        "generation_type": chat.gen,
        "quiet_prompt": chat.quiet_prompt,
        "continue_prefill": chat.prefill_mode,
        "last_chat_role": chat.roles[chat.history_end - 1] if chat.history_end else None,
    }
    if texts.read_card is not None:
        assets["character"] = texts.read_card
    elif texts.char != "Assistant":  # no card: the chat export's character_name is ``{{char}}``
        assets["character"] = {"name": texts.char}
    if texts.group_prompts:
        assets["group_depth_prompts"] = texts.group_prompts
    assets["author_note"] = author_note_block(req, chat.roles.count("user"), loaded.passes)
    macro_extra: dict[str, Any] = {}
    if req.group is not None:
        macro_extra["group"] = list(req.group.members)
        macro_extra.update(texts.muted)
        assets["group"] = list(req.group.members)
    if lore.world_info is not None:
        assets["world_info"] = lore.world_info
    if lore.outlets:
        macro_extra["outlets"] = lore.outlets
    if req.options.now is not None:
        macro_extra["now"] = req.options.now
    if macro_extra:
        assets["macro_context"] = macro_extra
    if front.no_chat_history:
        assets["no_chat_history"] = True
    # the prompts' chat macros read the chat as stored, whatever part of it is sent (``_macro_chat``)
    assets["macro_context"] = {**assets.get("macro_context", {}), **chat.macro_chat}
    run = loaded.templates
    if run is not None and (run.variables.chat or run.variables.global_vars):
        # ``{{getvar}}`` reads the chat's variables, ``{{getglobalvar}}`` the global ones (as the templates left
        # them when the chat loaded)
        assets["macro_context"]["variables"] = {"local": dict(run.variables.chat),
                                                "global": dict(run.variables.global_vars)}
    return assets


_REGISTRY: list[Any] = []


def _registry() -> Any:
    """The sources the request path assembles with (built-ins and the preset source): built once,
    as nothing registers into it (each assembly works on its own capture of the registrations)."""
    if not _REGISTRY:
        _REGISTRY.append(st_registry())
    return _REGISTRY[0]


_LAST_CHAT_MESSAGE = re.compile(r"\{\{\s*lastChatMessage\s*\}\}", re.I)


def _after_the_nudge(placed: Placed) -> None:
    """``populateChatHistory``: the continued message leaves the history and goes, with the continue
    nudge, after everything but the control prompts."""
    logical, block_of, chat = placed.logical, placed.block_of, placed.front.chat
    continued = chat.continued
    assert continued is not None
    at = next((i for i, m in enumerate(logical) if m["id"] == continued["id"]), None)
    nudge = next((i for i, m in enumerate(logical) if block_of.get(m["id"]) == "preset:control:continueNudge"), None)
    if nudge is not None:  # ``substituteParamsExtended(nudge, {lastChatMessage})``, the text as it is
        text = _LAST_CHAT_MESSAGE.sub(lambda _m: chat.continued_text.strip(), str(logical[nudge]["content"]))
        logical[nudge] = {**logical[nudge], "content": text}
    if at is not None:
        moved = logical.pop(at)
        nudge = nudge - 1 if nudge is not None and nudge > at else nudge
        logical.insert(nudge if nudge is not None else len(logical), moved)
        block_of[moved["id"]] = "preset:control:continued"


def _as_prefill(placed: Placed) -> None:
    """``continue_prefill``: the continued message is sent last (Claude: after the assistant prefill)."""
    front = placed.front
    continued = front.chat.continued
    assert continued is not None
    prefill = str(front.loaded.preset.get("assistant_prefill") or "") if front.req.options.target == "claude" and \
        continued["role"] == "assistant" else ""
    text = "\n\n".join(x for x in (prefill, continued["content"]) if x)
    item = {"id": "continue-prefill", "role": continued["role"], "content": text}
    if continued.get("name"):
        item["name"] = continued["name"]
    placed.logical.append(item)
    placed.block_of[item["id"]] = "preset:control:continuePrefill"
