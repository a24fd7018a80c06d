"""The SillyTavern 1.18 macro engine: ``expand_macros(text, context) -> MacroResult``.

Pipeline (spec 1.2): pre-processors (``{{time_UTC+N}}``, ``<USER>``/``<BOT>``/``<CHAR>``
markers) -> parse (:mod:`.parser`) -> evaluate (:mod:`.evaluator`) -> post-processors (brace
unescape, ``{{trim}}``, stray ``{{else}}``). Hostile-input limits are checked before any work.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..collector import bulk_allocation
from ..errors import Diagnostic, TemplateError
from ..shortcuts import DEFAULT, PLAIN, Shortcuts
from ..spans import Span
from .budget import MAX_CPU_SECONDS, enter_budget, leave_budget
from .context import ChatMessage, MacroContext
from .evaluator import (
    MAX_OUTPUT_CHARS,
    Draw,
    LevelMemo,
    MacroCall,
    RenderInputs,
    RenderOutputs,
    RenderState,
    capped_diagnostics,
    post_process,
)
from .evaluator import new_state as _new_state
from .evaluator import planned_inputs as _planned_inputs
from .evaluator import use_planner
from .parser import ArgNode, MacroNode, Plain, VarNode, document_parse, parse_macros
from .plan import build_plan
from .registry import MacroDef, MacroRegistry, dynamic_table, use_catalogue
from .trace import MacroSegment, TracingStore, post_process_traced, run_traced, segment_kind
from .variables import VariableStore


def _builtin_catalogue() -> MacroRegistry:
    """SillyTavern's built-in macros, imported on first use so the package stays quick to import."""
    from .builtins import builtin_registry

    return builtin_registry()


# The plan builder and the built-in macros are built on the evaluator and the registry, so the
# package passes them down here instead of those modules importing what imports them.
use_planner(build_plan)
use_catalogue(_builtin_catalogue)

__all__ = [
    "MAX_CPU_SECONDS",
    "MAX_INPUT_CHARS",
    "ArgNode",
    "ChatMessage",
    "CompiledMacros",
    "Draw",
    "MacroCall",
    "MacroContext",
    "MacroDef",
    "MacroRegistry",
    "MacroNode",
    "MacroResult",
    "MacroSegment",
    "PLAIN",
    "Plain",
    "Shortcuts",
    "VarNode",
    "compile_macros",
    "expand_macros",
    "parse_macros",
]

#: Text longer than this (in characters) is refused with ``MACRO_INPUT_LIMIT``.
MAX_INPUT_CHARS = 2 * 1024 * 1024
#: Texts at least this long are parsed and evaluated with the cyclic garbage collector paused
#: (:func:`~tavernbox.collector.bulk_allocation`): their nodes are many, acyclic and stay alive,
#: and the collections their allocation triggered walked all of them again and again (200,000
#: ``{{if 1}}``: 2.9 s -> 1.7 s). Shorter texts skip the pause's own small cost.
_BULK_CHARS = 64 * 1024

_PRE = re.compile(
    r"\{\{time_(UTC[+-]\d+)\}\}|<(USER|BOT|CHAR|GROUP|CHARIFNOTGROUP)>",
    re.IGNORECASE,
)
_MARKERS = {"user": "{{user}}", "bot": "{{char}}", "char": "{{char}}", "group": "{{group}}"}


@dataclass(frozen=True, slots=True)
class MacroResult:
    """The outcome of one render.

    ``variables`` is ``{"local": {...}, "global": {...}}`` after the render (fresh dicts; the
    caller's input is never mutated). ``draws`` lists every ``{{random}}``/``{{roll}}`` draw in
    order; the same seed reproduces the same text and draws. ``segments`` is filled by a traced
    render only (``trace=True``): which top-level macro or variable read produced each range of
    ``text`` (:class:`~tavernbox.macros.trace.MacroSegment`), text between them being the
    template's own.
    """

    text: str
    variables: dict[str, dict[str, Any]]
    diagnostics: tuple[Diagnostic, ...]
    draws: tuple[Draw, ...]
    segments: tuple[MacroSegment, ...] = ()

    def to_dict(self, source: str | None = None) -> dict[str, Any]:
        out = {
            "text": self.text,
            "variables": self.variables,
            "diagnostics": [d.to_dict(source) for d in self.diagnostics],
            "draws": [d.to_dict() for d in self.draws],
        }
        if self.segments:
            out["segments"] = [s.to_dict() for s in self.segments]
        return out


