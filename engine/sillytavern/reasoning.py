"""Reasoning stored with chat messages, added to the prompt as SillyTavern's reasoning settings say.

SillyTavern keeps a reply's reasoning apart from its text (``extra.reasoning``) and, building the
prompt (``PromptReasoning`` in ``reasoning.js``, called where ``Generate`` builds ``coreChat``), walks
the chat from the newest message: while fewer than ``max_additions`` reasonings were added and
``add_to_prompts`` is on, a message's reasoning (through the text passes, kind ``chat_reasoning``:
the regex scripts of the reasoning placement) goes before its text as prefix + reasoning + suffix +
separator (the three with their macros expanded). The message a ``continue`` generation continues
gets its reasoning in any case, being the start of the reply, and with no text yet it ends inside the
reasoning (no suffix, no separator). In a group chat only the replying member's messages count. The
walk stops as soon as the limit is reached (at once when ``add_to_prompts`` is off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..assets.chats import ChatMessage
from .passes import TextPass, run_passes
from .request import ReasoningOptions

__all__ = ["ReasoningAddition", "add_reasoning"]

#: what SillyTavern once stored for "no reasoning" (a zero-width space); never added
_PLACEHOLDER = "\u200b"


@dataclass(slots=True)
class ReasoningAddition:
    """The walk's state (``PromptReasoning``): the settings and how many reasonings were added."""

    options: ReasoningOptions
    expand: Callable[[str], str]
    added: int = 0

    def limit_reached(self) -> bool:
        return not self.options.add_to_prompts or self.added >= self.options.max_additions

    def joined(self, content: str, thought: str, continued: bool) -> str:
        opts, expand = self.options, self.expand
        prefix = expand(opts.prefix) if opts.prefix else ""
        if continued and not content:
            return prefix + thought
        suffix = expand(opts.suffix) if opts.suffix else ""
        separator = expand(opts.separator) if opts.separator else ""
        return f"{prefix}{thought}{suffix}{separator}{content}"


def add_reasoning(chat: list[ChatMessage], gen: str, options: ReasoningOptions, passes: Sequence[TextPass],
                  expand: Callable[[str], str], speaker: str | None = None, user: str = "",
                  macros: Mapping[str, Any] | None = None) -> list[ChatMessage]:
    """``chat`` with the reasoning SillyTavern sends added to its messages (a new list when any is).

    ``speaker`` is the replying member in a group chat (``None`` otherwise); ``expand`` expands the
    prefix's, suffix's and separator's macros; ``macros`` (the chat's macro context) goes to the passes.
    """
    continuing = gen == "continue"
    if not options.add_to_prompts and not continuing:
        return chat
    state, n, shift = ReasoningAddition(options, expand), len(chat), 2 if continuing else 1
    out = chat
    for i in range(n - 1, -1, -1):
        message = out[i]
        as_prefix = continuing and i == n - 1
        others = speaker is not None and (user if message.role == "user" else message.name or speaker) != speaker
        if message.reasoning and (as_prefix or not state.limit_reached()) and not others:
            thought = run_passes(passes, "chat_reasoning", message.reasoning,
                                 {"index": i, "role": message.role, "depth": n - i - shift, "macros": macros})
            if thought and thought != _PLACEHOLDER:
                state.added += 1
                if out is chat:
                    out = list(chat)
                out[i] = message._replace(content=state.joined(message.content, thought, as_prefix))
        if state.limit_reached():
            break
    return out
