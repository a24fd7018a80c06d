"""Nodes -> text: SillyTavern 1.18's inside-out, left-to-right, single-pass evaluation.

The rules that shape this module (spec section 1):

* Every argument and scoped body is evaluated as its own document (re-parsed from its source
  span, as SillyTavern does) *before* the handler runs, so side effects happen in textual
  order, inner before outer. Only ``if`` (a ``delay_args`` definition) receives raw text and
  evaluates the branch it picks.
* Macro output is never re-scanned.
* Whatever cannot run (unknown name, wrong arity or type, a failing handler) is output as
  written with its nested macros already resolved, plus a diagnostic. Text between the items
  the parser produced (tokens it skipped while recovering) is copied verbatim.
* Scoped pairs ``{{x}}...{{/x}}`` are found per level: each opener not inside an earlier pair
  looks ahead for a closer of its name, counting only openers that can take a body.

Recursion follows brace nesting (capped at 64 by the parser) and scope nesting (capped at
:data:`MAX_SCOPE_DEPTH` here), so Python's stack stays far below its limit whatever the input.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import Diagnostic, TemplateError
from ..shortcuts import DEFAULT, Shortcuts
from ..spans import Span
from .budget import CHECK_EVERY, check
from .context import MacroContext
from .parser import MacroNode, Plain, VarNode, document_parse
from .prng import DrawCursor, seed_stream
from .registry import MacroDef, MacroRegistry
from .variables import JS_WHITESPACE, VariableStore, is_falsy_text, js_number, js_string, js_trim

__all__ = [
    "ELSE_MARKER",
    "MAX_OUTPUT_CHARS",
    "MAX_SCOPE_DEPTH",
    "Draw",
    "MacroCall",
    "RenderInputs",
    "RenderOutputs",
    "RenderState",
    "dedent_trim",
    "post_process",
]

#: The invisible marker a stray ``{{else}}`` leaves behind (removed by post-processing).
ELSE_MARKER = "\x00\x1fELSE\x1f\x00"
#: A render whose output (or any intermediate value) would pass this many characters stops.
MAX_OUTPUT_CHARS = 8 * 1024 * 1024
#: Total characters handlers may produce in one render (nested values count at every level).
MAX_PRODUCED_CHARS = 4 * MAX_OUTPUT_CHARS
#: Arguments/bodies nested deeper than this are left as written (``MACRO_NESTING_LIMIT``).
MAX_SCOPE_DEPTH = 96
#: A render reports at most this many diagnostics, and at most this many characters of their
#: messages; what is left out is summed up in one closing ``MACRO_DIAGNOSTICS_LIMIT`` warning
#: (200,000 malformed macros once printed 36 MB of diagnostics and held 300 MB of them)
MAX_DIAGNOSTICS = 100
MAX_DIAGNOSTIC_CHARS = 64 * 1024

#: :func:`.plan.build_plan`, passed in by the package (:func:`use_planner`): plans build on this
#: module's RenderState and MacroCall, so this module does not import them
_build_plan: Any = None

_TRIM_FIND = re.compile(r"\{\{trim\}\}", re.IGNORECASE)
_TRIM_MATCH = _TRIM_FIND.match
_TRIM_TAIL = re.compile(r"\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE).match
_UNESCAPE = re.compile(r"\\([{}])")
#: braces probed one by one for a ``{{trim}}`` before one regex search takes over (a text of
#: 400,000 braces cost 400,000 anchored matches; a search costs ~3 ms per MB)
_BRACE_PROBES = 64
#: output pieces of one level joined at a time (see RenderState._evaluate_inline)
_CHUNK = 4096
_INDENT = re.compile(r"^[ \t]*")


@dataclass(frozen=True, slots=True)
class Draw:
    """One random draw: which macro, where, and what it produced (replayable from the seed)."""

    kind: str
    offset: int
    value: str
    macro: str
    rolls: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "offset": self.offset, "value": self.value, "macro": self.macro}
        if self.rolls:
            out["rolls"] = list(self.rolls)
        return out


def dedent_trim(text: str) -> str:
    """Auto-trim of a scoped body (SillyTavern's ``trimScopedContent``).

    The indentation width (spaces and tabs) of the first non-blank line is removed from every
    line indented at least that much; lines indented less lose all leading whitespace. Then
    the whole text is trimmed.
    """
    if not text:
        return text
    if "\n" not in text:
        # one line: removing its indentation (spaces/tabs) is part of trimming it
        return js_trim(text)
    lines = text.split("\n")
    width = 0
    for line in lines:
        if js_trim(line):
            m = _INDENT.match(line)
            width = len(m.group()) if m else 0
            break
    if width == 0:
        return js_trim(text)
    out = []
    for line in lines:
        m = _INDENT.match(line)
        if m is not None and len(m.group()) >= width:
            out.append(line[width:])
        else:
            out.append(line.lstrip(JS_WHITESPACE))
    return js_trim("\n".join(out))


def first_trim_mark(text: str, start: int = 0) -> int:
    """Offset of the first ``{{trim}}`` (any case) at or after ``start``, or -1.

    Same matches as ``_TRIM_FIND.search``, found by ``str.find`` of ``{`` (memchr-fast) and an
    anchored match there: a case-insensitive search tries every offset of the text, and so does
    a two-character ``find`` (~2-4 us per 3 KB), while expanded prompts hold few braces.
    """
    match = _TRIM_MATCH
    find = text.find
    i = find("{", start)
    misses = 0
    while i >= 0:
        if match(text, i) is not None:
            return i
        misses += 1
        if misses > _BRACE_PROBES:  # a brace-dense text: one search beats a match per brace
            found = _TRIM_FIND.search(text, i + 1)
            return -1 if found is None else found.start()
        i = find("{", i + 1)
    return -1


def _remove_trim_marks(text: str, first: int = 0) -> str:
    """``text.replace(/(?:\\r?\\n)*{{trim}}(?:\\r?\\n)*/gi, '')`` without scanning every offset.

    Each ``{{trim}}`` takes the CR/LF run before it (back to the previous removal) and after it.
    ``first`` is where the caller already found the first mark (nothing before it is scanned again).
    Marks are found as :func:`first_trim_mark` finds them; the run after one is matched by an
    anchored pattern, the (short) run before it walked back here.
    """
    out: list[str] = []
    prev = 0
    find = text.find
    tail = _TRIM_TAIL
    search = _TRIM_FIND.search
    misses = 0
    i = find("{", first)
    while i >= 0:
        m = tail(text, i)
        if m is None:
            misses += 1
            if misses > _BRACE_PROBES:  # see first_trim_mark
                found = search(text, i + 1)
                i = -1 if found is None else found.start()
            else:
                i = find("{", i + 1)
            continue
        start = i
        while start > prev and text[start - 1] == "\n":
            start -= 2 if start - 2 >= prev and text[start - 2] == "\r" else 1
        out.append(text[prev:start])
        prev = m.end()
        i = find("{", prev)
    if not out:
        return text
    out.append(text[prev:])
    return "".join(out)


def trim_ranges(text: str, first: int = 0) -> list[tuple[int, int]]:
    """The ``[start, end)`` pieces :func:`_remove_trim_marks` removes, in order (disjoint)."""
    ranges: list[tuple[int, int]] = []
    prev_end = 0
    n = len(text)
    find = text.find
    match = _TRIM_MATCH
    start = find("{", first)
    while start >= 0:
        if match(text, start) is None:
            start = find("{", start + 1)
            continue
        end = start + 8  # each character of the pattern matches exactly one
        next_start = find("{", end)
        if start < prev_end:
            start = next_start
            continue  # inside the newline run a previous removal already took
        while start > prev_end and text[start - 1] == "\n":
            start -= 2 if start - 2 >= prev_end and text[start - 2] == "\r" else 1
        while end < n:
            if text[end] == "\n":
                end += 1
            elif text[end] == "\r" and end + 1 < n and text[end + 1] == "\n":
                end += 2
            else:
                break
        ranges.append((start, end))
        prev_end = end
        start = next_start
    return ranges


def post_process(text: str) -> str:
    """The core post-processors, in SillyTavern's order: unescape braces, ``{{trim}}``, else."""
    # ``"\\" in text`` is a one-character scan; the two-character ones cost ~1 us per KB
    if "\\" in text and ("\\{" in text or "\\}" in text):
        text = _UNESCAPE.sub(r"\1", text)
    if "{" in text:  # one-character scans are memchr-fast; ``"{{" in text`` is not
        text = _remove_trim_marks(text)  # the text itself when it holds no mark
    if "\x00" in text:
        text = text.replace(ELSE_MARKER, "")
    return text


def overlaps(ranges: Sequence[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether any ``(start, end)`` of sorted, disjoint ``ranges`` shares a character with ``[lo, hi)``.

    One bisection: a hostile text has hundreds of thousands of recovered regions, and every
    scoped body asks.
    """
    i = bisect.bisect_left(ranges, (hi,))  # the first range starting at or after hi
    return i > 0 and ranges[i - 1][1] > lo


class Pairing(NamedTuple):
    """One level's scoped pairs (:meth:`RenderState._pairs`)."""

    #: ``{opener index: (body start, body end, closer end, closer index)}``
    pairs: dict[int, tuple[int, int, int, int]]
    #: indices of tags kept as written (unmatched closers, pairs whose opener takes no body)
    keep_raw: set[int]
    #: ``{opener index: closer index}`` of pairs nested past :data:`MAX_SCOPE_DEPTH`
    too_deep: dict[int, int]


class Arguments(NamedTuple):
    """A macro's arguments as its handler receives them (:meth:`RenderState.arguments`)."""

    values: list[str]
    #: each argument's source span (``None``: an empty argument)
    spans: list[tuple[int, int] | None]
    #: each argument's parse, when already known (``None``: parse its span when evaluating it)
    known: list[Sequence[Any] | None]
    #: ``(start, end, value)`` of each non-empty argument, for the macro written back as it was
    entries: list[tuple[int, int, str]]
    #: every argument is its own text: the macro "as written" is then its source slice
    literal: bool


#: the pairing of a level without closers (read only)
_NO_PAIRS = Pairing({}, set(), {})


@dataclass(slots=True)
class DepthMemo:
    """What a compiled template keeps about one level at one depth, for one registry version
    (which definitions take a body, and what a name resolves to, depend on it)."""

    registry: MacroRegistry
    version: int
    #: its scoped pairs (kept when finding them warned nothing)
    pairing: Pairing | None = None
    #: evaluated once already: the next evaluation builds its plan
    seen: bool = False
    #: its :class:`.plan.LevelPlan`, once built
    plan: Any = None
    #: the build found it cannot be planned (it warns, or keeps tags raw)
    unplannable: bool = False
    #: the top level's traced twin of its plan (:func:`.trace.run_traced`)
    traced: Any = None


@dataclass(slots=True)
class LevelMemo:
    """What a compiled template keeps about one parsed level (a sequence of items), shared by
    its renders and found by the sequence's ``id`` (:attr:`RenderState.levels`)."""

    #: the level's items (kept alive, so their id cannot be reused while the memo is)
    items: Sequence[Any]
    has_macro: bool
    has_closer: bool
    #: per depth, for the registry version it was made with
    depths: dict[int, DepthMemo] = field(default_factory=dict)
    #: ``(lo, hi) ->`` the ``{{if}}`` content these items are, split at its ``{{else}}``
    #: (``builtins/core.py``; keeping the branch slices keeps their identity, and their plans)
    splits: dict[tuple[int, int], Any] = field(default_factory=dict)

    def at(self, depth: int, registry: MacroRegistry) -> DepthMemo:
        """The memo at ``depth`` for ``registry`` as it is now (a fresh one when it changed)."""
        memo = self.depths.get(depth)
        if memo is None or memo.registry is not registry or memo.version != registry._version:
            memo = self.depths[depth] = DepthMemo(registry, registry._version)
        return memo


@dataclass(slots=True)
class RenderInputs:
    """What a render reads and never changes: the text, the context, the catalogue and the
    limits (a :class:`RenderState`'s :attr:`~RenderState.inputs`).

    Read-only by contract, not ``frozen``: a frozen dataclass's ``__init__`` costs about four
    times this one's, paid by every cached render with a new context, and a ``NamedTuple``'s
    field reads cost about three times a slot's. A compiled template keeps its last cached
    render's inputs for the next render with the same context and seed
    (``CompiledMacros._expand_planned``), so nothing may write them.
    """

    #: the pre-processed text every node offset refers to (:attr:`RenderState.source` is its hot copy)
    source: str
    #: the caller's original text (``{{pick}}`` hashes it, as SillyTavern does)
    content: str
    ctx: MacroContext
    registry: MacroRegistry
    #: per-call macros, shadowing registered ones
    dynamic: dict[str, MacroDef]
    #: the seed's text (see :meth:`RenderState.random`)
    rng_seed: str
    #: the shortcuts the render may take (:class:`~tavernbox.shortcuts.Shortcuts`): plans, a
    #: well-formed parent's parse of arguments/bodies reused instead of re-parsing their text,
    #: region-by-region parsing
    shortcuts: Shortcuts = DEFAULT
    max_output: int = MAX_OUTPUT_CHARS


@dataclass(slots=True)
class RenderOutputs:
    """What a render produces: the variables it writes, its draws, diagnostics and trace, and
    the size its output budget counts.

    :class:`RenderState` extends it: these are the state's own fields rather than a second
    object, because the plans' generated code writes ``produced`` for every macro and handlers
    append draws and diagnostics on the hottest path (a separate object measurably slowed the
    cached renders of ``benchmarks/bench_macros.py``). The result (``tavernbox.macros._finish``)
    reads them as a ``RenderOutputs``.
    """

    #: the variable stores, seeded from the context and written by the render (their final
    #: values are part of the result)
    local: VariableStore
    glob: VariableStore
    draws: list[Draw] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: diagnostics :meth:`RenderState.diag` left out past :data:`MAX_DIAGNOSTICS`, by code
    #: (``None``: none)
    omitted: dict[str, int] | None = None
    #: a traced render (``expand_macros(trace=True)``): the top level's macro output ranges
    #: ``(start, end, node, source end, reads)`` in evaluator output, and the variable reads
    #: the tracing stores log; ``None`` otherwise (then the top level may run from its plan)
    segments: list[tuple[int, int, Any, int, tuple[tuple[str, str], ...]]] | None = None
    reads: list[tuple[str, str]] | None = None
    #: ``{{original}}`` was expanded (SillyTavern expands it once per render)
    original_used: bool = False
    #: characters handlers produced so far (nested values count at every level), against
    #: :data:`MAX_PRODUCED_CHARS`
    produced: int = 0


@dataclass(slots=True, kw_only=True)
class RenderState(RenderOutputs):
    """One render's state: what it reads (:attr:`inputs`, a :class:`RenderInputs`), what it
    produces (the :class:`RenderOutputs` fields it extends), its random stream
    (:class:`.prng.DrawCursor`), and its caches.

    ``content`` is the text ``{{pick}}`` hashes: the caller's original text
    (:attr:`RenderInputs.content`) at the top level, the pre-processed ``source`` while a
    handler re-enters the engine (:meth:`MacroCall.evaluate`, as SillyTavern's nested calls
    see it).
    """

    inputs: RenderInputs
    #: the hot copy of ``inputs.source`` (read for every item of every level)
    source: str = field(init=False)
    content: str = field(init=False)
    #: macros left to evaluate before the CPU budget is checked again (see :mod:`.budget`)
    _ticks: int = CHECK_EVERY

    # ---- the random stream ------------------------------------------------------------------
    #: where the render is in its seed's draws (:class:`.prng.DrawCursor`, made at the first draw)
    draws_at: DrawCursor | None = None

    # ---- caches -------------------------------------------------------------------------------
    #: ``(lo, hi) -> (items, diagnostics, clean, untrusted ranges)``: the parse of every span
    #: evaluated so far (:func:`.parser.document_parse`). A compiled template hands the same dict
    #: to each render, so repeated renders parse nothing (a span's parse depends on the source
    #: text only). ``None``: parse every time.
    parse_cache: dict[tuple[int, int], tuple[tuple, tuple, bool, tuple[tuple[int, int], ...]]] | None = None
    #: ``id(items) ->`` the :class:`LevelMemo` of every level evaluated so far, shared like
    #: ``parse_cache``
    levels: dict[int, LevelMemo] = field(default_factory=dict)
    #: ``(name, argument count) ->`` whether the registered macro takes a scoped body
    _body_cache: dict[tuple[str, int], bool] = field(default_factory=dict)
    #: offsets of the source's astral characters (see :meth:`utf16`), indexed on first use
    _astral: list[int] | None = None
    #: lower-cased name -> definition of the registry (read once per render)
    _defs: dict[str, MacroDef] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        inputs = self.inputs
        self.source = inputs.source
        self.content = inputs.content
        self._defs = inputs.registry._defs

    # ---- lookups --------------------------------------------------------------------------
    def lookup(self, key: str) -> MacroDef | None:
        """Dynamic (per-call) macros shadow registered ones."""
        found = self.inputs.dynamic.get(key)
        return found if found is not None else self.inputs.registry.get(key)

    def parse(self, lo: int, hi: int) -> tuple[Sequence[Any], Sequence[Diagnostic], bool, tuple[tuple[int, int], ...]]:
        """``document_parse`` of ``source[lo:hi]``, memoised in :attr:`parse_cache`."""
        cache = self.parse_cache
        if cache is None:
            return document_parse(self.source, lo, hi, shortcuts=self.inputs.shortcuts)
        hit = cache.get((lo, hi))
        if hit is None:
            items, diags, clean, untrusted = document_parse(self.source, lo, hi, shortcuts=self.inputs.shortcuts)
            hit = cache[(lo, hi)] = (tuple(items), tuple(diags), clean, untrusted)
        return hit

    def diag(self, code: str, message: str, start: int, end: int, **data: Any) -> None:
        """Record a diagnostic; past :data:`MAX_DIAGNOSTICS` only its code is counted (the
        summary :func:`capped_diagnostics` adds), so a hostile text costs no record per macro."""
        diagnostics = self.diagnostics
        if len(diagnostics) < MAX_DIAGNOSTICS:
            diagnostics.append(Diagnostic(code, message, Span(start, max(start, end)), data=data))
            return
        omitted = self.omitted
        if omitted is None:
            omitted = self.omitted = {}
        omitted[code] = omitted.get(code, 0) + 1

    def diagnostic_count(self) -> int:
        """Diagnostics raised so far, kept or left out (a level that warned is not memoised)."""
        return len(self.diagnostics) + (sum(self.omitted.values()) if self.omitted else 0)

    def utf16(self, offset: int) -> int:
        """``offset`` in UTF-16 code units (JavaScript indices), via a one-time index of astral chars."""
        if self._astral is None:
            src = self.source
            self._astral = [] if src.isascii() else [i for i, ch in enumerate(src) if ord(ch) > 0xFFFF]
        if not self._astral:
            return offset
        return offset + bisect.bisect_left(self._astral, offset)

    def random(self) -> float:
        """The next draw of the render's seeded sequence (:class:`.prng.DrawCursor`)."""
        cursor = self.draws_at
        if cursor is None:
            cursor = self.draws_at = DrawCursor(seed_stream(self.inputs.rng_seed))
        return cursor.random()

    # ---- evaluation -----------------------------------------------------------------------
    def evaluate(self, lo: int, hi: int, depth: int = 0, items: Sequence[Any] | None = None) -> str:
        """Evaluate ``source[lo:hi]`` as one document level.

        ``items`` are the level's parse when the caller already knows it (an argument or body
        of a well-formed parent); otherwise the span is parsed here, as SillyTavern re-parses
        every argument and body. A level evaluated before runs from its plan (:meth:`_planned`).
        """
        src = self.source
        if lo >= hi:
            return ""
        if depth > MAX_SCOPE_DEPTH:
            self.diag("MACRO_NESTING_LIMIT", "macros nested deeper than the limit; left as written", lo, hi)
            return src[lo:hi]
        clean, untrusted = True, ()
        shortcuts = self.inputs.shortcuts
        if items is None or not shortcuts.reuse_parse:
            if src.find("{{", lo, hi) < 0:
                return src[lo:hi]
            items, diags, clean, untrusted = self.parse(lo, hi)
            if diags:
                self.diagnostics.extend(diags)
        level = self.level(items)
        if not level.has_macro:
            return src[lo:hi]  # plain items and the gaps between them: the span as written
        if clean and shortcuts.plans and shortcuts.reuse_parse and not self.inputs.dynamic:
            plan = self._planned(level, lo, hi, depth)
            if plan is not None:
                return plan.run(self, depth)  # type: ignore[no-any-return]
        if not level.has_closer:
            return self._evaluate_inline(lo, hi, depth, items)
        return self._evaluate_paired(lo, hi, depth, items, self._pairing(level, depth), clean, untrusted)

    def level(self, items: Sequence[Any]) -> LevelMemo:
        """The memo of the level ``items`` (made on first sight: whether it holds a macro, a closer)."""
        level = self.levels.get(id(items))
        if level is None or level.items is not items:
            has_macro = has_closer = False
            for i in items:
                if type(i) is MacroNode:
                    has_macro = True
                    if i.closing:
                        has_closer = True
                        break
            level = self.levels[id(items)] = LevelMemo(items, has_macro, has_closer)
        return level

    def known_plan(self, items: Sequence[Any], depth: int) -> Any:
        """The plan built for the level ``items`` at ``depth`` with this registry version, or ``None``."""
        level = self.levels.get(id(items))
        if level is None or level.items is not items:
            return None
        memo = level.depths.get(depth)
        registry = self.inputs.registry
        if memo is None or memo.registry is not registry or memo.version != registry._version:
            return None
        return memo.plan

    def _planned(self, level: LevelMemo, lo: int, hi: int, depth: int) -> Any:
        """The plan to run for a clean level (its parse reused, no dynamic macros), or ``None``:
        evaluate it item by item.

        Plans pay off from the second evaluation of the same level on (a compiled template's
        second render, an argument seen again): the first marks the level seen, the second
        builds its plan (literals and pre-bound calls, see :mod:`.plan`). A traced top level
        builds its plan (a later traced render runs it through :func:`.trace.run_traced`) but
        marks its ranges in the evaluator this time.
        """
        memo = level.at(depth, self.inputs.registry)
        traced_top = depth == 0 and self.segments is not None
        if memo.plan is not None:
            return None if traced_top else memo.plan
        if memo.unplannable:
            return None
        if not memo.seen:
            memo.seen = True
            return None
        pairing = memo.pairing if level.has_closer else _NO_PAIRS
        built = _build_plan(self, lo, hi, depth, level.items, pairing) if pairing is not None else None
        if built is None:
            memo.unplannable = True  # it warns, or keeps tags raw
            return None
        memo.plan = built
        return None if traced_top else built

    def _pairing(self, level: LevelMemo, depth: int) -> Pairing:
        """The level's scoped pairs at ``depth``; they depend on its items, the depth and the
        registry (which definitions may take a body): kept per registry version, unless finding
        them warned."""
        memo = level.at(depth, self.inputs.registry)
        if memo.pairing is not None:
            return memo.pairing
        before = self.diagnostic_count()
        found = self._pairs(level.items, depth)
        if self.diagnostic_count() == before:
            memo.pairing = found
        return found

    def _evaluate_paired(
        self,
        lo: int,
        hi: int,
        depth: int,
        items: Sequence[Any],
        pairing: Pairing,
        clean: bool,
        untrusted: Sequence[tuple[int, int]],
    ) -> str:
        """:meth:`evaluate` for a level with closers: each item in order, a scoped pair as one
        macro with its body, tags kept raw and pairs nested too deep left as written."""
        src = self.source
        pairs, keep_raw, too_deep = pairing
        out: list[str] = []
        size = 0
        cursor = lo
        idx = 0
        n = len(items)
        marks: list[tuple[int, Any, int, int]] | None = [] if depth == 0 and self.segments is not None else None
        mark: tuple[Any, int, int] | None = None
        while idx < n:
            item = items[idx]
            if item.start > cursor:
                out.append(src[cursor : item.start])
            if type(item) is Plain or idx in keep_raw:
                piece = src[item.start : item.end]
                cursor = item.end
                if idx in keep_raw:
                    if item.closing:
                        self.diag("MACRO_UNCLOSED_SCOPE", f"{{{{/{item.name}}}}} has no opener; left as written", item.start, item.end)
                    else:
                        self.diag("MACRO_ARITY", f"{{{{{item.name}}}}} cannot take scoped content; left as written", item.start, item.end)
                idx += 1
            elif idx in too_deep:
                closer_idx = too_deep[idx]
                cursor = items[closer_idx].end
                piece = src[item.start : cursor]
                self.diag("MACRO_NESTING_LIMIT", "scoped macros nested deeper than the limit; left as written", item.start, cursor)
                idx = closer_idx + 1
            else:
                scoped = pairs.get(idx)
                body_items = None
                if scoped is not None and (clean or not overlaps(untrusted, scoped[0], scoped[1])):
                    # the body's items, unless recovery touched it (then it is re-parsed)
                    body_items = items[idx + 1 : scoped[3]]
                if marks is not None:
                    mark = (item, scoped[2] if scoped is not None else item.end, len(self.reads or ()))
                piece = self.eval_macro(item, scoped, depth, body_items)
                if scoped is not None:
                    cursor = scoped[2]
                    idx = scoped[3] + 1
                else:
                    cursor = item.end
                    idx += 1
            size += len(piece)
            if size > self.inputs.max_output:
                raise TemplateError(
                    f"the expanded text would pass {self.inputs.max_output} characters",
                    code="MACRO_OUTPUT_LIMIT",
                    span=Span(item.start, item.end),
                    source=self.source,
                )
            out.append(piece)
            if mark is not None:
                marks.append((len(out) - 1, *mark))  # type: ignore[union-attr]
                mark = None
        if cursor < hi:
            out.append(src[cursor:hi])
        if marks:
            self._record_segments(out, marks)
        return "".join(out)

    def _evaluate_inline(self, lo: int, hi: int, depth: int, items: Sequence[Any]) -> str:
        """:meth:`evaluate` for a level without closers: no pairs, nothing kept raw."""
        src = self.source
        out: list[str] = []
        append = out.append
        size = 0
        cursor = lo
        max_output = self.inputs.max_output
        eval_macro = self.eval_macro
        marks: list[tuple[int, Any, int, int]] | None = [] if depth == 0 and self.segments is not None else None
        #: without marks (which index ``out``), every _CHUNK pieces are joined: 200,000 small
        #: pieces cost ~12 MB of string objects until the end, one joined chunk costs its text
        chunks: list[str] | None = None if marks is not None else []
        for item in items:
            if item.start > cursor:
                append(src[cursor : item.start])
            if type(item) is Plain:
                piece = src[item.start : item.end]
            else:
                if marks is not None:
                    marks.append((len(out), item, item.end, len(self.reads or ())))  # the piece's index
                piece = eval_macro(item, None, depth, None)
            cursor = item.end
            size += len(piece)
            if size > max_output:
                raise TemplateError(
                    f"the expanded text would pass {max_output} characters",
                    code="MACRO_OUTPUT_LIMIT",
                    span=Span(item.start, item.end),
                    source=self.source,
                )
            append(piece)
            if len(out) >= _CHUNK and chunks is not None:
                chunks.append("".join(out))
                out.clear()
        if cursor < hi:
            append(src[cursor:hi])
        if marks:
            self._record_segments(out, marks)
        if chunks:
            chunks.append("".join(out))
            return "".join(chunks)
        return "".join(out)

    def _record_segments(self, out: list[str], marks: list[tuple[int, Any, int, int]]) -> None:
        """Turn ``(index in out, node, source end, reads before)`` marks into output ranges."""
        segments = self.segments
        reads = self.reads or []
        assert segments is not None
        positions: list[int] = []
        pos = 0
        for piece in out:
            positions.append(pos)
            pos += len(piece)
        for i, (index, node, src_end, r0) in enumerate(marks):
            r1 = marks[i + 1][3] if i + 1 < len(marks) else len(reads)
            start = positions[index]
            segments.append((start, start + len(out[index]), node, src_end, tuple(reads[r0:r1])))

    def _can_take_body(self, m: MacroNode) -> bool:
        """SillyTavern consults registered macros only (dynamic ones count as unknown)."""
        cache_key = (m.key, len(m.args))
        cached = self._body_cache.get(cache_key)
        if cached is None:
            definition = self.inputs.registry.get(m.key)
            cached = True if definition is None else definition.can_take_body(len(m.args))
            self._body_cache[cache_key] = cached
        return cached

    def _pairs(self, items: Sequence[Any], level: int = 0) -> Pairing:
        """Scoped pairs of one level, the items kept raw, and pairs nested too deep.

        Returns ``{opener index: (body start, body end, closer end, closer index)}``, the set
        of indices kept raw, and ``{opener index: closer index}`` for pairs whose same-name
        nesting would pass :data:`MAX_SCOPE_DEPTH` (left as written, found in one scan instead
        of descending level by level).

        SillyTavern's rule: each opener not inside an earlier pair looks forward for a closer of
        its name, counting depth only for openers that can take a body. An opener that cannot
        take one still pairs, but both tags are then kept raw and the content between them is
        evaluated in place. Unmatched closers are kept raw. Only same-name macros are visited,
        and a step budget keeps hostile inputs (thousands of unclosed openers) linear.
        """
        by_name: dict[str, list[int]] = {}
        any_closer = False
        for idx, item in enumerate(items):
            if type(item) is not MacroNode or item.var is not None or not item.name:
                continue
            seq = by_name.get(item.key)
            if seq is None:
                by_name[item.key] = [idx]
            else:
                seq.append(idx)
            if item.closing:
                any_closer = True
        if not any_closer:
            return Pairing({}, set(), {})
        pairs: dict[int, tuple[int, int, int, int]] = {}
        keep_raw: set[int] = set()
        too_deep: dict[int, int] = {}
        matched: set[int] = set()
        budget = 200_000 + 20 * len(items)
        room = MAX_SCOPE_DEPTH - level
        scope_end = -1
        for key, seq in by_name.items():
            closers = [i for i in seq if items[i].closing]
            if not closers:
                continue
            accept = {i: self._can_take_body(items[i]) for i in seq if not items[i].closing}
            unmatched = len(closers)
            ticks = CHECK_EVERY
            for pos, idx in enumerate(seq):
                item = items[idx]
                ticks -= 1
                if not ticks:
                    ticks = CHECK_EVERY
                    check(item.start)  # the render's CPU budget (see .budget; the caller names the text)
                if item.closing or idx in matched:
                    continue
                if closers[-1] < idx or unmatched == 0:
                    break  # no free closer after this opener (nor after any later one)
                depth = 1
                deepest = 1
                found = -1
                for k in range(pos + 1, len(seq)):  # (a slice copied the rest of seq: quadratic)
                    j = seq[k]
                    budget -= 1
                    if j in matched:
                        continue
                    if items[j].closing:
                        depth -= 1
                        if depth == 0:
                            found = j
                            break
                    elif accept[j]:
                        depth += 1
                        if depth > deepest:
                            deepest = depth
                if budget < 0:
                    self.diag(
                        "MACRO_NESTING_LIMIT",
                        "too many unclosed scoped macros; the rest are treated as inline",
                        item.start,
                        item.end,
                    )
                    break
                if found < 0:
                    continue
                matched.add(idx)
                matched.add(found)
                unmatched -= 1
                if not accept[idx]:
                    keep_raw.add(idx)
                    keep_raw.add(found)
                    continue
                if deepest > room:
                    too_deep[idx] = found
                else:
                    opener, closer = items[idx], items[found]
                    pairs[idx] = (opener.end, closer.start, closer.end, found)
            for c in closers:
                if c not in matched:
                    keep_raw.add(c)
        # SillyTavern takes pairs left to right and skips openers inside an earlier pair
        if pairs or too_deep:
            chosen: dict[int, tuple[int, int, int, int]] = {}
            chosen_deep: dict[int, int] = {}
            for idx in sorted([*pairs, *too_deep]):
                if idx <= scope_end:
                    # an opener inside an earlier pair does not pair at this level; its closer,
                    # when it lies outside that pair, is an unmatched closer here
                    closer_idx = pairs[idx][3] if idx in pairs else too_deep[idx]
                    if closer_idx > scope_end:
                        keep_raw.add(closer_idx)
                    continue
                if idx in pairs:
                    chosen[idx] = pairs[idx]
                    scope_end = pairs[idx][3]
                else:
                    chosen_deep[idx] = too_deep[idx]
                    scope_end = too_deep[idx]
            pairs, too_deep = chosen, chosen_deep
        return Pairing(pairs, keep_raw, too_deep)

    # ---- one macro --------------------------------------------------------------------------
    def eval_macro(
        self,
        m: MacroNode,
        scoped: tuple[int, int, int, int] | None,
        depth: int,
        body_items: Sequence[Any] | None = None,
    ) -> str:
        """Evaluate one complete macro (with its scoped body when paired).

        An argument whose items the parse knows (:attr:`.ArgNode.items`, set only when a re-parse
        of its text would find exactly them, even in a document that needed recovery elsewhere)
        is evaluated from them instead of re-parsing its text; ``body_items`` likewise.
        """
        self._ticks -= 1
        if not self._ticks:
            self._ticks = CHECK_EVERY
            check(m.start, self.source)  # the render's CPU budget (see .budget)
        if m.var is not None:
            return self._account(eval_shorthand(self, m, depth))
        key = m.key
        dynamic = self.inputs.dynamic
        registered = self._defs.get(key)
        definition = dynamic.get(key) if dynamic else None
        if definition is None:
            definition = registered
        if not m.args and scoped is None:
            return self._eval_bare(m, definition, depth)  # the common case: nothing to evaluate first
        src = self.source
        delay = registered is not None and registered.delay_args and key not in dynamic
        if (
            scoped is None
            and definition is not None
            and definition.strict
            and not definition.accepts(len(m.args))
            and (delay or self._literal_args(m, depth))
        ):
            # a wrong call whose arguments are their own text: evaluating them (no effects) and
            # writing the macro back from them gives its source (hostile texts repeat this)
            self._arity_diag(definition, len(m.args), m.start, m.end)
            return src[m.start : m.end]
        collected = self.arguments(m, depth, delay=delay)
        assert collected is not None  # evaluated when they must be
        body_value = self._add_body(m, scoped, body_items, depth, delay, collected) if scoped is not None else None
        values, spans, known, entries, literal = collected
        if definition is None:
            return self._unknown(m, scoped, entries, literal, body_value)
        end = scoped[2] if scoped else m.end
        refused = self._refused(definition, m, collected, scoped is not None, end)
        if refused is not None:
            return refused
        call = MacroCall(m.name, values, m.flags, scoped is not None, m.start, m, self, depth, spans, known)
        return self._call(definition, call, m, entries, end)

    def _eval_bare(self, m: MacroNode, definition: MacroDef | None, depth: int) -> str:
        """A macro with no arguments and no body."""
        if definition is None:
            self.diag("MACRO_UNKNOWN", f"unknown macro {{{{{m.name}}}}}; left as written", m.start, m.end, name=m.name)
            return self.source[m.start : m.end]  # "{{" + inner + "}}": a complete macro's source
        if definition.min_args:
            self._arity_diag(definition, 0, m.start, m.end)
            if definition.strict:
                return self.source[m.start : m.end]
        return self._call(definition, MacroCall(m.name, [], m.flags, False, m.start, m, self, depth, [], []), m, (), m.end)

    def _add_body(
        self,
        m: MacroNode,
        scoped: tuple[int, int, int, int],
        body_items: Sequence[Any] | None,
        depth: int,
        delay: bool,
        collected: Arguments,
    ) -> str | None:
        """A scoped macro's body as its last argument (raw for a ``delay_args`` macro, else
        evaluated and, unless flagged ``#``, dedented and trimmed); the evaluated body, if any."""
        lo, hi = scoped[0], scoped[1]
        collected.known.append(body_items)
        if lo >= hi:
            collected.values.append("")
            collected.spans.append(None)
            return ""
        body_value: str | None = None
        if delay:
            value = self.source[lo:hi]
        else:
            body_value = self.evaluate(lo, hi, depth + 1, body_items)
            value = body_value if "#" in m.flags else dedent_trim(body_value)
        collected.values.append(value)
        collected.spans.append((lo, hi))
        collected.entries.append((lo, hi, value))
        return body_value

    def _unknown(
        self,
        m: MacroNode,
        scoped: tuple[int, int, int, int] | None,
        entries: list[tuple[int, int, str]],
        literal: bool,
        body_value: str | None,
    ) -> str:
        """An unknown macro, left as written with its arguments (and body) evaluated."""
        src = self.source
        self.diag("MACRO_UNKNOWN", f"unknown macro {{{{{m.name}}}}}; left as written", m.start, m.end, name=m.name)
        if scoped is None:
            return src[m.start : m.end] if literal else self._raw(m, entries)
        # deliberate deviation: opener, resolved body and closer as written (ST mangles it)
        parts = ["{{"]
        cursor = m.inner_start
        for a, b, value in entries:
            if b > m.inner_end:
                continue  # the body
            if a > cursor:
                parts.append(src[cursor:a])
            parts.append(value)
            cursor = b
        parts.append(src[cursor : m.end])
        parts.append(body_value or "")
        parts.append(src[scoped[1] : scoped[2]])
        return "".join(parts)

    def _refused(self, definition: MacroDef, m: MacroNode, collected: Arguments, scoped: bool, end: int) -> str | None:
        """The macro as written when its argument count or types refuse the call (with the
        diagnostic), else ``None``; a non-strict definition is called despite a wrong count."""
        values, spans, _known, entries, literal = collected
        if not definition.accepts(len(values)):
            self._arity_diag(definition, len(values), m.start, end)
            if definition.strict:
                return self.source[m.start : m.end] if literal and not scoped else self._raw(m, entries)
            return None
        if definition.strict and definition.arg_types:
            bad = definition.type_error(values)
            if bad is not None:
                kind = definition.arg_types[bad] if bad < len(definition.arg_types) else "string"
                where = spans[bad] or (m.start, m.end)
                self.diag(
                    "MACRO_ARGUMENT_TYPE",
                    f"argument {bad + 1} of {{{{{m.name}}}}} must be {kind}; left as written",
                    where[0],
                    where[1],
                )
                return self._raw(m, entries)
        return None

    def arguments(self, m: MacroNode, depth: int, *, delay: bool = False, evaluate: bool = True) -> Arguments | None:
        """Each argument of ``m`` as its handler receives it: its own text when ``delay`` (a
        ``delay_args`` macro) or when it is literal (one plain item, its parse reused), else
        evaluated as a level of its own; ``None`` instead of evaluating one when not
        ``evaluate`` (a plan binds only arguments whose value is fixed)."""
        src = self.source
        literal_ok = self.inputs.shortcuts.reuse_parse and depth < MAX_SCOPE_DEPTH
        values: list[str] = []
        spans: list[tuple[int, int] | None] = []
        known: list[Sequence[Any] | None] = []
        entries: list[tuple[int, int, str]] = []
        literal = True
        ticks = CHECK_EVERY
        for arg in m.args:
            ticks -= 1
            if not ticks:
                ticks = CHECK_EVERY
                check(m.start, src)  # the render's CPU budget (see .budget)
            items = arg.items
            known.append(items)
            span = arg.span
            if span is None:
                values.append("")
                spans.append(None)
                continue
            a, b = span
            if delay or (literal_ok and items is not None and len(items) == 1 and type(items[0]) is Plain):
                value = src[a:b]  # a literal argument is its own text
            elif not evaluate:
                return None
            else:
                value = self.evaluate(a, b, depth + 1, items)
                literal = False
            values.append(value)
            spans.append(span)
            entries.append((a, b, value))
        return Arguments(values, spans, known, entries, literal)

    def _call(self, definition: MacroDef, call: MacroCall, m: MacroNode, entries: Sequence[tuple[int, int, str]], end: int) -> str:
        """Run a handler; a failure leaves the macro as written (with its evaluated arguments)."""
        try:
            result = definition.handler(call)
        except TemplateError as exc:
            if exc.code in ("MACRO_REPEAT_LIMIT", "MACRO_ROLL_LIMIT"):
                self.diag(exc.code, exc.message, m.start, end)
                return self._raw(m, entries)
            raise
        except Exception as exc:  # a handler failure leaves the macro as written
            self.diag("MACRO_HANDLER_ERROR", f"{{{{{m.name}}}}} failed: {type(exc).__name__}: {exc}", m.start, end)
            return self._raw(m, entries)
        return self._account(result if type(result) is str else js_string(result))

    def _raw(self, m: MacroNode, entries: Sequence[tuple[int, int, str]]) -> str:
        """The macro as written, its arguments replaced by their evaluated values."""
        src = self.source
        parts = ["{{"]
        cursor = m.inner_start
        for a, b, value in entries:
            if a > cursor:
                parts.append(src[cursor:a])
            parts.append(value)
            cursor = b
        if cursor < m.inner_end:
            parts.append(src[cursor : m.inner_end])
        parts.append("}}")
        return "".join(parts)

    def _account(self, text: str) -> str:
        self.produced += len(text)
        if len(text) > self.inputs.max_output or self.produced > MAX_PRODUCED_CHARS:
            raise TemplateError(
                f"the expanded text would pass {self.inputs.max_output} characters",
                code="MACRO_OUTPUT_LIMIT",
            )
        return text

    def _literal_args(self, m: MacroNode, depth: int) -> bool:
        """Whether each argument of ``m`` evaluates to its own text (as :meth:`eval_macro` reads them)."""
        literal_ok = self.inputs.shortcuts.reuse_parse and depth < MAX_SCOPE_DEPTH
        for arg in m.args:
            if arg.span is None:
                continue
            items = arg.items
            if not literal_ok or items is None or len(items) != 1 or type(items[0]) is not Plain:
                return False
        return True

    def _arity_diag(self, definition: MacroDef, count: int, start: int, end: int) -> None:
        """``MACRO_ARITY``, its message written only while diagnostics are still kept (a text of
        200,000 wrong calls counts the rest, as :meth:`diag` does)."""
        code = arity_code(definition, count)
        if len(self.diagnostics) < MAX_DIAGNOSTICS:
            self.diag(code, arity_message(definition, count), start, end)
            return
        omitted = self.omitted
        if omitted is None:
            omitted = self.omitted = {}
        omitted[code] = omitted.get(code, 0) + 1


def _unclosed(definition: MacroDef, count: int) -> bool:
    """Whether a call short of arguments is a scoped macro whose closing tag is missing (``{{if x}}text``): its body
    would have been the argument it lacks. Only a block macro (one whose arguments wait for it: ``{{if}}``) reads so;
    ``{{shout::x}}`` of a two-argument macro, or ``{{roll}}`` with none, is short of an argument."""
    return definition.delay_args and 1 <= count == definition.min_args - 1 and definition.can_take_body(count)


def arity_code(definition: MacroDef, count: int) -> str:
    """``MACRO_UNCLOSED_SCOPE`` for a scoped macro left open, else ``MACRO_ARITY``."""
    return "MACRO_UNCLOSED_SCOPE" if _unclosed(definition, count) else "MACRO_ARITY"


def arity_message(definition: MacroDef, count: int) -> str:
    """The ``MACRO_ARITY`` message (the evaluator's and the linter's: one wording); a scoped macro left open is said
    to be unclosed, not short of an argument."""
    if _unclosed(definition, count):
        return f"{{{{{definition.name}}}}} is not closed: its {{{{/{definition.name}}}}} is missing; left as written"
    if definition.max_args is None:
        want = f"at least {definition.min_args}"
    elif definition.min_args == definition.max_args:
        want = str(definition.min_args)
    else:
        want = f"{definition.min_args} to {definition.max_args}"
    return f"{{{{{definition.name}}}}} takes {want} argument(s), got {count}; left as written"


def capped_diagnostics(diagnostics: Sequence[Diagnostic], omitted: dict[str, int] | None) -> list[Diagnostic]:
    """At most :data:`MAX_DIAGNOSTICS` diagnostics and :data:`MAX_DIAGNOSTIC_CHARS` of messages,
    in order, then one ``MACRO_DIAGNOSTICS_LIMIT`` warning counting what was left out by code.

    ``omitted`` holds what the render already counted without recording (see
    :meth:`RenderState.diag`). A caller printing every diagnostic with its line and column
    thus does bounded work whatever the text.
    """
    if not omitted and len(diagnostics) <= MAX_DIAGNOSTICS:
        chars = 0
        for d in diagnostics:
            chars += len(d.message)
        if chars <= MAX_DIAGNOSTIC_CHARS:
            return list(diagnostics)
    kept: list[Diagnostic] = []
    left: dict[str, int] = dict(omitted) if omitted else {}
    chars = 0
    for d in diagnostics:
        chars += len(d.message)
        if len(kept) < MAX_DIAGNOSTICS and chars <= MAX_DIAGNOSTIC_CHARS:
            kept.append(d)
        else:
            left[d.code] = left.get(d.code, 0) + 1
    total = sum(left.values())
    by_code = ", ".join(f"{code} x{count}" for code, count in sorted(left.items(), key=lambda kv: (-kv[1], kv[0])))
    kept.append(
        Diagnostic(
            "MACRO_DIAGNOSTICS_LIMIT",
            f"{total} more diagnostic(s) left out past {MAX_DIAGNOSTICS} (or {MAX_DIAGNOSTIC_CHARS} characters "
            f"of messages): {by_code}",
            None,
            "warning",
            data={"omitted": total, "codes": dict(sorted(left.items()))},
        )
    )
    return kept


_new_object = object.__new__


def planned_inputs(source: str, content: str, ctx: MacroContext, registry: MacroRegistry, rng_seed: str) -> RenderInputs:
    """The :class:`RenderInputs` of a compiled template's cached render: no dynamic macros, the
    default shortcuts and output limit."""
    return RenderInputs(source, content, ctx, registry, {}, rng_seed, DEFAULT, MAX_OUTPUT_CHARS)


def new_state(
    inputs: RenderInputs,
    local: VariableStore,
    glob: VariableStore,
    diagnostics: list[Diagnostic],
    parse_cache: dict[tuple[int, int], tuple[tuple, tuple, bool, tuple[tuple[int, int], ...]]],
    levels: dict[int, LevelMemo],
) -> RenderState:
    """A :class:`RenderState` for a compiled template's render from ``inputs`` (made by
    :func:`planned_inputs`): parses reused, untraced; every other field at its default.

    Part of every cached render: the dataclasses' ``__init__`` (keyword arguments, default
    factories, ``__post_init__``) costs about four times these slot stores.
    ``tests/test_macros_fastpath.py`` checks that it sets the same fields to the same values.
    """
    state = _new_object(RenderState)
    state.inputs = inputs
    state.local = local
    state.glob = glob
    state.draws = []
    state.diagnostics = diagnostics
    state.omitted = None
    state.segments = None
    state.reads = None
    state.original_used = False
    state.produced = 0
    state.source = inputs.source
    state.content = inputs.content
    state._body_cache = {}
    state.parse_cache = parse_cache
    state.levels = levels
    state.draws_at = None
    state._astral = None
    state._ticks = CHECK_EVERY
    state._defs = inputs.registry._defs
    return state


@dataclass(slots=True)
class MacroCall:
    """What a handler receives: evaluated ``args`` (raw text for ``delay_args`` macros).

    ``spans`` gives each argument's source span (``None`` for an empty one), so a
    ``delay_args`` handler can evaluate exactly the part it chooses.
    """

    name: str
    args: list[str]
    flags: str
    scoped: bool
    offset: int
    node: MacroNode
    state: RenderState
    depth: int = 0
    spans: list[tuple[int, int] | None] = field(default_factory=list)
    #: each argument's already-known parse (``None``: parse the span when evaluating it)
    items: list[Sequence[Any] | None] = field(default_factory=list)

    @property
    def ctx(self) -> MacroContext:
        return self.state.inputs.ctx

    def arg(self, index: int, default: str = "") -> str:
        return self.args[index] if index < len(self.args) else default

    def evaluate(self, lo: int, hi: int, items: Sequence[Any] | None = None) -> str:
        """Evaluate a source span (for ``delay_args`` handlers), with post-processing.

        SillyTavern's ``if`` re-enters the whole engine for its condition and branch, so the
        core post-processors run on them too, and ``{{pick}}`` inside them hashes the
        pre-processed text (the nested engine call sees that text as its content).
        """
        state = self.state
        saved = state.content
        state.content = state.source
        try:
            return post_process(state.evaluate(lo, hi, self.depth + 1, items))
        finally:
            state.content = saved

    @property
    def source_text(self) -> str:
        return self.state.source[self.node.start : self.node.end]


def use_planner(build_plan: Callable[..., Any]) -> None:
    """Run repeated levels through plans built by ``build_plan`` (:func:`.plan.build_plan`).

    The package passes the planner in when it is imported: plans are built from this module's
    RenderState and MacroCall, so the arrow points from the plan to the evaluator, not back.
    """
    global _build_plan
    _build_plan = build_plan


# -- the variable shorthand ``{{.name op value}}`` / ``{{$name op value}}`` (syntax, not a macro)


def _truthy(value: Any) -> bool:
    return not is_falsy_text(js_string(value))


def eval_shorthand(state: RenderState, m: MacroNode, depth: int) -> str:
    """``{{.name}}``, ``{{$name op value}}``: the value is evaluated lazily and at most once."""
    var = m.var
    assert var is not None
    store = state.local if var.scope == "." else state.glob
    name = var.name
    op = var.op
    cache: list[str] = []

    def value() -> str:
        if not cache:
            cache.append(_value_text(state, var, depth))
        return cache[0]

    if op is None:
        return js_string(store.get(name))
    if op == "++":
        return js_string(store.add(name, 1))
    if op == "--":
        return js_string(store.add(name, -1))
    if op == "=":
        store.set(name, value())
        return ""
    if op == "+=":
        store.add(name, value())
        return ""
    if op == "-=":
        num = js_number(value())
        if num is not None:
            store.add(name, -num)
        return ""
    if op == "||":
        current = store.get(name)
        return js_string(current) if _truthy(current) else value()
    if op == "||=":
        current = store.get(name)
        if _truthy(current):
            return js_string(current)
        store.set(name, value())
        return value()
    if op == "??":
        return js_string(store.get(name)) if store.has(name) else value()
    if op == "??=":
        if store.has(name):
            return js_string(store.get(name))
        store.set(name, value())
        return value()
    if op in ("==", "!="):
        same = js_string(store.get(name)) == value()
        return "true" if same == (op == "==") else "false"
    left = js_number(js_string(store.get(name)))
    right = js_number(value())
    if left is None or right is None:
        return "false"
    if op == ">":
        result = left > right
    elif op == ">=":
        result = left >= right
    elif op == "<":
        result = left < right
    else:
        result = left <= right
    return "true" if result else "false"


def _value_text(state: RenderState, var: VarNode, depth: int) -> str:
    """The value after the operator: its nested macros evaluated in place, then trimmed."""
    if var.value_span is None:
        return ""
    lo, hi = var.value_span
    src = state.source
    if not var.value_macros:
        return js_trim(src[lo:hi])
    parts: list[str] = []
    cursor = lo
    for node in sorted(var.value_macros, key=lambda n: n.start):
        if node.start > cursor:
            parts.append(src[cursor : node.start])
        if node.complete:
            parts.append(state.eval_macro(node, None, depth + 1))
        else:
            parts.append(src[node.start : node.end])
        cursor = node.end
    if cursor < hi:
        parts.append(src[cursor:hi])
    return js_trim("".join(parts))