_result = object.__new__
_r_text, _r_variables, _r_diagnostics, _r_draws, _r_segments = (
    MacroResult.__dict__[name].__set__ for name in ("text", "variables", "diagnostics", "draws", "segments")
)


def _make_result(
    text: str,
    variables: dict[str, dict[str, Any]],
    diagnostics: tuple[Diagnostic, ...],
    draws: tuple[Draw, ...],
    segments: tuple[MacroSegment, ...] = (),
) -> MacroResult:
    """A :class:`MacroResult` built through its slots (part of every render: the frozen
    dataclass ``__init__`` goes through ``object.__setattr__`` per field)."""
    result = _result(MacroResult)
    _r_text(result, text)
    _r_variables(result, variables)
    _r_diagnostics(result, diagnostics)
    _r_draws(result, draws)
    _r_segments(result, segments)
    return result


class _OffsetMap:
    """Maps offsets in the pre-processed text back to the caller's text (for diagnostics)."""

    def __init__(self) -> None:
        self.pre: list[int] = []  # start of each replacement in the pre-processed text
        self.orig: list[int] = []  # its start in the original
        self.pre_len: list[int] = []
        self.orig_len: list[int] = []

    def back(self, offset: int) -> int:
        i = bisect.bisect_right(self.pre, offset) - 1
        if i < 0:
            return offset
        pre, orig, plen, olen = self.pre[i], self.orig[i], self.pre_len[i], self.orig_len[i]
        if offset < pre + plen:
            return orig if offset == pre else min(orig + olen, orig + (offset - pre))
        return orig + olen + (offset - pre - plen)


def _preprocess(text: str) -> tuple[str, _OffsetMap]:
    """ST's pre-processors: ``{{time_UTC+2}}`` -> ``{{time::UTC+2}}``, markers -> macros."""
    omap = _OffsetMap()
    parts: list[str] = []
    pos = 0
    shift = 0
    for m in _PRE.finditer(text):
        if m.group(1) is not None:
            repl = "{{time::" + m.group(1) + "}}"
        else:
            marker = m.group(2).lower()
            repl = _MARKERS.get(marker, "{{charIfNotGroup}}")
        parts.append(text[pos : m.start()])
        omap.pre.append(m.start() + shift)
        omap.orig.append(m.start())
        omap.pre_len.append(len(repl))
        omap.orig_len.append(m.end() - m.start())
        shift += len(repl) - (m.end() - m.start())
        parts.append(repl)
        pos = m.end()
    if not parts:
        return text, omap
    parts.append(text[pos:])
    return "".join(parts), omap


def _locate(exc: TemplateError, text: str, omap: _OffsetMap) -> None:
    """Point an error raised on the pre-processed text at the caller's ``text``."""
    if exc.span is not None:
        exc.span = Span(omap.back(exc.span.start), omap.back(exc.span.end))
    exc.source = text


def _remap(diags: list[Diagnostic], omap: _OffsetMap) -> tuple[Diagnostic, ...]:
    if not omap.pre:
        return tuple(diags)
    out = []
    for d in diags:
        if d.span is None:
            out.append(d)
            continue
        start, end = omap.back(d.span.start), omap.back(d.span.end)
        out.append(Diagnostic(d.code, d.message, Span(start, max(start, end)), d.severity, d.path, d.data))
    return tuple(out)


