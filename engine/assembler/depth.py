"""Depth insertion: items with a depth go in last, counted back over native conversation.

Depth 0 is the end of the request; depth ``d > 0`` is just before the ``d``-th native
*non-system* message counted from the end (contributions and native system messages are not
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


def insertion_index(flat: list[Item], depth: int) -> int:
    """The requested position for ``depth`` before any tool adjustment (walks back from the end)."""
    if depth == 0:
        return len(flat)
    seen = 0
    first = len(flat)
    for i in range(len(flat) - 1, -1, -1):
        node, k = flat[i]
        if node.native and node.messages[k].get("role") != "system":
            seen += 1
            first = i
            if seen == depth:
                return i
    return first


def insert_deferred(flat: list[Item], deferred: list[Node]) -> None:
    """Insert every deferred node into ``flat`` (a list of ``(node, message index)``), in place."""
    groups: dict[int, list[Node]] = {}
    for node in deferred:
        groups.setdefault(node.depth or 0, []).append(node)
    for depth, nodes in groups.items():
        for node in sorted(nodes, key=lambda n: n.order):
            index = insertion_index(flat, depth)
            index, moved = advance_past_transactions(_MessageView(flat), index)
            node.adjusted_for_tools = moved
            if not node.locked:
                node.locked, node.lock_reason = True, "depth"
            flat[index:index] = [(node, k) for k in range(len(node.messages))]
