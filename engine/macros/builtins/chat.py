"""Chat-history macros (``lastMessage``, ``lastMessageId``, ``idleDuration``...)."""

from __future__ import annotations

from ..context import ChatMessage
from ..evaluator import MacroCall
from ..registry import MacroRegistry

__all__ = ["register"]


def _visible(msg: ChatMessage) -> bool:
    """A message whose swipe is still being generated (swipe_id past the swipes) is skipped."""
    return not (msg.swipes and msg.swipe_id is not None and msg.swipe_id >= len(msg.swipes))


def _text(msg: ChatMessage) -> str:
    if msg.swipes and msg.swipe_id is not None and 0 <= msg.swipe_id < len(msg.swipes):
        return msg.swipes[msg.swipe_id]
    return msg.content


def _last_message(call: MacroCall) -> str:
    for msg in reversed(call.ctx.chat):
        if _visible(msg):
            return _text(msg)
    return ""


def _last_user(call: MacroCall) -> str:
    for msg in reversed(call.ctx.chat):
        if msg.is_user and not msg.is_system and _visible(msg):
            return _text(msg)
    return ""


def _last_char(call: MacroCall) -> str:
    for msg in reversed(call.ctx.chat):
        if not msg.is_user and not msg.is_system and _visible(msg):
            return _text(msg)
    return ""


def _last_id(call: MacroCall) -> str:
    n = len(call.ctx.chat)
    return str(n - 1) if n else ""


def _first_displayed(call: MacroCall) -> str:
    return "0" if call.ctx.chat else ""


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
    n = len(call.ctx.chat)
    return f"0-{n - 1}" if n else ""


def _idle(call: MacroCall) -> str:
    """Time since the last user message before the latest non-system message, humanised."""
    from ..timefmt import humanize, parse_date

    chat = call.ctx.chat
    last_non_system = next((i for i in range(len(chat) - 1, -1, -1) if not chat[i].is_system), None)
    if last_non_system is None:
        return "just now"
    for i in range(last_non_system - 1, -1, -1):
        msg = chat[i]
        if msg.is_user and msg.send_date:
            when = parse_date(msg.send_date)
            if when is None:
                return "just now"
            seconds = (call.ctx.clock() - when).total_seconds()
            return humanize(seconds, with_suffix=False)
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
