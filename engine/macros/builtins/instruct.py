"""Instruct-template and context-template macros.

Their values come from ``MacroContext.instruct`` (keys are the macro names in snake case, e.g.
``user_prefix``); like SillyTavern with instruct mode off, a missing sequence is ``''``, and the
first/last variants fall back to the plain sequence.
"""

from __future__ import annotations

from ..evaluator import MacroCall
from ..registry import MacroRegistry

__all__ = ["register"]

# macro name, aliases, context key, fallback key
_SEQUENCES: tuple[tuple[str, tuple[str, ...], str, str | None], ...] = (
    ("instructStoryStringPrefix", (), "story_string_prefix", None),
    ("instructStoryStringSuffix", (), "story_string_suffix", None),
    ("instructUserPrefix", ("instructInput",), "input_sequence", None),
    ("instructUserSuffix", (), "input_suffix", None),
    ("instructAssistantPrefix", ("instructOutput",), "output_sequence", None),
    ("instructAssistantSuffix", ("instructSeparator",), "output_suffix", None),
    ("instructSystemPrefix", (), "system_sequence", None),
    ("instructSystemSuffix", (), "system_suffix", None),
    ("instructFirstAssistantPrefix", ("instructFirstOutputPrefix",), "first_output_sequence", "output_sequence"),
    ("instructLastAssistantPrefix", ("instructLastOutputPrefix",), "last_output_sequence", "output_sequence"),
    ("instructStop", (), "stop_sequence", None),
    ("instructUserFiller", (), "user_alignment_message", None),
    ("instructSystemInstructionPrefix", (), "last_system_sequence", None),
    ("instructFirstUserPrefix", ("instructFirstInput",), "first_input_sequence", "input_sequence"),
    ("instructLastUserPrefix", ("instructLastInput",), "last_input_sequence", "input_sequence"),
)


def _sequence(key: str, fallback: str | None):  # type: ignore[no-untyped-def]
    def handler(call: MacroCall) -> str:
        seq = call.ctx.instruct
        value = seq.get(key) or (seq.get(fallback) if fallback else None)
        return "" if value is None else str(value)

    return handler


def register(registry: MacroRegistry) -> None:
    for name, aliases, key, fallback in _SEQUENCES:
        registry.register(name, _sequence(key, fallback), aliases=aliases)
    registry.register(
        "defaultSystemPrompt",
        lambda c: c.ctx.system_prompt,
        aliases=("instructSystem", "instructSystemPrompt"),
    )
    registry.register("systemPrompt", lambda c: c.ctx.card("system_prompt") or c.ctx.system_prompt)
    registry.register("exampleSeparator", lambda c: c.ctx.example_separator, aliases=("chatSeparator",))
    registry.register("chatStart", lambda c: c.ctx.chat_start)
