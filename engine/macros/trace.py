"""Output provenance of a render: which macro (or variable read) produced each range of the text.

A traced render (``expand_macros(..., trace=True)``) records, for every macro at the top level
of the text, the range of the output it produced and the variables it read. Nested macros are
part of their outermost macro's range: an ``{{if}}`` body or a ``{{random::{{user}}::x}}``
argument is attributed to the ``if`` or ``random`` that placed it, because only the outermost
macro decides where its text lands (a body is dedented and trimmed, an argument may be dropped).

The ranges are computed in the evaluator's output and then carried through the
post-processing (escaped braces, ``{{trim}}`` removal, the ``{{else}}`` marker) as deletions,
so the traced text is always the same text an untraced render gives: tracing observes, it never
changes what is produced. The assembler maps these ranges into the span provenance of each
final message.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .variables import VariableStore

__all__ = ["MacroSegment", "TracingStore", "map_through_deletions"]

#: macros whose whole output is the value of one variable they read
_READERS = frozenset({"getvar", "getglobalvar"})


@dataclass(frozen=True, slots=True)
class MacroSegment:
    """One output range ``[start, end)`` (characters of the result text) and what produced it.

    ``source_start``/``source_end`` are character offsets of the macro (with its scoped body
    and closer) in the caller's text; ``reads`` are the ``(scope, name)`` variable reads made
    while it was evaluated, ``scope`` being ``"local"`` or ``"global"``. ``kind`` is
    ``"variable"`` for a plain read (``{{getvar::x}}``, ``{{.x}}``, ``{{$x}}``), else ``"macro"``.
    """

    start: int
    end: int
    macro: str
    source_start: int
    source_end: int
    reads: tuple[tuple[str, str], ...] = ()
    kind: str = "macro"

    def to_dict(self) -> dict[str, Any]:
        """JSON form; a variable read also names its variable at the top level."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "macro": self.macro,
            "start": self.start,
            "end": self.end,
            "source_start": self.source_start,
            "source_end": self.source_end,
        }
        if self.kind == "variable" and self.reads:
            out["scope"], out["name"] = self.reads[0]
        if self.reads:
            out["reads"] = [{"scope": s, "name": n} for s, n in self.reads]
        return out


class TracingStore(VariableStore):
    """A variable scope that logs every read (``get``, ``raw``, ``has``) into a shared list.

    Only traced renders use it; the plain store keeps its fast path. Writes are not logged:
    provenance answers "where did this text come from", and a write produces no text.
    """

    __slots__ = ("_log", "_scope")

    def __init__(self, initial: Mapping[str, Any] | None, scope: str, log: list[tuple[str, str]]) -> None:
        super().__init__(initial)
        self._scope = scope
        self._log = log

    def has(self, name: str) -> bool:
        self._log.append((self._scope, name))
        return super().has(name)

    def raw(self, name: str) -> Any:
        self._log.append((self._scope, name))
        return super().raw(name)

    def get(self, name: str) -> Any:
        self._log.append((self._scope, name))
        return super().get(name)


def map_through_deletions(
    ranges: list[list[int]], deletions: Sequence[tuple[int, int]]
) -> None:
    """Shift ``ranges`` (``[start, end]`` lists, edited in place) past removed ``[a, b)`` pieces.

    ``deletions`` are sorted and disjoint, in the coordinates of the text before removal. A
    position inside a removed piece lands where the piece was.
    """
    if not deletions:
        return
    starts = [a for a, _ in deletions]
    removed_before: list[int] = []  # total length removed by deletions[0..i)
    total = 0
    for a, b in deletions:
        removed_before.append(total)
        total += b - a

    def at(p: int) -> int:
        i = bisect_right(starts, p) - 1
        if i < 0:
            return p
        a, b = deletions[i]
        if p < b:
            return a - removed_before[i]
        return p - removed_before[i] - (b - a)

    for r in ranges:
        r[0] = at(r[0])
        r[1] = at(r[1])


def segment_kind(name: str, is_shorthand_read: bool, reads: tuple[tuple[str, str], ...]) -> str:
    """``"variable"`` when a macro's whole output is one variable's value, else ``"macro"``."""
    if len(reads) == 1 and (is_shorthand_read or name.lower() in _READERS):
        return "variable"
    return "macro"


