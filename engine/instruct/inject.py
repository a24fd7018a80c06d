"""Prompts placed into the chat history at a depth (``doChatInject`` and ``getExtensionPrompt``).

SillyTavern keeps every "extension prompt" (the Author's Note, the card's depth prompt, a persona
description at depth, the story string in the chat, world info at depth) under a key with a
position, a depth and a role. For text completion, ``doChatInject`` walks the depths from 0 up:
at each depth, the prompts of each role (system, then user, then assistant) are joined, sorted by
key, each trimmed, with line breaks, their macros substituted, and become one message of that role
(a system one is a narrator message; a user one speaks as the user; an assistant one as the
character). Depth 0 is after the newest message (after the one before it, on a continue); the
messages inserted at lower depths count, so a depth is measured in the history as it grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..macros.variables import js_trim
from .messages import Speaker
from .prompt_items import ChatItem
from .templates import Substitute

__all__ = ["ExtensionPrompt", "inject_in_chat"]

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class ExtensionPrompt:
    """One prompt placed in the chat: ``key`` orders prompts of one depth and role."""

    key: str
    value: str
    depth: int
    role: str = "system"


def _role_text(prompts: Sequence[ExtensionPrompt], depth: int, role: str,
               substitute: Substitute) -> tuple[str, list[str]]:
    chosen = [p for p in sorted(prompts, key=lambda p: p.key) if p.value and p.depth == depth and p.role == role]
    joined = "\n".join(js_trim(p.value) for p in chosen)
    return (substitute(joined).lstrip() if joined else ""), [p.key for p in chosen]


def inject_in_chat(history: Sequence[ChatItem], prompts: Sequence[ExtensionPrompt], speaker: Speaker,
                   substitute: Substitute, *, is_continue: bool = False) -> tuple[list[ChatItem], list[int]]:
    """The history with the prompts in it, and the indexes (oldest first) of the inserted messages."""
    newest_first = list(reversed(history))
    inserted: list[ChatItem] = []
    max_depth = max((p.depth for p in prompts if p.value), default=-1)
    names = {"system": "", "user": speaker.user, "assistant": speaker.char}
    for depth in range(max_depth + 1):
        messages = []
        for role in ROLES:
            text, keys = _role_text(prompts, depth, role, substitute)
            if text:
                messages.append(ChatItem(name=names[role], mes=text, is_user=role == "user",
                                         is_narrator=role == "system", source="in-chat:" + "+".join(keys)))
        if messages:
            at = min((1 if is_continue and depth == 0 else depth) + len(inserted), len(newest_first))
            newest_first[at:at] = messages
            inserted.extend(messages)
    result = list(reversed(newest_first))
    ids = {id(m) for m in inserted}
    return result, [i for i, m in enumerate(result) if id(m) in ids]
