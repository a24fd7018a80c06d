"""Sticky, cooldown and delay timed effects, with their state kept by the caller.

SillyTavern stores ``{sticky, cooldown}`` records in the chat's metadata; we take them in and give
them back as a plain JSON-able dict, ``{"sticky": {"book.uid": {"hash", "start", "end",
"protected"}}, "cooldown": {...}}``, so the caller decides where it lives and activation stays a
pure function of its inputs. Lengths are counted in scanned (non-system) chat messages.

Rules (research digest section 2.9): a record whose start is not behind the current chat length
was made by a scan of the same chat (a regenerate or swipe) and is dropped unless protected; a
record past its end is dropped, and an ending sticky effect starts a protected cooldown at once;
a record whose entry lost that effect is dropped. Delay needs no record: it is active while the
chat is shorter than ``delay``. On a dry run sticky and cooldown are neither checked nor written.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TemplateError
from .entries import Entry

__all__ = ["TimedEffects", "validate_state"]

KINDS = ("sticky", "cooldown")


def validate_state(state: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """A deep copy of ``state`` in the expected shape; ``TemplateError(INPUT_INVALID)`` with the path if not."""
    out: dict[str, dict[str, dict[str, Any]]] = {"sticky": {}, "cooldown": {}}
    if state is None:
        return out
    if not isinstance(state, Mapping):
        raise TemplateError("the timed-effects state should be an object", code="INPUT_INVALID", path="$")
    for kind in KINDS:
        records = state.get(kind, {})
        if records is None:
            continue
        if not isinstance(records, Mapping):
            raise TemplateError(f"{kind} should be an object", code="INPUT_INVALID", path=f"$.{kind}")
        for key, record in records.items():
            where = f"$.{kind}.{key}"
            if not isinstance(record, Mapping):
                raise TemplateError("a timed-effect record should be an object", code="INPUT_INVALID", path=where)
            for name in ("start", "end"):
                value = record.get(name)
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TemplateError(f"{name} should be a number", code="INPUT_INVALID", path=f"{where}.{name}")
            out[kind][str(key)] = {
                "hash": str(record.get("hash", "")),
                "start": record["start"],
                "end": record["end"],
                "protected": bool(record.get("protected", False)),
            }
    return copy.deepcopy(out)


class TimedEffects:
    """The timed effects of one scan: which entries are sticky, cooling down or delayed now."""

    def __init__(self, state: Any, entries: Sequence[Entry], chat_length: int, *, dry_run: bool) -> None:
        self.records = validate_state(state)
        self.chat_length = chat_length
        self.dry_run = dry_run
        self.active: dict[str, set[str]] = {"sticky": set(), "cooldown": set()}
        self._by_hash: dict[str, Entry] = {}
        if not dry_run and (self.records["sticky"] or self.records["cooldown"]):
            for entry in entries:
                if entry.sticky > 0 or entry.cooldown > 0:  # only these can have records
                    self._by_hash.setdefault(entry.hash, entry)
        self.delayed = {e.id for e in entries if e.delay > 0 and chat_length < e.delay}
        if not dry_run:
            self._check("sticky")
            self._check("cooldown")

    def _check(self, kind: str) -> None:
        records = self.records[kind]
        for key in list(records):
            record = records.get(key)
            if record is None:
                continue
            if self.chat_length <= record["start"] and not record["protected"]:
                del records[key]  # the chat did not advance: a regenerate or a swipe starts fresh
                continue
            entry = self._by_hash.get(record["hash"])
            if entry is None:
                # the entry is gone (or edited): keep the record until its interval has passed
                if self.chat_length >= record["end"]:
                    del records[key]
                continue
            if getattr(entry, kind) <= 0:
                del records[key]
                continue
            if self.chat_length >= record["end"]:
                del records[key]
                if kind == "sticky" and entry.cooldown > 0:
                    self.records["cooldown"][entry.id] = self._new_record(entry, "cooldown", protected=True)
                    self.active["cooldown"].add(entry.id)
                continue
            self.active[kind].add(entry.id)

    def _new_record(self, entry: Entry, kind: str, *, protected: bool) -> dict[str, Any]:
        length = getattr(entry, kind)
        return {"hash": entry.hash, "start": self.chat_length, "end": self.chat_length + length,
                "protected": protected}

    def is_active(self, kind: str, entry: Entry) -> bool:
        """Whether ``kind`` ("sticky", "cooldown" or "delay") holds ``entry`` in this scan."""
        if kind == "delay":
            return entry.id in self.delayed
        return entry.id in self.active[kind]

    def record(self, activated: Sequence[Entry]) -> None:
        """Start sticky and cooldown effects for newly activated entries (not on a dry run)."""
        if self.dry_run:
            return
        for entry in activated:
            for kind in KINDS:
                if getattr(entry, kind) > 0 and entry.id not in self.records[kind]:
                    self.records[kind][entry.id] = self._new_record(entry, kind, protected=False)

    def to_state(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The state to persist for the next scan."""
        return copy.deepcopy(self.records)