def post_process_traced(text: str, ranges: list[list[int]]) -> str:
    """:func:`.evaluator.post_process`, carrying ``ranges`` (edited in place) through each step.

    The same three steps in the same order, each expressed as the pieces it removes, so the
    text returned is exactly what ``post_process`` returns (``tests/test_macros_trace.py``).
    """
    from .evaluator import _TRIM_FIND, _UNESCAPE, ELSE_MARKER, trim_ranges

    if "\\" in text and ("\\{" in text or "\\}" in text):
        # each match is a backslash and the brace it escapes: the backslash goes
        map_through_deletions(ranges, [(m.start(), m.start() + 1) for m in _UNESCAPE.finditer(text)])
        text = _UNESCAPE.sub(r"\1", text)
    if "{" in text:
        found = _TRIM_FIND.search(text)
        if found is not None:
            cuts = trim_ranges(text, found.start())
            map_through_deletions(ranges, cuts)
            kept: list[str] = []
            prev = 0
            for a, b in cuts:
                kept.append(text[prev:a])
                prev = b
            kept.append(text[prev:])
            text = "".join(kept)
    if "\x00" in text:
        cuts = []
        at = text.find(ELSE_MARKER)
        while at >= 0:
            cuts.append((at, at + len(ELSE_MARKER)))
            at = text.find(ELSE_MARKER, at + len(ELSE_MARKER))
        map_through_deletions(ranges, cuts)
        text = text.replace(ELSE_MARKER, "")
    return text


class TracedPlan(NamedTuple):
    """The traced twin of a top-level plan (:func:`run_traced`), kept in the level's memo."""

    plan: Any
    twin: Any
    #: ``id(opener node) -> closer end`` of the level's scoped pairs (a segment's source end)
    ends: dict[int, int]


def run_traced(plan: Any, state: Any, items: Sequence[Any]) -> str:
    """Run the top level's plan (:class:`.plan.LevelPlan`), marking each macro part's output range.

    A traced twin of the plan is built once per plan and kept beside it in the template's memo:
    the same literals and the same bound calls, each call wrapped to note the length of what it
    produced and the reads it made, so a traced render costs about what a plain render does
    (the plan's own size checks run unchanged). The ranges land in ``state.segments`` in the
    form :meth:`.evaluator.RenderState._record_segments` gives.
    """
    from .plan import LevelPlan

    memo = state.level(items).at(0, state.inputs.registry)  # where the plan itself is kept
    entry = memo.traced
    if entry is None or entry.plan is not plan:
        ends: dict[int, int] = {}
        if memo.pairing is not None:
            for idx, (_a, _b, closer_end, _ci) in memo.pairing.pairs.items():
                ends[id(items[idx])] = closer_end
        parts = [part if part.__class__ is str else _noting(part, index) for index, part in enumerate(plan.parts)]
        entry = memo.traced = TracedPlan(plan, LevelPlan(parts, list(plan.meta)), ends)
    twin, ends = entry.twin, entry.ends
    noted: list[tuple[int, int, int, int]] = []
    state.segments = noted
    text = twin.run(state, 0)
    lengths = {index: (length, r0, r1) for index, length, r0, r1 in noted}
    reads = state.reads or []
    found: list[tuple[int, int, Any, int, tuple[tuple[str, str], ...]]] = []
    pos = 0
    for index, part in enumerate(plan.parts):
        if part.__class__ is str:
            pos += len(part)
            continue
        length, r0, r1 = lengths[index]
        node = plan.meta[index]
        found.append((pos, pos + length, node, ends.get(id(node), node.end), tuple(reads[r0:r1])))
        pos += length
    state.segments = found
    return text


def _noting(part: Any, index: int) -> Any:
    """``part`` wrapped to append ``(index, output length, reads before, reads after)``."""

    def noted(state: Any, depth: int) -> str:
        reads = state.reads
        r0 = len(reads)
        piece = part(state, depth)
        state.segments.append((index, len(piece), r0, len(reads)))
        return piece

    return noted