class CompiledMacros:
    """A text parsed once, to expand many times (with different contexts or seeds).

    Pre-processing and the top-level parse (which already holds the parse of every argument
    of a well-formed text) are done here; :meth:`expand` only evaluates. What evaluation still
    parses (the spans of a malformed text, SillyTavern-style re-parses) and each level's scoped
    pairing are kept here by the first render, so later renders parse nothing; results are
    identical to a fresh :func:`expand_macros` (``tests/test_macros_compiled.py``). Build it
    with :func:`compile_macros`.
    """

    __slots__ = (
        "_diagnostics", "_inputs", "_items", "_levels", "_omap", "_parse_cache", "_post", "_static", "_top", "source", "text",
    )

    def __init__(
        self, text: str, *, time_limit: float | None = MAX_CPU_SECONDS, shortcuts: Shortcuts = DEFAULT
    ) -> None:
        """Parse ``text`` within ``time_limit`` seconds of CPU (``None``: no budget of its own;
        see :mod:`.budget`), or raise ``MACRO_TIME_LIMIT``. ``shortcuts.regions`` off: the
        whole-document parser only."""
        if not isinstance(text, str):
            raise TemplateError("the macro text must be a string", code="INPUT_INVALID")
        if len(text) > MAX_INPUT_CHARS:
            raise TemplateError(
                f"the macro text has {len(text)} characters; the limit is {MAX_INPUT_CHARS}",
                code="MACRO_INPUT_LIMIT",
            )
        self.text = text
        # sub-parses (arguments and bodies parsed at evaluation) kept for every later render
        self._parse_cache: dict[tuple[int, int], tuple[tuple, tuple, bool, tuple[tuple[int, int], ...]]] = {}
        self._levels: dict[int, LevelMemo] = {}  # RenderState.levels: what each level's renders keep
        pre, omap = _preprocess(text)
        self.source = pre
        self._omap = omap
        if pre and "{{" in pre:
            # ``None``: no budget of its own (an enclosing one, as expand_macros opens, holds)
            token = enter_budget(time_limit, len(pre))
            try:
                if len(pre) >= _BULK_CHARS:
                    with bulk_allocation():  # see _BULK_CHARS
                        items, diags, clean, untrusted = document_parse(pre, shortcuts=shortcuts)
                else:
                    items, diags, clean, untrusted = document_parse(pre, shortcuts=shortcuts)
            except TemplateError as exc:  # MACRO_TIME_LIMIT: where the parse had got to, in ``text``
                _locate(exc, text, omap)
                raise
            finally:
                leave_budget(token)
            # an unclean parse is redone by the evaluator (it decides per level what to trust)
            self._items: tuple | None = tuple(items) if clean else None
            self._diagnostics: tuple[Diagnostic, ...] = tuple(diags) if clean else ()
            if not clean:
                # ... from this very parse: the evaluator's parse of the whole span is the same
                # call, so it finds it in the cache instead of lexing the text a second time
                self._parse_cache[(0, len(pre))] = (tuple(items), tuple(diags), clean, untrusted)
        else:
            self._items = (Plain(0, len(pre)),) if pre else ()
            self._diagnostics = ()
        #: the output when the text holds no macro at all (most world-info entries, many prompts):
        #: it depends on nothing a render brings, so it is computed once
        self._static: str | None = None
        if pre and self._items is not None and not any(type(i) is MacroNode for i in self._items):
            self._static = post_process(pre)
        #: ``(registry, version, plan)`` of the top level once it has a plan (see :meth:`expand`)
        self._top: tuple[MacroRegistry, int, Any] | None = None
        #: the last planned render's evaluator output and its post-processed text (see
        #: :meth:`_expand_planned`), replaced whole
        self._post: tuple[str, str] = ("", "")
        #: the last cached render's inputs (:meth:`_expand_planned`)
        self._inputs: RenderInputs | None = None

    @property
    def items(self) -> tuple | None:
        """The top-level items of the parsed text (plain spans and complete macros, see
        :func:`.parser.document_items`), or ``None`` when the parse needed recovery (the evaluator
        then decides per level what to re-parse)."""
        return self._items

    def expand(
        self,
        context: MacroContext | Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
        registry: MacroRegistry | None = None,
        dynamic: Mapping[str, str | Callable[..., Any] | MacroDef] | None = None,
        trace: bool = False,
        time_limit: float | None = MAX_CPU_SECONDS,
        shortcuts: Shortcuts = DEFAULT,
    ) -> MacroResult:
        """Evaluate the parsed text in ``context`` (see :func:`expand_macros`)."""
        # ``None``: no budget of its own (an enclosing one, as expand_macros opens, holds). A
        # template whose top level runs from its plan scans no text up front (the plan's loops
        # check the clock): its clock starts at the first check, as a short text's does
        token = enter_budget(time_limit, 0 if self._top is not None else len(self.source))
        try:
            if len(self.source) >= _BULK_CHARS:
                with bulk_allocation():  # see _BULK_CHARS
                    return self._expand(context, seed, registry, dynamic, trace, shortcuts)
            return self._expand(context, seed, registry, dynamic, trace, shortcuts)
        finally:
            leave_budget(token)

    def _expand(
        self,
        context: MacroContext | Mapping[str, Any] | None,
        seed: int | None,
        registry: MacroRegistry | None,
        dynamic: Mapping[str, str | Callable[..., Any] | MacroDef] | None,
        trace: bool,
        shortcuts: Shortcuts,
    ) -> MacroResult:
        """The body of :meth:`expand`."""
        ctx = context if isinstance(context, MacroContext) else MacroContext.from_dict(context)
        top = self._top
        if (
            top is not None
            and registry is None
            and not dynamic
            and not trace
            and shortcuts.reuse_parse
            and shortcuts.plans
            and top[0]._version == top[1]
        ):
            return self._expand_planned(ctx, seed, top[0], top[2])
        reads: list[tuple[str, str]] | None = [] if trace else None
        local, glob = _stores(ctx, reads)
        text, omap = self.text, self._omap
        if self._static is not None and shortcuts.reuse_parse:
            return _make_result(
                self._static,
                {"local": local.snapshot(), "global": glob.snapshot()},
                _remap(list(self._diagnostics), omap),
                (),
            )
        if not text:
            return MacroResult("", {"local": local.snapshot(), "global": glob.snapshot()}, (), ())
        state = self._state(ctx, seed, registry, dynamic, shortcuts, local, glob, reads)
        try:
            out = self._run_top(state, registry is None, trace)
        except TemplateError as exc:
            _locate(exc, text, omap)
            raise
        if trace and state.segments:
            out, segments = _traced_segments(out, state, omap)
            return _finish(out, local, glob, state, omap, segments)
        return _finish(post_process(out), local, glob, state, omap)

    def _state(
        self,
        ctx: MacroContext,
        seed: int | None,
        registry: MacroRegistry | None,
        dynamic: Mapping[str, str | Callable[..., Any] | MacroDef] | None,
        shortcuts: Shortcuts,
        local: VariableStore,
        glob: VariableStore,
        reads: list[tuple[str, str]] | None,
    ) -> RenderState:
        """A render's state: the template's caches when parses are reused, a traced render's logs."""
        effective_seed = seed if seed is not None else (ctx.seed if ctx.seed is not None else 0)
        reuse_parse = shortcuts.reuse_parse
        inputs = RenderInputs(
            source=self.source,
            content=self.text,
            ctx=ctx,
            registry=registry if registry is not None else MacroRegistry.default_shared(),
            dynamic=dynamic_table(dynamic),
            rng_seed=f"tavernbox-macros:{effective_seed}",
            shortcuts=shortcuts,
            max_output=MAX_OUTPUT_CHARS,
        )
        state = RenderState(
            local=local,
            glob=glob,
            inputs=inputs,
            parse_cache=self._parse_cache if reuse_parse else None,
            levels=self._levels if reuse_parse else {},
        )
        state.diagnostics.extend(self._diagnostics)
        if reads is not None:
            state.segments = []
            state.reads = reads
        return state

    def _run_top(self, state: RenderState, shared_registry: bool, trace: bool) -> str:
        """The top level evaluated, or run from its plan once it has one (what ``evaluate`` would
        run; traced: the plan's marking twin). With the shared built-in registry, the plan is
        kept for :meth:`_expand_planned`."""
        items = self._items
        shortcuts = state.inputs.shortcuts
        plan = None
        if items is not None and shortcuts.reuse_parse and shortcuts.plans and not state.inputs.dynamic:
            plan = state.known_plan(items, 0)
        if plan is None or items is None:
            return state.evaluate(0, len(self.source), 0, items)
        if shared_registry:  # later renders go straight to it
            self._top = (state.inputs.registry, state.inputs.registry._version, plan)
        return run_traced(plan, state, items) if trace else plan.run(state, 0)

    def _expand_planned(self, ctx: MacroContext, seed: int | None, registry: MacroRegistry, plan: Any) -> MacroResult:
        """:meth:`expand` when the top level runs from its plan with the built-in registry, no
        dynamic macros and no trace (a compiled template from its third render on): the same
        steps, without the set-up the general path needs for everything else.

        Must equal :meth:`expand` with plans switched off (text, variables, diagnostics, draws):
        ``tests/test_macros_fastpath.py::test_the_fast_path_is_taken_and_gives_the_general_paths_results``.
        """
        local = VariableStore(ctx.local_variables)  # the store copies
        glob = VariableStore(ctx.global_variables)
        effective_seed = seed if seed is not None else (ctx.seed if ctx.seed is not None else 0)
        last = _last_seed  # renders mostly repeat a seed: its text is kept
        if effective_seed.__class__ is int and last[0] == effective_seed:
            rng_seed = last[1]
        else:
            rng_seed = f"tavernbox-macros:{effective_seed}"
            if effective_seed.__class__ is int:
                _remember_seed(effective_seed, rng_seed)
        # renders mostly repeat the context and seed: the last inputs (an immutable value) are
        # kept while they are the same objects
        inputs = self._inputs
        if inputs is None or inputs.ctx is not ctx or inputs.rng_seed is not rng_seed or inputs.registry is not registry:
            inputs = self._inputs = _planned_inputs(self.source, self.text, ctx, registry, rng_seed)
        state = _new_state(inputs, local, glob, list(self._diagnostics), self._parse_cache, self._levels)
        omap = self._omap
        try:
            raw = plan.run(state, 0)
        except TemplateError as exc:
            _locate(exc, self.text, omap)
            raise
        # a kept level output (:meth:`.plan.LevelPlan._memoised`) is the very same string as last
        # time: its post-processing (a pure function of the text) is too
        post = self._post
        if post[0] is raw:
            out = post[1]
        else:
            out = post_process(raw)
            self._post = (raw, out)
        return _finish(out, local, glob, state, omap)


