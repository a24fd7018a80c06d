"""The stop strings SillyTavern sends with a text-completion request (``getStoppingStrings``), in its order.

1. with the context template's ``names_as_stop_strings``: ``"\\n<char>:"`` when impersonating, else
   ``"\\n<user>:"``; then ``"\\n<user>:"``; on a continue after a user message, ``"\\n<char>:"``;
   in a group chat, ``"\\n<member>:"`` for every other member, in the group's order;
2. with instruct mode on: its ``stop_sequence``, and with ``sequences_as_stop_strings`` the input,
   output, first/last output, system and last system sequences, split into lines, each non-blank
   line once, after a line break when ``wrap`` is on (macros substituted when ``macro`` is on);
   then, with the context template's ``use_stop_strings`` (instruct mode on or off), ``chat_start``
   and ``example_separator`` after a line break;
3. the custom stop strings (a JSON array of text, macros substituted when asked);
4. ``single_line`` puts ``"\\n"`` first; empty and repeated strings are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..macros.variables import js_trim
from .messages import Speaker
from .templates import Context, Instruct, Substitute, replace_name

__all__ = ["StopSettings", "stopping_strings"]


@dataclass(frozen=True, slots=True)
class StopSettings:
    """The ``power_user`` settings that shape the stop strings."""

    custom_stopping_strings: str = ""
    custom_stopping_strings_macro: bool = True
    single_line: bool = False


def _instruct_sequences(instruct: Instruct, context: Context, speaker: Speaker, substitute: Substitute) -> list[str]:
    sequences = [instruct.stop_sequence or ""]
    if instruct.sequences_as_stop_strings:
        sequences += [
            replace_name(instruct.input_sequence, speaker.user),
            replace_name(instruct.output_sequence, speaker.char),
            replace_name(instruct.first_output_sequence, speaker.char),
            replace_name(instruct.last_output_sequence, speaker.char),
            replace_name(instruct.system_sequence, "System"),
            replace_name(instruct.last_system_sequence, "System"),
        ]
    out: list[str] = []
    for line in _unique("\n".join(sequences).split("\n")):
        if line and js_trim(line):
            wrapped = "\n" + line if instruct.wrap else line
            out.append(substitute(wrapped) if instruct.macro else wrapped)
    return out


def _custom(settings: StopSettings, substitute: Substitute) -> list[str]:
    if not settings.custom_stopping_strings:
        return []
    try:
        strings = json.loads(settings.custom_stopping_strings)
    except ValueError:
        return []
    if not isinstance(strings, list):
        return []
    kept = [s for s in strings if isinstance(s, str) and s]
    return [substitute(s) for s in kept] if settings.custom_stopping_strings_macro else kept


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def stopping_strings(instruct: Instruct | None, context: Context, speaker: Speaker, substitute: Substitute,
                     settings: StopSettings = StopSettings(), *, impersonate: bool = False,
                     continue_after_user: bool = False, group_members: Sequence[str] = ()) -> list[str]:
    """The ``stop`` list; ``instruct`` is None with instruct mode off. ``group_members`` are a group
    chat's members in the group's order: each one but the member replying (``speaker.char``) stops
    the reply at its ``Name:`` line, after the user's and the character's."""
    result: list[str] = []
    if context.names_as_stop_strings:
        char_line, user_line = f"\n{speaker.char}:", f"\n{speaker.user}:"
        result += [char_line if impersonate else user_line, user_line]
        if continue_after_user:
            result.append(char_line)
        result += [f"\n{name}:" for name in group_members if name and name != speaker.char]
    if instruct is not None:
        result += _instruct_sequences(instruct, context, speaker, substitute)
    if context.use_stop_strings:
        if context.chat_start:
            result.append("\n" + substitute(context.chat_start))
        if context.example_separator:
            result.append("\n" + substitute(context.example_separator))
    result += _custom(settings, substitute)
    if settings.single_line:
        result.insert(0, "\n")
    return _unique([s for s in result if s])
