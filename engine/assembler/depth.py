"""Depth insertion: items with a depth go in last, counted back over native conversation.

Depth 0 is the end of the request; depth ``d > 0`` is just before the ``d``-th native
*non-system* message counted from the end (the ``st`` placement counts as SillyTavern does instead:
every chat message, with depth 0 just after the last one) (contributions and native system messages are not
counted, so a depth means the same thing whatever else the strategy adds). A depth beyond the
conversation lands before its first message; with no native conversation at all, at the end.
Items sharing a depth go in ascending ``order`` (ties keep emission order); groups go in order of
first appearance. An insertion point inside a tool transaction moves after it (recorded as
``adjusted_for_tools``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tools import advance_past_transactions

if TYPE_CHECKING:
    from .node import Node

__all__ = ["insert_deferred", "insertion_index"]


class _MessageView:
    """The messages of ``flat`` as a read-only sequence, without copying the list."""

    __slots__ = ("flat",)

    def __init__(self, flat: list[Item]) -> None:
        self.flat = flat

    def __len__(self) -> int:
        return len(self.flat)

    def __getitem__(self, i: int) -> dict:  # type: ignore[type-arg]
        node, k = self.flat[i]
        return node.messages[k]

Item = tuple["Node", int]


def insertion_index(flat: list[Item], depth: int, *, in_history: bool = False) -> int:
    """The requested position for ``depth`` before any tool adjustment (walks back from the end).

    ``in_history`` is SillyTavern's rule (``populationInjectionPrompts``): depth counts every chat
    message, narrator (system) ones included, and depth 0 is just after the last chat message, so
    what the preset places after the chat history (the jailbreak) stays after an injection.
    """
    if in_history:
        last = next((i for i in range(len(flat) - 1, -1, -1) if flat[i][0].native), None)
        if last is None:
            return len(flat)
        if depth == 0:
            return last + 1
    elif depth == 0:
        return len(flat)
    seen = 0
    first = len(flat)
    for i in range(len(flat) - 1, -1, -1):
        node, k = flat[i]
        if node.native and (in_history or node.messages[k].get("role") != "system"):
            seen += 1
            first = i
            if seen == depth:
                return i
    return first


def insert_deferred(flat: list[Item], deferred: list[Node], *, in_history: bool = False) -> None:
    """Insert every deferred node into ``flat`` (a list of ``(node, message index)``), in place.

    ``in_history``: depths follow SillyTavern's in-chat rule (see :func:`insertion_index`); the
    ``st`` placement uses it.
    """
    groups: dict[int, list[Node]] = {}
    for node in deferred:
        groups.setdefault(node.depth or 0, []).append(node)
    # SillyTavern walks depths from 0 up and splices each into the newest-first chat, so depths past
    # the chat's start stack deepest first: in its order, the deepest group goes in first
    items = sorted(groups.items(), key=lambda g: -g[0]) if in_history else list(groups.items())
    for depth, nodes in items:
        after = -1  # where the group's previous node ended: later nodes of a depth-0 group follow it
        for node in sorted(nodes, key=lambda n: n.order):
            index = insertion_index(flat, depth, in_history=in_history)
            if in_history and depth == 0 and after >= index:
                index = after
            index, moved = advance_past_transactions(_MessageView(flat), index)
            node.adjusted_for_tools = moved
            if not node.locked:
                node.locked, node.lock_reason = True, "depth"
            flat[index:index] = [(node, k) for k in range(len(node.messages))]
            after = index + len(node.messages)
