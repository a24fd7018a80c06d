"""A long chat's history, built newest first and only as deep as the context budget can reach.

SillyTavern turns every chat message into a history message (the speaker's name by
``names_behavior``, carriage returns removed, macros expanded: ``populateChatHistory``) and then
fills the budget newest first, stopping at the first message that does not fit. In a chat of
thousands of messages only the newest hundred or so can ever be sent, so building, expanding and
counting the others is work that grows with the chat and changes nothing. Issue 12 asks that a
5,000-message chat cost at most twice a 200-message one.

* :class:`ChatHistory` builds a history message the first time it is asked for (and keeps it).
* :func:`reachable_start` finds the oldest message the budget could reach: walking newest first
  with the *whole* budget, the budget pass's own stop must come at or after the first message that
  does not fit, so everything older is cut before placement. Nothing is counted while the byte
  bound (a token is at least one byte) says everything fits, and a chat of at most
  :data:`PRE_CUT_MIN` messages is never cut here.
* :func:`macro_messages` picks the at most four messages the chat macros read (``{{lastMessage}}``,
  ``{{lastUserMessage}}``, ``{{lastCharMessage}}``, ``{{idleDuration}}``); the macros get only
  those plus the count of the others (``chat_omitted``), so ``{{lastMessageId}}`` still counts the
  whole chat, and a reply thousands of messages back costs nothing more.

Every shortcut gives what the whole chat gives (``tests/test_st_history.py`` compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..tokenizers import MessageCounter
from .budget import PRIMING, byte_bound
from ..assets.chats import ChatMessage
from .postprocess import history_item

__all__ = ["PRE_CUT_MIN", "ChatHistory", "macro_messages", "reachable_start"]

#: a history of at most this many messages is never cut before placement (the budget pass's
#: own walk is as cheap)
PRE_CUT_MIN = 200


class ChatHistory:
    """The history messages of ``chat`` (``{"id", "role", "content", "name"?}``), each built on demand.

    ``expand`` expands a message's macros (called only for a text holding ``{{``), newest first as
    SillyTavern prepares them; a message's ``{{setvar}}`` is seen by the older messages built after
    it (the chat's variables, :func:`.chat._chat_macro_expander`); a message the budget pass never
    reaches is not expanded, and its macros write nothing.
    """

    def __init__(self, chat: Sequence[ChatMessage], *, behavior: int, user: str, char: str, group: bool,
                 expand: Callable[[str], str] | None = None) -> None:
        self.chat = chat
        self._names = {"behavior": behavior, "user": user, "char": char, "group": group}
        self._expand = expand
        self._built: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.chat)

    def item(self, index: int) -> dict[str, Any]:
        """The ``index``-th history message (oldest first)."""
        got = self._built.get(index)
        if got is None:
            m = self.chat[index]
            got = history_item(index, m.role, m.content or "", m.name, m.force_avatar, m.id, **self._names)
            if self._expand is not None and "{{" in got["content"]:
                got["content"] = self._expand(got["content"])
            self._built[index] = got
        return got

    def items(self, start: int, end: int) -> list[dict[str, Any]]:
        """History messages ``start`` to ``end`` (exclusive), oldest first, built newest first (as SillyTavern
        prepares the history, so a message's ``{{getvar}}`` sees what newer messages' ``{{setvar}}`` wrote)."""
        for i in range(end - 1, start - 1, -1):
            self.item(i)
        return [self._built[i] for i in range(start, end)]

    @property
    def built(self) -> int:
        """How many messages have been built so far (what the shortcut saved is the rest)."""
        return len(self._built)


def reachable_start(history: ChatHistory, end: int, budget: int, counter: Callable[[], MessageCounter]) -> int:
    """The index of the oldest of the first ``end`` history messages the budget pass could keep.

    ``counter`` gives the budget pass's own counter (its counts are cached by content, so the walk
    costs only new messages), asked for only when the byte bound does not settle it: a request far
    below its budget never loads a tokenizer.
    """
    if end <= PRE_CUT_MIN:
        return 0
    total = PRIMING
    for i in range(end - 1, -1, -1):
        total += byte_bound(history.item(i))
        if total > budget:
            break
    else:
        return 0
    count = counter().message
    left = budget
    for i in range(end - 1, -1, -1):
        left -= count(history.item(i))  # an empty message too: the budget pass prices it
        if left < 0:
            return i
    return 0


def macro_messages(roles: Sequence[str]) -> list[int]:
    """The indexes (oldest first) of the messages of a chat with ``roles`` that a chat macro reads.

    The chat macros read the chat newest first and stop early: ``{{lastMessage}}`` (and the swipe
    ids) the last message, ``{{lastUserMessage}}`` the last user message, ``{{lastCharMessage}}``
    the last assistant message, ``{{idleDuration}}`` the newest non-system message and the user
    message before it (at worst the second-to-last user message). Those at most four messages, in
    order, read as the whole chat does; the count of the others goes in ``chat_omitted``. A role
    the chat does not have asks for nothing.
    """
    n = len(roles)
    if not n:
        return []
    newest_first = list(reversed(roles))
    picks = {n - 1}
    for role, needed in (("assistant", 1), ("user", 2)):
        at = -1
        for _ in range(needed):
            try:
                at = newest_first.index(role, at + 1)
            except ValueError:
                break
            picks.add(n - 1 - at)
    return sorted(picks)