def _stores(ctx: MacroContext, reads: list[tuple[str, str]] | None) -> tuple[VariableStore, VariableStore]:
    """The render's variable stores, copied from the context (logging each read into ``reads``
    for a traced render)."""
    if reads is not None:
        return TracingStore(ctx.local_variables, "local", reads), TracingStore(ctx.global_variables, "global", reads)
    return VariableStore(ctx.local_variables), VariableStore(ctx.global_variables)


def _traced_segments(out: str, state: RenderState, omap: _OffsetMap) -> tuple[str, tuple[MacroSegment, ...]]:
    """A traced render's post-processed text and its segments, moved through the post-processing
    and mapped back to the caller's text."""
    assert state.segments is not None
    ranges = [[a, b] for a, b, _n, _e, _r in state.segments]
    out = post_process_traced(out, ranges)
    segments = tuple(
        MacroSegment(
            r[0],
            r[1],
            node.name or f"{node.var.scope}{node.var.name}",
            omap.back(node.start),
            omap.back(src_end),
            node_reads,
            segment_kind(node.name, node.var is not None and node.var.op is None, node_reads),
        )
        for r, (_a, _b, node, src_end, node_reads) in zip(ranges, state.segments, strict=True)
        if r[1] > r[0]
    )
    return out, segments


