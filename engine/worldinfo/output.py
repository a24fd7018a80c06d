"""Activated entries placed per position, in SillyTavern's order (research digest section 2.10).

SillyTavern stable-sorts the activated entries by ``order`` descending and *unshifts* each into
its position's list, so every list ends up ascending by order (higher order lands later in the
prompt) with ties in reverse activation order. At-depth entries are grouped by (depth, role), the
groups in order of first appearance in that descending walk. Outlets are the exception: their
entries are *pushed*, so an outlet reads in descending order. Entries whose content is empty are
left out of the prompt (they still count as activated).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from .entries import Entry, Position

__all__ = ["ActivatedEntry", "DepthGroup", "Positions", "ROLE_NAMES", "build_positions", "place_activated"]

ROLE_NAMES = {0: "system", 1: "user", 2: "assistant"}


@dataclass(frozen=True, slots=True, init=False)
class ActivatedEntry:
    """An activated entry with its final (possibly macro-expanded) content.

    Frozen, with its own ``__init__``: a scan makes one per activated entry (over a thousand in a
    large book), and writing the slots directly costs about half the generated frozen ``__init__``.
    """

    entry: Entry
    content: str
    step: int

    def __init__(self, entry: Entry, content: str, step: int) -> None:
        _SET_ENTRY(self, entry)
        _SET_CONTENT(self, content)
        _SET_STEP(self, step)

    @classmethod
    def many(cls, entries: Sequence[Entry], contents: Sequence[str], steps: Sequence[int]) -> list[ActivatedEntry]:
        """``[cls(e, c, s) for e, c, s in zip(entries, contents, steps)]`` (the sequences have one
        length), each step of it done for every item in one C-driven pass: the objects allocated,
        then each slot written."""
        items = list(map(object.__new__, repeat(cls, len(entries))))
        deque(map(_SET_ENTRY, items, entries), maxlen=0)
        deque(map(_SET_CONTENT, items, contents), maxlen=0)
        deque(map(_SET_STEP, items, steps), maxlen=0)
        return items

    @property
    def book(self) -> str:
        return self.entry.book

    @property
    def uid(self) -> int | str:
        return self.entry.uid


# the slots' own descriptors (read from the class dict: the class attribute is the slot, not a value)
_SET_ENTRY = ActivatedEntry.__dict__["entry"].__set__
_SET_CONTENT = ActivatedEntry.__dict__["content"].__set__
_SET_STEP = ActivatedEntry.__dict__["step"].__set__


@dataclass(frozen=True, slots=True)
class DepthGroup:
    """At-depth entries sharing a depth and a role, joined as one injected message."""

    depth: int
    role: int
    entries: tuple[ActivatedEntry, ...]

    @property
    def content(self) -> str:
        return "\n".join(e.content for e in self.entries)

    @property
    def role_name(self) -> str:
        return ROLE_NAMES.get(self.role, str(self.role))


@dataclass(frozen=True, slots=True)
class Positions:
    """The activated entries per position, each list in prompt order."""

    before: tuple[ActivatedEntry, ...] = ()
    after: tuple[ActivatedEntry, ...] = ()
    an_top: tuple[ActivatedEntry, ...] = ()
    an_bottom: tuple[ActivatedEntry, ...] = ()
    at_depth: tuple[DepthGroup, ...] = ()
    em_top: tuple[ActivatedEntry, ...] = ()
    em_bottom: tuple[ActivatedEntry, ...] = ()
    outlets: dict[str, tuple[ActivatedEntry, ...]] = field(default_factory=dict)

    @property
    def before_text(self) -> str:
        """``worldInfoBefore``: the before-character entries joined with newlines."""
        return "\n".join(e.content for e in self.before)

    @property
    def after_text(self) -> str:
        """``worldInfoAfter``."""
        return "\n".join(e.content for e in self.after)

    def author_note(self, note: str) -> str:
        """The Author's Note with the AN-top and AN-bottom entries around it, as SillyTavern builds it.

        ``top + "\n" + note + "\n" + bottom``, then one leading and one trailing newline removed.
        """
        text = "\n".join(e.content for e in self.an_top) + "\n" + note + "\n" + "\n".join(
            e.content for e in self.an_bottom)
        if text.startswith("\n"):
            text = text[1:]
        if text.endswith("\n"):
            text = text[:-1]
        return text

    def outlet_text(self, name: str) -> str:
        """What ``{{outlet::name}}`` reads."""
        return "\n".join(e.content for e in self.outlets.get(name, ()))

    def to_json(self) -> dict[str, Any]:
        """The position part of the CLI's ``--json`` object."""
        return {
            "before": self.before_text,
            "after": self.after_text,
            "an_top": [e.content for e in self.an_top],
            "an_bottom": [e.content for e in self.an_bottom],
            "at_depth": [{"depth": g.depth, "role": g.role_name, "content": g.content} for g in self.at_depth],
            "em_top": [e.content for e in self.em_top],
            "em_bottom": [e.content for e in self.em_bottom],
            "outlets": {name: self.outlet_text(name) for name in self.outlets},
        }


def build_positions(activated: list[ActivatedEntry]) -> Positions:
    """Place ``activated`` (in activation order) the way SillyTavern's output assembly does."""
    return place_activated(activated, [-a.entry.order for a in activated], [a.entry.position for a in activated])


def place_activated(activated: Sequence[ActivatedEntry], sort_keys: Sequence[Any],
                    positions: Sequence[int]) -> Positions:
    """:func:`build_positions` with each item's sort key and position given (the activation reads them
    from its books' per-entry lists rather than from a thousand entries again).

    ``sort_keys[k]`` sorts item ``k`` as its entry's order negated does: smaller first, equal for
    equal orders (a rank among the book's orders will do); ``positions[k]`` is its entry's position.
    """
    # stable: ties keep activation order (the keys computed first, so the sort reads them in C)
    ordered = sorted(range(len(activated)), key=sort_keys.__getitem__)
    lists: dict[int, list[ActivatedEntry]] = {p: [] for p in range(8)}
    depth_groups: list[tuple[int, int, list[ActivatedEntry]]] = []
    outlets: dict[str, list[ActivatedEntry]] = {}
    at_depth, outlet = Position.AT_DEPTH, Position.OUTLET
    for k in ordered:
        item = activated[k]
        if not item.content:
            continue
        position = positions[k]
        if position == at_depth:
            entry = item.entry
            for depth, role, members in depth_groups:
                if depth == entry.depth and role == entry.role:
                    members.append(item)
                    break
            else:
                depth_groups.append((entry.depth, entry.role, [item]))
        elif position == outlet:
            name = item.entry.outlet_name
            if name:
                outlets.setdefault(name, []).append(item)
        elif position in lists:
            lists[position].append(item)
    return Positions(
        before=tuple(reversed(lists[Position.BEFORE])),
        after=tuple(reversed(lists[Position.AFTER])),
        an_top=tuple(reversed(lists[Position.AN_TOP])),
        an_bottom=tuple(reversed(lists[Position.AN_BOTTOM])),
        at_depth=tuple(DepthGroup(d, r, tuple(reversed(m))) for d, r, m in depth_groups),
        em_top=tuple(reversed(lists[Position.EM_TOP])),
        em_bottom=tuple(reversed(lists[Position.EM_BOTTOM])),
        outlets={name: tuple(items) for name, items in outlets.items()},
    )
