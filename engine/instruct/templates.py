"""The instruct and context templates as the formatting functions read them (named, typed, immutable)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Context", "Instruct", "Substitute", "replace_name"]

#: SillyTavern's ``substituteParams`` as the caller binds it (names, macros): text -> text.
Substitute = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Instruct:
    """An instruct template (SillyTavern's field names; see ``assets.text_templates``)."""

    input_sequence: str = ""
    input_suffix: str = ""
    output_sequence: str = ""
    output_suffix: str = ""
    system_sequence: str = ""
    system_suffix: str = ""
    first_input_sequence: str = ""
    last_input_sequence: str = ""
    first_output_sequence: str = ""
    last_output_sequence: str = ""
    last_system_sequence: str = ""
    story_string_prefix: str = ""
    story_string_suffix: str = ""
    stop_sequence: str = ""
    user_alignment_message: str = ""
    wrap: bool = True
    macro: bool = True
    names_behavior: str = "force"
    system_same_as_user: bool = False
    skip_examples: bool = False
    sequences_as_stop_strings: bool = True

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Instruct:
        names = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: v for k, v in fields.items() if k in names})

    @property
    def separator(self) -> str:
        """What joins a sequence and its text: a line break when ``wrap`` is on."""
        return "\n" if self.wrap else ""


@dataclass(frozen=True, slots=True)
class Context:
    """A context template: the story string and what surrounds the examples and the chat."""

    story_string: str = ""
    example_separator: str = ""
    chat_start: str = ""
    use_stop_strings: bool = True
    names_as_stop_strings: bool = True
    story_string_position: int = 0
    story_string_depth: int = 1
    story_string_role: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Context:
        names = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: v for k, v in fields.items() if k in names})

    @property
    def in_chat(self) -> bool:
        """The story string goes into the chat at a depth (1), not at the top of the prompt (0)."""
        return self.story_string_position == 1


_NAME_MACRO = re.compile(r"\{\{name\}\}", re.IGNORECASE)


def replace_name(text: str, name: str) -> str:
    """``text.replace(/{{name}}/gi, name)``: the speaker's name in an instruct sequence."""
    return _NAME_MACRO.sub(lambda _m: name, text)
