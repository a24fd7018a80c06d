"""The activation trace: why each entry fired or not, and in which step.

Every entry of every book gets exactly one :class:`TraceRecord`, the last decision the loop made
about it: ``activated`` with the rule that fired it (a key, ``constant``, ``decorator``, ``sticky``,
``forced``), or ``skipped`` with the rule that stopped it. ``steps`` summarises each pass of the loop
(its scan state, depth, delay level, candidates and activations). The trace is also the activation
record a template bridge reads to answer ``getwi``-style questions: it names every entry by
``book`` and ``uid``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["REASONS", "Draw", "StepRecord", "Trace", "TraceRecord", "trace_dicts", "trace_records"]

Outcome = Literal["activated", "skipped"]

#: reason code -> what it means (stable: tools may switch on these)
REASONS: dict[str, str] = {
    # activated
    "key": "a primary key matched (and the secondary-key logic passed)",
    "constant": "the entry is constant",
    "decorator": "@@activate forces it (or @@dont_activate suppresses it)",
    "sticky": "a sticky timed effect keeps it active",
    "forced": "activated from outside the scan",
    # skipped
    "not_scanned": "the loop ended before the entry was looked at",
    "disabled": "the entry is disabled",
    "trigger": "the generation type is not among its triggers",
    "filter": "its character filter excludes the current character",
    "delay": "its delay timed effect is active (the chat is too short)",
    "cooldown": "its cooldown timed effect is active",
    "delay_until_recursion": "it waits for a recursion step (or a later delay level)",
    "exclude_recursion": "it may not be activated by recursion",
    "no_keys": "it has no primary keys",
    "no_match": "no primary key matched",
    "secondary_logic": "the secondary-key logic failed",
    "probability": "the probability roll failed",
    "group": "it lost its inclusion group to the uid in ``winner`` (by roll, override, a sticky member, or an "
             "entry activated in an earlier pass)",
    "group_scoring": "a group member with a higher key score won",
    "budget": "the token budget was used up",
    "duplicate": "another entry with the same book and uid was already activated",
}


@dataclass(frozen=True)
class TraceRecord:
    """The final decision about one entry.

    Not slotted, so :func:`trace_records` can build each from a single dict: a trace has a record
    for every entry of every book, and the generated ``__init__`` of a frozen class spends a
    guarded ``object.__setattr__`` per field of each.
    """

    book: str
    uid: int | str
    outcome: Outcome
    reason: str
    detail: str
    step: int | None = None  # the loop pass (1-based) of the decision; None if never looked at
    state: str | None = None  # "initial", "recursion" or "min_activations"
    key: str | None = None  # the primary key that matched
    secondary: str | None = None  # the secondary key that decided an AND_ANY / NOT_ALL logic
    winner: int | str | None = None  # for group losses: the uid that won
    comment: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, leaving out empty fields."""
        out: dict[str, Any] = {"book": self.book, "uid": self.uid, "outcome": self.outcome, "reason": self.reason,
                               "detail": self.detail}
        # spelt out rather than a getattr loop: a trace has a record per entry of every book
        if self.step is not None:
            out["step"] = self.step
        if self.state is not None:
            out["state"] = self.state
        if self.key is not None:
            out["key"] = self.key
        if self.secondary is not None:
            out["secondary"] = self.secondary
        if self.winner is not None:
            out["winner"] = self.winner
        if self.comment:
            out["comment"] = self.comment
        return out


_new_object = object.__new__
_set_attribute = object.__setattr__


def trace_records(entries: Iterable[Any], decisions: Iterable[tuple[Any, ...]]) -> tuple[TraceRecord, ...]:
    """One record per entry (anything with ``book``, ``uid`` and ``comment``) from its decision tuple
    ``(outcome, reason, detail, step, state, key, secondary, winner)``, in one tight loop.

    A ``detail`` of ``None`` is "fired by key K" (K the decision's key), written here rather than
    for every entry a scan activates by a key (over a thousand in a large book, most never read).
    """
    new, set_attribute, cls = _new_object, _set_attribute, TraceRecord
    out = []
    append = out.append
    for e, d in zip(entries, decisions):
        record = new(cls)
        detail = d[2] if d[2] is not None else f"fired by key {d[5]!r}"
        set_attribute(record, "__dict__", {"book": e.book, "uid": e.uid, "outcome": d[0], "reason": d[1],
                                           "detail": detail, "step": d[3], "state": d[4], "key": d[5],
                                           "secondary": d[6], "winner": d[7], "comment": e.comment})
        append(record)
    return tuple(out)


def trace_dicts(entries: Iterable[Any], decisions: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """What ``[r.to_dict() for r in trace_records(entries, decisions)]`` gives, without the records."""
    out = []
    append = out.append
    for e, d in zip(entries, decisions):
        detail = d[2] if d[2] is not None else f"fired by key {d[5]!r}"
        row: dict[str, Any] = {"book": e.book, "uid": e.uid, "outcome": d[0], "reason": d[1], "detail": detail}
        if d[3] is not None:
            row["step"] = d[3]
        if d[4] is not None:
            row["state"] = d[4]
        if d[5] is not None:
            row["key"] = d[5]
        if d[6] is not None:
            row["secondary"] = d[6]
        if d[7] is not None:
            row["winner"] = d[7]
        if e.comment:
            row["comment"] = e.comment
        append(row)
    return out


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One pass of the loop."""

    step: int
    state: str
    depth: int
    level: float
    candidates: tuple[str, ...]
    activated: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "state": self.state, "depth": self.depth, "level": self.level,
                "candidates": list(self.candidates), "activated": list(self.activated)}


@dataclass(frozen=True, slots=True)
class Draw:
    """One random number the activation used, so a run can be audited and replayed."""

    kind: Literal["probability", "group"]
    value: float  # in [0, 1)
    subject: str  # "book.uid" for probability, the group name for groups
    threshold: float  # probability percent, or the total group weight
    outcome: str  # "pass"/"fail", or the winner's "book.uid"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "subject": self.subject, "threshold": self.threshold,
                "outcome": self.outcome}


class Trace:
    """Per-entry records in scan order, and the loop's passes.

    ``entries`` may be given as a callable: the records of entries no key could match are then
    worked out on first access, so a scan of a large book does not pay for a trace nobody reads.
    """

    __slots__ = ("_entries", "_factory", "_dicts", "steps")

    def __init__(self, entries: tuple[TraceRecord, ...] | Callable[[], tuple[TraceRecord, ...]],
                 steps: tuple[StepRecord, ...] = (), *,
                 dicts: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        self._entries: tuple[TraceRecord, ...] | None = None
        self._factory: Callable[[], tuple[TraceRecord, ...]] | None = None
        #: builds :meth:`to_list` without the records (the CLI's JSON needs only the dicts)
        self._dicts = dicts
        if callable(entries):
            self._factory = entries
        else:
            self._entries = tuple(entries)
        self.steps = steps

    @property
    def entries(self) -> tuple[TraceRecord, ...]:
        if self._entries is None:
            assert self._factory is not None
            self._entries = self._factory()
            self._factory = None
        return self._entries

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and self.entries == other.entries and self.steps == other.steps

    def __repr__(self) -> str:
        return f"Trace({len(self)} entries, {len(self.steps)} steps)"

    def get(self, book: str, uid: int | str) -> TraceRecord | None:
        """The record of one entry."""
        for record in self.entries:
            if record.book == book and record.uid == uid:
                return record
        return None

    def to_list(self) -> list[dict[str, Any]]:
        if self._entries is None and self._dicts is not None:
            return self._dicts()
        return [r.to_dict() for r in self.entries]