#: ``(seed, its rng_seed text)`` of the last cached render with an integer seed
_last_seed: tuple[Any, str] = (None, "")


def _remember_seed(seed: int, text: str) -> None:
    global _last_seed
    _last_seed = (seed, text)


def _finish(
    out: str,
    local: VariableStore,
    glob: VariableStore,
    outputs: RenderOutputs,
    omap: _OffsetMap,
    segments: tuple[MacroSegment, ...] = (),
) -> MacroResult:
    """The result of a render from its outputs (a :class:`RenderState`): variables after it,
    diagnostics and draws mapped back to the caller's text (offsets moved by the pre-processors)."""
    draws = outputs.draws
    return _make_result(
        out,
        {"local": local.snapshot(), "global": glob.snapshot()},
        _remap(capped_diagnostics(outputs.diagnostics, outputs.omitted), omap)
        if outputs.diagnostics or outputs.omitted
        else (),
        (
            tuple(Draw(d.kind, omap.back(d.offset), d.value, d.macro, d.rolls) for d in draws)
            if omap.pre
            else tuple(draws)
        )
        if draws
        else (),
        segments,
    )


def compile_macros(text: str) -> CompiledMacros:
    """Parse ``text`` once for repeated expansion (raises ``MACRO_INPUT_LIMIT`` over 2 MiB)."""
    return CompiledMacros(text)


