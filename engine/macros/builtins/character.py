"""Character-card and persona macros (``description``, ``greeting``, ``mesExamples``...)."""

from __future__ import annotations

import re

from ..evaluator import MacroCall
from ..context import MacroContext
from ..registry import MacroRegistry, context_handler

__all__ = ["register"]

_NAME_MACROS = re.compile(r"\{\{(user|char)\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)
_START = re.compile(r"<START>", re.IGNORECASE)


def card_text(call: MacroCall, value: str) -> str:
    """:func:`context_card_text` of the call's context."""
    return context_card_text(call.ctx, value)


def context_card_text(ctx: MacroContext, value: str) -> str:
    """A card field as ST hands it to macros: names pre-substituted, ``\\r`` stripped.

    ST runs card fields through a names-only substitution before they become macro values, so
    ``{{user}}``/``{{char}}`` (and the ``<USER>``/``<BOT>``/``<CHAR>`` markers) inside a field
    show the names; nothing else in the field is expanded (single pass).
    """
    value = value.replace("\r", "")
    if "{" not in value and "<" not in value:  # one-character scans are the fast ones
        return value  # nothing the substitution could match (most fields)

    def name(m: re.Match[str]) -> str:
        which = (m.group(1) or m.group(2)).lower()
        return ctx.user if which == "user" else ctx.char

    return _NAME_MACROS.sub(name, value)


def _field(key: str):  # type: ignore[no-untyped-def]
    def read(ctx: MacroContext) -> str:
        return context_card_text(ctx, ctx.card(key))

    handler = context_handler(read)
    handler.card_field = key  # type: ignore[attr-defined]  # a plan reads plain fields itself
    return handler


_persona = context_handler(lambda ctx: context_card_text(ctx, ctx.persona))


def _greeting(call: MacroCall) -> str:
    index = int(call.arg(0, "0"))
    ctx = call.ctx
    if index == 0:
        return card_text(call, ctx.card("first_mes"))
    greetings = ctx.alternate_greetings
    if 1 <= index <= len(greetings):
        return card_text(call, greetings[index - 1])
    return ""


def _mes_examples(call: MacroCall) -> str:
    """Examples split on ``<START>``; each block is ``<START>\\n`` + trimmed block + ``\\n``."""
    raw = card_text(call, call.ctx.card("mes_example"))
    heading = call.ctx.example_separator or "<START>\n"
    if call.ctx.example_separator and not heading.endswith("\n"):
        heading += "\n"
    blocks = [b.strip() for b in _START.split(raw)]
    return "".join(heading + b + "\n" for b in blocks if b)


def register(registry: MacroRegistry) -> None:
    r = registry.register
    r("charPrompt", _field("system_prompt"))
    r("charInstruction", _field("post_history_instructions"))
    r("charDescription", _field("description"), aliases=("description",))
    r("charPersonality", _field("personality"), aliases=("personality",))
    r("charScenario", _field("scenario"), aliases=("scenario",))
    r("persona", _persona)
    r("charDepthPrompt", _field("depth_prompt"))
    r("charCreatorNotes", _field("creator_notes"), aliases=("creatorNotes",))
    r("mesExamplesRaw", _field("mes_example"))
    r("mesExamples", _mes_examples)
    r("charFirstMessage", _greeting, aliases=("greeting",), max_args=1, arg_types=("integer",))
    r("charVersion", _field("character_version"), aliases=("version", "char_version"))
