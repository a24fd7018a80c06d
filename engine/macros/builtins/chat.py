"""Chat-history macros (``lastMessage``, ``lastMessageId``, ``idleDuration``...)."""

from __future__ import annotations

from datetime import timezone

from ..context import ChatMessage, MacroContext
from ..evaluator import MacroCall
from ..registry import MacroRegistry, context_handler
from ..timefmt import humanize_ms, parse_st_timestamp

__all__ = ["register"]


def _visible(msg: ChatMessage) -> bool:
    """A message whose swipe is still being generated (swipe_id past the swipes) is skipped."""
    return not (msg.swipes and msg.swipe_id is not None and msg.swipe_id >= len(msg.swipes))


def _text(msg: ChatMessage) -> str:
    if msg.swipes and msg.swipe_id is not None and 0 <= msg.swipe_id < len(msg.swipes):
        return msg.swipes[msg.swipe_id]
    return msg.content


def _last_message_of(ctx: MacroContext) -> str:
    for msg in reversed(ctx.chat):
        if _visible(msg):
            return _text(msg)
    return ""


def _last_user_of(ctx: MacroContext) -> str:
    for msg in reversed(ctx.chat):
        if msg.is_user and not msg.is_system and _visible(msg):
            return _text(msg)
    return ""


def _last_char_of(ctx: MacroContext) -> str:
    for msg in reversed(ctx.chat):
        if not msg.is_user and not msg.is_system and _visible(msg):
            return _text(msg)
    return ""


_last_message = context_handler(_last_message_of)
_last_user = context_handler(_last_user_of)
_last_char = context_handler(_last_char_of)


def _last_id(call: MacroCall) -> str:
    """The index of the last message, skipping one whose swipe is still being generated, as
    SillyTavern's ``getLastMessageId`` does; the omitted older messages count too (the given
    messages end the chat, so the newest ones are consecutive)."""
    n = call.ctx.chat_length
    for msg in reversed(call.ctx.chat):
        if _visible(msg):
            return str(n - 1)
        n -= 1
    return str(n - 1) if n else ""


def _first_displayed(call: MacroCall) -> str:
    return "0" if call.ctx.chat_length else ""


def _last_swipe_id(call: MacroCall) -> str:
    chat = call.ctx.chat
    if not chat:
        return ""
    return str(len(chat[-1].swipes)) if chat[-1].swipes else "1"


def _current_swipe_id(call: MacroCall) -> str:
    chat = call.ctx.chat
    if not chat:
        return ""
    sid = chat[-1].swipe_id
    return str((sid or 0) + 1)


def _all_range(call: MacroCall) -> str:
    n = call.ctx.chat_length
    return f"0-{n - 1}" if n else ""


def _idle(call: MacroCall) -> str:
    """Time since the user message before the latest non-system message, humanised.

    As SillyTavern walks it: system messages are skipped, the latest other message only arms
    the search, and the next user message before it is the one measured; ``just now`` when
    there is none or it has no ``send_date``.
    """
    armed = False
    for msg in reversed(call.ctx.chat):
        if msg.is_system:
            continue
        if msg.is_user and armed:
            if not msg.send_date:
                return "just now"
            now = call.ctx.clock()
            # ST's "June 19, 2023 2:20pm" form is local time: the clock's zone says what local is
            when = parse_st_timestamp(msg.send_date, now=now, local_tz=now.tzinfo or timezone.utc)
            if when is None:
                return "Invalid date"
            return humanize_ms((now - when).total_seconds() * 1000, with_suffix=False)
        armed = True
    return "just now"


def register(registry: MacroRegistry) -> None:
    r = registry.register
    r("lastMessage", _last_message)
    r("lastUserMessage", _last_user)
    r("lastCharMessage", _last_char)
    r("lastMessageId", _last_id)
    r("firstIncludedMessageId", lambda c: str(c.ctx.extras.get("first_included_message_id", "")))
    r("firstDisplayedMessageId", _first_displayed)
    r("lastSwipeId", _last_swipe_id)
    r("currentSwipeId", _current_swipe_id)
    r("allChatRange", _all_range)
    r("idleDuration", _idle, aliases=("idle_duration",))
