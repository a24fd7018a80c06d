"""Instruct formatting of chat messages, example dialogues and the last prompt line (``instruct-mode.js``).

Each function is SillyTavern's of the same job, over an :class:`~.templates.Instruct` and the names:

- :func:`format_message`: one chat message between its role's sequence and suffix (the first
  message the model sees may use the *first* sequences, the last user message the *last* input
  sequence), with ``Name: `` in front when the names behaviour asks (``always``; ``force`` only in
  a group or for a message sent as another character);
- :func:`format_examples`: the card's example dialogues, each message as a user or character
  message, each dialogue after the context template's ``example_separator``;
- :func:`format_prompt_line`: what the prompt ends with, the sequence the model continues after.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from ..strategies.sillytavern import split_examples
from .templates import Context, Instruct, Substitute, replace_name

__all__ = ["ForceSequence", "Speaker", "format_examples", "format_message", "format_prompt_line",
           "split_example_blocks"]


class ForceSequence(IntEnum):
    """Which variant of a role's sequence a message uses (``force_output_sequence``)."""

    NONE = 0
    FIRST = 1
    LAST = 2


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who is talking and to whom: the names ``{{user}}``/``{{char}}`` stand for, and the group."""

    user: str
    char: str
    in_group: bool = False


def _prefix(instruct: Instruct, is_user: bool, is_narrator: bool, force: ForceSequence) -> str:
    if is_narrator:
        return instruct.input_sequence if instruct.system_same_as_user else instruct.system_sequence
    if is_user:
        if force is ForceSequence.FIRST:
            return instruct.first_input_sequence or instruct.input_sequence
        if force is ForceSequence.LAST:
            return instruct.last_input_sequence or instruct.input_sequence
        return instruct.input_sequence
    if force is ForceSequence.FIRST:
        return instruct.first_output_sequence or instruct.output_sequence
    if force is ForceSequence.LAST:
        return instruct.last_output_sequence or instruct.output_sequence
    return instruct.output_sequence


def _suffix(instruct: Instruct, is_user: bool, is_narrator: bool) -> str:
    if is_narrator:
        return instruct.input_suffix if instruct.system_same_as_user else instruct.system_suffix
    return instruct.input_suffix if is_user else instruct.output_suffix


def format_message(instruct: Instruct, speaker: Speaker, substitute: Substitute, *, name: str, text: str,
                   is_user: bool, is_narrator: bool = False, force_avatar: bool = False,
                   force: ForceSequence = ForceSequence.NONE) -> str:
    """``formatInstructModeChat``: one message with its sequences."""
    include_names = not is_narrator and instruct.names_behavior == "always"
    if not is_narrator and instruct.names_behavior == "force" and (speaker.in_group or force_avatar) \
            and name != speaker.user:
        include_names = True
    prefix = _prefix(instruct, is_user, is_narrator, force) or ""
    suffix = _suffix(instruct, is_user, is_narrator) or ""
    if instruct.macro:
        prefix = replace_name(substitute(prefix), name or "System")
        suffix = replace_name(substitute(suffix), name or "System")
    if not suffix and instruct.wrap:
        suffix = "\n"
    body = f"{name}: {text}" if include_names and name else text
    return instruct.separator.join(part for part in (prefix, body + suffix) if part)


_START = re.compile(r"<START>", re.IGNORECASE)


def split_example_blocks(text: str, context: Context, substitute: Substitute, *, instruct_on: bool) -> list[str]:
    """``parseMesExamples``: the card's examples (after their macros) as dialogue blocks, each headed
    ``<START>`` for instruct mode (formatted later) or by the example separator without it."""
    if not text or text == "<START>":
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + text.strip()
    separator = substitute(context.example_separator) + "\n" if context.example_separator else ""
    heading = "<START>\n" if instruct_on else separator
    return [f"{heading}{block.strip()}\n" for block in _START.split(text)[1:]]


def format_examples(blocks: Sequence[str], instruct: Instruct, context: Context, speaker: Speaker,
                    substitute: Substitute) -> list[str]:
    """``formatInstructModeExamples``: ``blocks`` are the card's dialogues, each ``<START>\\n...``."""
    heading = substitute(context.example_separator) + "\n" if context.example_separator else ""
    if instruct.skip_examples:
        return [_replace_start(block, heading) for block in blocks]
    include_names = instruct.names_behavior == "always"
    group_names = speaker.in_group and instruct.names_behavior in ("always", "force")
    sequences = _example_sequences(instruct, speaker, substitute)
    formatted: list[str] = []
    for block in blocks:
        cleaned = block.replace("\r", "")
        dialogue = split_examples(cleaned, speaker.user, speaker.char, name_prefix=group_names)
        messages = dialogue[0] if dialogue else []
        if not messages:
            continue
        if heading:
            formatted.append(heading)
        for role, content in messages:
            user_line = role == "example_user"
            with_name = not group_names and (include_names or (instruct.names_behavior == "force" and user_line))
            prefix, suffix = sequences[0:2] if user_line else sequences[2:4]
            name = speaker.user if user_line else speaker.char
            body = f"{name}: {content}" if with_name else content
            formatted.append(instruct.separator.join(part for part in (prefix, body + suffix) if part))
    if not formatted:
        return [_replace_start(block, heading) for block in blocks]
    return formatted


