"""The history message the text-completion formatting reads."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChatItem"]


@dataclass(frozen=True, slots=True)
class ChatItem:
    """One history message as ``Generate`` reads it (``mes`` after its macros and regexes)."""

    name: str
    mes: str
    is_user: bool
    is_narrator: bool = False
    force_avatar: bool = False
    #: where the message comes from, for provenance (``chat[3]``, ``in-chat:2_floating_prompt``...)
    source: str = ""