def expand_macros(
    text: str,
    context: MacroContext | Mapping[str, Any] | None = None,
    *,
    seed: int | None = None,
    registry: MacroRegistry | None = None,
    dynamic: Mapping[str, str | Callable[..., Any] | MacroDef] | None = None,
    trace: bool = False,
    time_limit: float | None = MAX_CPU_SECONDS,
    shortcuts: Shortcuts = DEFAULT,
) -> MacroResult:
    """Expand SillyTavern macros in ``text``.

    ``context`` is a :class:`MacroContext` or its JSON dict. ``seed`` (else the context's seed,
    else 0) seeds ``{{random}}``/``{{roll}}``. ``registry`` replaces the built-in catalogue
    (``MacroRegistry.default()`` plus the host's macros); ``dynamic`` adds per-call macros that
    shadow registered ones (a string, a zero-argument callable, or a :class:`MacroDef`).
    ``trace=True`` also reports which top-level macro or variable read produced each range of
    the text (``MacroResult.segments``); the text is the same either way.

    Raises ``TemplateError`` with ``MACRO_INPUT_LIMIT`` (text over 2 MiB),
    ``MACRO_OUTPUT_LIMIT`` (the output would pass 8 MiB) or ``MACRO_TIME_LIMIT`` (parse and
    render together used more than ``time_limit`` seconds of this thread's CPU, 1 s by default;
    ``None``: no limit). Every other problem is a diagnostic.

    ``shortcuts`` names the performance shortcuts the render may take (all by default; each
    gives exactly what its plain path gives): :data:`PLAIN` runs the reference path.

    The compiled templates of the 512 most recent texts (up to 64 KB each) are kept, so a host
    that expands the same card fields and prompts over and over parses each once.
    """
    if not isinstance(text, str):
        raise TemplateError("the macro text must be a string", code="INPUT_INVALID")
    ctx = context if isinstance(context, MacroContext) else MacroContext.from_dict(context)
    token = enter_budget(time_limit, len(text))  # one budget for the parse and the render
    try:
        if shortcuts.reuse_parse and shortcuts.regions and len(text) <= _CACHED_TEXT_CHARS:
            template = _compiled(text)
        else:
            template = CompiledMacros(text, time_limit=None, shortcuts=shortcuts)
        return template.expand(
            ctx, seed=seed, registry=registry, dynamic=dynamic, trace=trace, time_limit=None, shortcuts=shortcuts
        )
    finally:
        leave_budget(token)


#: Texts up to this many characters keep their compiled template between calls.
_CACHED_TEXT_CHARS = 64 * 1024


@lru_cache(maxsize=512)
def _compiled(text: str) -> CompiledMacros:
    """The compiled template of a text seen recently.

    A prompt assembly expands the same few hundred texts (card fields, preset prompts, world
    info entries) again and again; a template is immutable apart from its parse caches, whose
    contents depend on the text only, so it can be shared by every call and thread. Its parse
    runs under the caller's CPU budget (:func:`expand_macros` opens one).
    """
    return CompiledMacros(text, time_limit=None)