def _example_sequences(instruct: Instruct, speaker: Speaker, substitute: Substitute) -> tuple[str, str, str, str]:
    input_prefix, output_prefix = instruct.input_sequence, instruct.output_sequence
    input_suffix, output_suffix = instruct.input_suffix, instruct.output_suffix
    if instruct.macro:
        input_prefix = replace_name(substitute(input_prefix), speaker.user)
        output_prefix = replace_name(substitute(output_prefix), speaker.char)
        input_suffix = replace_name(substitute(input_suffix), speaker.user)
        output_suffix = replace_name(substitute(output_suffix), speaker.char)
        if not input_suffix and instruct.wrap:
            input_suffix = "\n"
        if not output_suffix and instruct.wrap:
            output_suffix = "\n"
    return input_prefix, input_suffix, output_prefix, output_suffix


def _replace_start(block: str, heading: str) -> str:
    """``block.replace(/<START>\\n/i, heading)``: the first one only."""
    at = block.lower().find("<start>\n")
    return block if at < 0 else block[:at] + heading + block[at + len("<start>\n"):]


def format_prompt_line(instruct: Instruct, speaker: Speaker, substitute: Substitute, *, name: str,
                       impersonate: bool = False, bias: str = "", quiet: bool = False,
                       quiet_to_loud: bool = False) -> str:
    """``formatInstructModePrompt``: the sequence the prompt ends with (the reply starts after it)."""
    include_names = bool(name) and (instruct.names_behavior == "always" or (
        speaker.in_group and instruct.names_behavior == "force")) and not (quiet and not quiet_to_loud)
    if impersonate:
        sequence = instruct.last_input_sequence or instruct.input_sequence
    elif quiet and not quiet_to_loud:
        sequence = instruct.last_system_sequence or instruct.output_sequence
    else:
        sequence = instruct.last_output_sequence or instruct.output_sequence
    sequence = sequence or ""
    filler = ""
    if (include_names and instruct.last_output_sequence and instruct.output_sequence
            and sequence == instruct.last_output_sequence and instruct.output_sequence[-1:].isspace()
            and not instruct.last_output_sequence[-1:].isspace()):
        filler = instruct.output_sequence[-1]
    if instruct.macro:
        sequence = replace_name(substitute(sequence), name or "System")
    separator = instruct.separator
    text = (separator + sequence + separator + filler + f"{name}:") if include_names else (separator + sequence)
    if quiet and separator:
        text = text[len(separator):]
    if not impersonate and bias:
        text += bias if include_names else separator + bias.lstrip()
    return (text.rstrip() if instruct.wrap else text) + ("" if include_names else separator)
