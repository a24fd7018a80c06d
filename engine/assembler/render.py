"""Text rendering for text blocks: source macros, the owning source's renderer, literal macros.

Order, per text block (the assembler never parses macros itself; it asks the owning source's
renderer):

1. **Source macros** (``{{description}}``, ``{{persona}}``...): names a source registered for its
   own text blocks. A usable target's *raw* text is inlined (and wrapped in invisible markers so
   its range survives rendering); an unusable one (a listed module owns it) expands to nothing.
2. **Literal macros** are swapped for opaque tokens, so the renderer never evaluates their values.
3. **The renderer** (a :class:`Renderer`, chosen by the source): :data:`TAVERN` renders with the macro
   engine (:mod:`tavernbox.macros`) and trims the result; :data:`IDENTITY` keeps third-party text
   exactly as written; a host may give its sources a renderer of its own.
4. Markers are removed (recording each inlined range), then literal values are put back, every
   newline in a value followed by as many spaces as there were characters before the token on its
   line (so YAML stays indented).

The markers and tokens are Unicode noncharacters U+FDD0..U+FDEF, which the standard reserves for
exactly this kind of process-internal use (any already in a source's text are dropped). If a renderer moves markers into a shape that no longer
nests (a macro argument swallowing one), the inlined ranges are dropped and the whole text is
attributed to the block: provenance is never invented.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from ..errors import Diagnostic
from ..macros import CompiledMacros, MacroContext, MacroNode, MacroResult, Plain, compile_macros
from .text_memo import TextMemo

__all__ = [
    "COMPILED_TEMPLATES",
    "IDENTITY",
    "TAVERN",
    "RenderOutput",
    "RenderState",
    "Renderer",
    "Rendered",
    "compose_text",
    "find_source_macros",
]

M_OPEN, M_CLOSE, L_OPEN = "\ufdd0", "\ufdd1", "\ufdd2"
_HEX0 = 0xFDE0
_TOKEN = re.compile("[\ufdd0\ufdd2][\ufde0-\ufdef]+|\ufdd1")
_RESERVED = re.compile("[\ufdd0-\ufdef]")
#: ``{{ name }}`` with a plain name (no arguments): the shape of a source macro
SOURCE_MACRO = re.compile(r"\{\{\s*([^{}:\s]+)\s*\}\}")
#: ``{{ name }}`` where the name may hold ``::`` (``format_message_variable::stat_data``): a literal macro
LITERAL_MACRO = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


def _no_reserved_chars(text: str) -> bool:
    return not _RESERVED.search(text)


_NO_RESERVED_LONG = TextMemo(_no_reserved_chars)


def _no_reserved(text: str) -> bool:
    """Whether ``text`` holds none of the reserved noncharacters (asked of every rendered text
    each request; a long non-ASCII one, a card description, is searched once per text object)."""
    if text.isascii():  # constant time: CPython keeps the flag
        return True
    return _NO_RESERVED_LONG(text) if len(text) > 1024 else not _RESERVED.search(text)


def _hex(n: int) -> str:
    return "".join(chr(_HEX0 + int(d, 16)) for d in f"{n:x}")


def _unhex(s: str) -> int:
    return int("".join(f"{ord(c) - _HEX0:x}" for c in s), 16)


@dataclass(slots=True)
class RenderOutput:
    """What a renderer returns: the text, the random draws it made and its diagnostics."""

    text: str
    draws: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: the content hash of the input text when the renderer already knows it (recorded per render)
    input_hash: str | None = None
    #: ``(start, end, info)`` ranges of ``text`` that a macro or a variable read produced
    #: (``info["kind"]`` is ``"macro_output"`` or ``"variable_read"``); the rest is the input's own
    segments: tuple[tuple[int, int, dict[str, Any]], ...] = ()


class FrozenInfo(dict):  # type: ignore[type-arg]
    """A span description shared between requests (interned, cached): a dict that refuses changes.

    It serialises and compares as the plain dict it is; a caller that tries to change one it got
    back (in a record, through the span caches) gets a ``TypeError`` instead of silently changing
    the provenance of later requests. Copies (``dict(info)``, ``copy``, ``deepcopy``, pickle)
    are plain dicts.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("span provenance info is shared and read-only; copy it with dict(info)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        import copy

        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


def macro_segment_info(segment: Any) -> dict[str, Any]:
    """The provenance fields of one macro engine segment (:class:`tavernbox.macros.MacroSegment`).

    Interned: every ``{{char}}`` of every prompt shares one dict, so the spans built from them
    are merged and described once per block and request. Never mutate the result.
    """
    return _segment_info(segment.kind, segment.macro, segment.reads)


@lru_cache(maxsize=4096)
def _segment_info(kind: str, macro: str, reads: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    if kind == "variable" and reads:
        scope, name = reads[0]
        return FrozenInfo(kind="variable_read", macro=macro, scope=scope, name=name)
    if reads:
        listed = tuple(FrozenInfo(scope=sc, name=n) for sc, n in dict.fromkeys(reads))
        return FrozenInfo(kind="macro_output", macro=macro, reads=listed)
    return FrozenInfo(kind="macro_output", macro=macro)


class Renderer(Protocol):
    """A source's text renderer. ``trim`` says whether the assembler trims its output."""

    name: str
    trim: bool

    def render(self, text: str, state: RenderState) -> RenderOutput:
        """Render ``text`` for one block."""
        ...


@dataclass(slots=True)
class RenderState:
    """Per-request rendering state: macro context, request-local variables, one-off notices."""

    macro_context: dict[str, Any] = field(default_factory=dict)
    local_variables: dict[str, Any] = field(default_factory=dict)
    #: global variables as the request's renders leave them (``{{setglobalvar}}`` in one block is
    #: read by ``{{getglobalvar}}`` in a later one, as in SillyTavern); ``None`` until one changes
    global_variables: dict[str, Any] | None = None
    notices: list[Diagnostic] = field(default_factory=list)
    _noted: set[str] = field(default_factory=set)
    #: the macro engine's context object, built once per request (the chat can be long)
    engine_context: Any = None
    _static_key: str | None = None
    #: ``(the local-variables dict, its token)``: :meth:`locals_token`'s answer for that very dict
    _locals_token: tuple[Any, bytes | None] | None = None

    def locals_token(self) -> bytes | None:
        """A digest naming the request-local variables as they are now (``None``: values other
        than strings, numbers, booleans and null, which are not keyed).

        Computed when the variables are a new dict (a render changed them), else remembered: a
        render served from :attr:`_Template.pure_renders` hands over the token of the variables
        it leaves, so a chain of ``{{setvar}}`` prompts costs no digest at all.
        """
        local = self.local_variables
        kept = self._locals_token
        if kept is not None and kept[0] is local:
            return kept[1]
        token = _variables_token(local)
        self._locals_token = (local, token)
        return token

    def pure_key(self) -> tuple[str, bytes] | None:
        """The static context and local variables as they are now, as a pure template's renders
        are kept (``None``: the variables cannot be keyed)."""
        token = self.locals_token()
        return None if token is None else (self.static_key(), token)

    def static_key(self) -> str:
        """A digest of everything in the macro context but the chat (computed once per request):
        templates of static macros render the same text under the same key."""
        if self._static_key is None:
            from .identity import content_hash

            self._static_key = content_hash(_jsonable({k: v for k, v in self.macro_context.items() if k != "chat"}))
        return self._static_key

    def notice_once(self, code: str, message: str) -> None:
        """Add a request-level diagnostic the first time it happens."""
        if code not in self._noted:
            self._noted.add(code)
            self.notices.append(Diagnostic(code, message, severity="info"))


def _variables_token(variables: dict[str, Any]) -> bytes | None:
    """A digest of flat variables (names and values, in order, types told apart by ``repr``)."""
    import hashlib

    for value in variables.values():
        if value is not None and value.__class__ not in (str, int, float, bool):
            return None
    return hashlib.blake2b(repr(list(variables.items())).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Identity:
    """Keeps the text exactly as written (third-party sources without a renderer)."""

    name = "identity"
    trim = False

    def render(self, text: str, state: RenderState) -> RenderOutput:
        return RenderOutput(text)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


class _CompiledCache:
    """Parsed macro templates by text, bounded (least recently used out first).

    A preset's prompts are the same text request after request (and often block after block), so
    parsing each distinct text once is most of the renderer's cost saved. The bound is on total
    characters as well as entries, so a few huge texts cannot pin unbounded memory; a text over
    :attr:`max_text` is compiled every time rather than cached. Keyed by the compile function too,
    so a reloaded macro engine never sees another engine's templates.
    """

    def __init__(self, max_entries: int = 4096, max_chars: int = 32 * 1024 * 1024, max_text: int = 1024 * 1024) -> None:
        self.max_entries, self.max_chars, self.max_text = max_entries, max_chars, max_text
        self._items: OrderedDict[tuple[Any, str], Any] = OrderedDict()
        self._sizes: dict[tuple[Any, str], int] = {}  # characters held per entry (text + remembered renders)
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, compile_fn: Callable[[str], Any], text: str, build: Callable[[Any], Any] | None = None) -> Any:
        """The compiled form of ``text``, passed through ``build`` when given (compiling errors
        propagate and are never cached)."""
        key = (compile_fn, text)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        compiled = compile_fn(text) if build is None else build(compile_fn(text))
        if len(text) > self.max_text:
            return compiled
        with self._lock:
            if key not in self._items:
                self._items[key] = compiled
                self._sizes[key] = len(text)
                self._chars += len(text)
                self._evict()
        return compiled

    def charge(self, compile_fn: Callable[[str], Any], text: str, delta: int) -> None:
        """Count ``delta`` more (or fewer) characters held by the entry of ``text`` (its remembered
        renders), evicting the least recently used entries when over budget."""
        key = (compile_fn, text)
        with self._lock:
            if key in self._sizes:
                self._sizes[key] += delta
                self._chars += delta
                self._evict()

    def _evict(self) -> None:
        while self._items and (len(self._items) > self.max_entries or self._chars > self.max_chars):
            old, _ = self._items.popitem(last=False)
            self._chars -= self._sizes.pop(old)

    def clear(self) -> None:
        """Forget every compiled template (tests; a host that changes macro registries)."""
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._items)


#: the process-wide compiled-template cache of :data:`TAVERN`
COMPILED_TEMPLATES = _CompiledCache()

#: Macros whose value is a function of the request's names and card alone (``ctx.user``,
#: ``ctx.char``, ``ctx.persona`` and card fields with the names substituted): they read no chat,
#: no variable, no clock and draw nothing. A template made only of text and these (bare, with no
#: arguments, flags or variable syntax) renders the same for the same static context.
STATIC_MACROS = frozenset({
    "user", "char", "persona", "description", "personality", "scenario",
    "charDescription", "charPersonality", "charScenario",
})


#: Macros whose value and effects are a function of the static context (:data:`STATIC_MACROS`)
#: and the request-local variables alone: the local-variable family, comments, ``trim``, ``noop``,
#: ``newline``. None reads the chat, a global variable, the clock or the random stream.
PURE_MACROS = frozenset({
    *(name.lower() for name in STATIC_MACROS),
    "setvar", "addvar", "incvar", "decvar", "getvar", "hasvar", "varexists", "deletevar", "flushvar",
    "//", "comment", "trim", "noop", "newline",
})

#: where a macro can start (``{{``) and the name that follows it, as written
_MACRO_START = re.compile(r"\{\{\s*(//|[A-Za-z_][\w-]*)?")


def _pure_text(text: str) -> bool:
    """Whether every ``{{`` of ``text`` (nested ones too) opens a macro of :data:`PURE_MACROS`.

    Read from the text itself, not the parse, so it holds whatever shape the parser gives the
    macros: a flag, a variable shorthand (``{{.x}}``), a closer or any name outside the set makes
    the answer False, which only means "evaluate every time".
    """
    for match in _MACRO_START.finditer(text):
        name = match.group(1)
        if name is None or name.lower() not in PURE_MACROS:
            return False
    return True


class KeptRender(NamedTuple):
    """A render a :class:`_Template` keeps for one static context."""

    text: str
    segments: tuple[tuple[int, int, dict[str, Any]], ...]


class PureRender(NamedTuple):
    """A render of a :data:`PURE_MACROS` template kept for one static context and local variables."""

    text: str
    segments: tuple[tuple[int, int, dict[str, Any]], ...]
    #: the local variables it left (shared: copied before they are handed out), ``None`` when unchanged
    after: dict[str, Any] | None
    #: their :meth:`RenderState.locals_token`
    after_token: bytes | None

    def size(self) -> int:
        """Characters held: its text and the variables it keeps, counted by their text."""
        kept = self.after
        return len(self.text) + (sum(len(k) + len(str(v)) for k, v in kept.items()) if kept else 0)


class _Template:
    """A compiled template plus, when it reads only :data:`STATIC_MACROS`, its rendered text per
    static context (the few last ones), so an unchanged prompt is not evaluated every request.

    A template of :data:`PURE_MACROS` (``{{setvar}}`` and ``{{getvar}}`` prompts, which presets
    chain by the dozen) keeps its renders per static context *and* local variables before it:
    the text, its segments, and the variables it leaves.
    """

    __slots__ = ("_input_hash", "compiled", "pure", "pure_renders", "renders", "static")
    MAX_RENDERS = 4

    def __init__(self, compiled: CompiledMacros, text: str = "") -> None:
        self.compiled = compiled
        self.static = _reads_static_only(compiled)
        #: static context key -> its render
        self.renders: OrderedDict[str, KeptRender] = OrderedDict()
        self.pure = not self.static and bool(text) and _pure_text(text)
        #: (static key, variables token) -> its render
        self.pure_renders: OrderedDict[tuple[str, bytes], PureRender] = OrderedDict()
        self._input_hash: str | None = None

    def input_hash(self, text: str) -> str:
        """``content_hash(text)`` of the template's own text (computed once)."""
        if self._input_hash is None:
            from .identity import content_hash

            self._input_hash = content_hash(text)
        return self._input_hash

    def remember(self, static_key: str, text: str, segments: tuple[tuple[int, int, dict[str, Any]], ...]) -> int:
        """Keep ``text`` as the render under ``static_key``; returns the change in characters held."""
        seen = self.renders.get(static_key)
        delta = len(text) - (len(seen.text) if seen is not None else 0)
        self.renders[static_key] = KeptRender(text, segments)
        while len(self.renders) > self.MAX_RENDERS:
            delta -= len(self.renders.popitem(last=False)[1].text)
        return delta

    def remember_pure(self, key: tuple[str, bytes], render: PureRender) -> int:
        """Keep a pure render under ``key``; returns the change in characters held."""
        seen = self.pure_renders.get(key)
        delta = render.size() - (seen.size() if seen is not None else 0)
        self.pure_renders[key] = render
        while len(self.pure_renders) > self.MAX_RENDERS:
            delta -= self.pure_renders.popitem(last=False)[1].size()
        return delta


def _reads_static_only(compiled: CompiledMacros) -> bool:
    """Whether every item of a compiled template is plain text or a bare static macro (an
    unclean parse answers False, which only means "evaluate")."""
    items = compiled.items
    if items is None:
        return False
    for item in items:
        if type(item) is Plain:
            continue
        if (type(item) is not MacroNode or not item.complete or item.flags or item.args or item.var is not None
                or item.name not in STATIC_MACROS):
            return False
    return True


class _Tavern:
    """SillyTavern macros through the macro engine (:mod:`tavernbox.macros`).

    Each distinct text is parsed once (:data:`COMPILED_TEMPLATES`) and evaluated per block, traced
    (which macro produced which range, for span provenance); a template of static or pure macros
    hands out its kept render when its inputs are the same (:class:`_Template`). A host that
    wants other macro semantics gives its sources another :class:`Renderer`.
    """

    name = "tavern"
    trim = True

    def _context(self, state: RenderState) -> MacroContext:
        """The engine context with the request-local variables as they are now.

        Building it from the dict reads the whole chat, so it is built once per request; a block
        that changes the variables gets a copy with the new ones, every other block reuses the
        same object.
        """
        base = state.engine_context
        if base is None:
            data = dict(state.macro_context)
            variables = dict(data.get("variables") or {})
            variables["local"] = dict(state.local_variables)
            if state.global_variables is not None:
                variables["global"] = dict(state.global_variables)
            data["variables"] = variables
            base = state.engine_context = MacroContext.from_dict(data)
            return base
        if base.local_variables != state.local_variables:
            base = state.engine_context = dataclasses.replace(base, local_variables=dict(state.local_variables))
        if state.global_variables is not None and base.global_variables != state.global_variables:
            base = state.engine_context = dataclasses.replace(base, global_variables=dict(state.global_variables))
        return base

    def render(self, text: str, state: RenderState) -> RenderOutput:
        if "{" not in text and "<" not in text and "\\" not in text:
            return RenderOutput(text)  # nothing a macro could change: skip the engine
        template = COMPILED_TEMPLATES.get(compile_macros, text, lambda compiled: _Template(compiled, text))
        pure_key = state.pure_key() if template.pure else None
        kept = self._kept(template, text, state, pure_key)
        if kept is not None:
            return kept
        ctx = self._context(state)
        result = template.compiled.expand(ctx, trace=True)
        local_changed, globals_changed = self._take_variables(result, ctx, state)
        out = RenderOutput(
            result.text,
            [_jsonable(d) for d in result.draws],
            list(result.diagnostics),
            template.input_hash(text),
            tuple((s.start, s.end, macro_segment_info(s)) for s in result.segments),
        )
        if not out.diagnostics and not out.draws and not globals_changed:
            self._keep(template, text, state, out, pure_key, local_changed)
        return out

    @staticmethod
    def _kept(template: _Template, text: str, state: RenderState, pure_key: tuple[str, bytes] | None) -> RenderOutput | None:
        """The render a template kept for this static context (and local variables, for a pure
        template), its variables made the request's; ``None``: evaluate."""
        if template.static:
            seen = template.renders.get(state.static_key())
            if seen is not None:
                return RenderOutput(seen.text, input_hash=template.input_hash(text), segments=seen.segments)
        elif pure_key is not None:
            hit = template.pure_renders.get(pure_key)
            if hit is not None:
                if hit.after is not None:  # the variables it left (a copy: the kept dict is shared)
                    state.local_variables = dict(hit.after)
                    state._locals_token = (state.local_variables, hit.after_token)
                return RenderOutput(hit.text, input_hash=template.input_hash(text), segments=hit.segments)
        return None

    @staticmethod
    def _keep(
        template: _Template, text: str, state: RenderState, out: RenderOutput, pure_key: tuple[str, bytes] | None,
        local_changed: bool,
    ) -> None:
        """Keep a render that warned nothing, drew nothing and left the global variables alone: a
        static template's when it left the local ones alone too, a pure template's with the local
        variables it left."""
        if template.static:
            if not local_changed:
                COMPILED_TEMPLATES.charge(compile_macros, text, template.remember(state.static_key(), out.text, out.segments))
        elif pure_key is not None:
            after = dict(state.local_variables) if local_changed else None
            after_token = state.locals_token() if local_changed else None
            if not local_changed or after_token is not None:
                kept = PureRender(out.text, out.segments, after, after_token)
                COMPILED_TEMPLATES.charge(compile_macros, text, template.remember_pure(pure_key, kept))

    @staticmethod
    def _take_variables(result: MacroResult, ctx: MacroContext, state: RenderState) -> tuple[bool, bool]:
        """The variables a render left become the request's; whether the local and the global
        ones changed."""
        local = result.variables["local"]
        local_changed = local != state.local_variables
        if local_changed:
            state.local_variables = dict(local)
        glob = result.variables["global"]
        before = state.global_variables if state.global_variables is not None else ctx.global_variables
        globals_changed = glob != (before if before is not None else {})
        if globals_changed:
            state.global_variables = dict(glob)
        return local_changed, globals_changed


IDENTITY: Renderer = _Identity()
TAVERN: Renderer = _Tavern()


def find_source_macros(text: str, table: dict[str, Any]) -> list[tuple[int, int, str]]:
    """``(start, end, name)`` of each ``{{name}}`` in ``text`` whose lower-cased name is in ``table``."""
    if not table or "{{" not in text:
        return []
    return [(m.start(), m.end(), m.group(1).lower()) for m in SOURCE_MACRO.finditer(text) if m.group(1).lower() in table]


@dataclass(slots=True)
class Rendered:
    """A rendered text block: its text, its provenance ranges and what rendering produced.

    Not frozen: it lives only between :func:`compose_text` and the node built from it, and a
    frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost more than the
    rest of the common path.

    ``spans`` are ``(start, end, info)`` character ranges partitioning ``text``; ``info`` is
    ``{}`` for the block's own text, else a macro or literal-macro description.
    """

    text: str
    spans: tuple[tuple[int, int, dict[str, Any]], ...]
    draws: tuple[Any, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()


def compose_text(
    text: str,
    macros: list[tuple[int, int, str, str | None, dict[str, Any]]],
    literals: tuple[tuple[str, str], ...],
    render: Callable[[str], RenderOutput],
    trim: bool,
) -> Rendered:
    """Inline source macros, render, and restore literal macros, tracking provenance ranges.

    ``macros`` are ``(start, end, name, inlined_text_or_None, info)`` in text order (``None``
    expands to nothing). ``render`` is the owning source's renderer bound to the request state.
    """
    if not macros and not literals and _no_reserved(text):
        # the common case (a prompt with no source or literal macro): nothing to mark or restore
        out = render(text)
        rendered = out.text
        segments = out.segments
        if segments:
            # a remembered static render hands back the same text and ranges every request:
            # their trimmed partition is kept beside them (checked by identity, never by id alone)
            seen = _PARTITIONS.get(id(segments))
            if seen is not None and seen[0] is segments and seen[1] is rendered and seen[2] is trim:
                return Rendered(seen[3], seen[4], tuple(out.draws), tuple(out.diagnostics))
        if _no_reserved(rendered):
            final = rendered.strip() if trim else rendered
            if segments:
                spans = _partition(len(final), _shifted(segments, rendered, final, trim))
                if len(_PARTITIONS) >= _PARTITIONS_MAX:
                    _PARTITIONS.clear()
                _PARTITIONS[id(segments)] = (segments, rendered, trim, final, spans)
            else:
                spans = ((0, len(final), {}),) if final else ()
            return Rendered(final, spans, tuple(out.draws), tuple(out.diagnostics))
        return _untangle(rendered, [], [], out, trim)
    if not _no_reserved(text):
        # noncharacters carry no meaning in text; dropping them keeps the markers unambiguous
        macros = _shift_macros(text, macros)
        text = _RESERVED.sub("", text)
    pieces: list[str] = []
    pos = 0
    infos: list[dict[str, Any]] = []
    for start, end, _name, inlined, info in macros:
        pieces.append(text[pos:start])
        if inlined is not None:
            pieces.append(M_OPEN + _hex(len(infos)) + _RESERVED.sub("", inlined) + M_CLOSE)
            infos.append(info)
        pos = end
    pieces.append(text[pos:])
    composed = "".join(pieces)
    lit_values: list[tuple[str, str]] = []
    if literals:
        names = {n.lower(): v for n, v in literals}

        def swap(m: re.Match[str]) -> str:
            value = names.get(m.group(1).lower())
            if value is None:
                return m.group(0)
            lit_values.append((m.group(1), value))
            return L_OPEN + _hex(len(lit_values) - 1)

        composed = LITERAL_MACRO.sub(swap, composed)
    out = render(composed)
    rendered = out.text
    if not infos and not lit_values and _no_reserved(rendered):
        # no marker to remove: the renderer's text is the block's own text (and its macros')
        final = rendered.strip() if trim else rendered
        segs = _shifted(out.segments, rendered, final, trim) if out.segments else []
        return Rendered(final, _partition(len(final), segs), tuple(out.draws), tuple(out.diagnostics))
    return _untangle(rendered, infos, lit_values, out, trim)


#: ``id(segments) -> (segments, rendered, trim, final text, spans)``: the partitions of renders
#: that come back identical (the static-render cache's); each entry holds its segments alive, so
#: the id cannot be reused while the entry exists. Emptied when full.
_PARTITIONS: dict[int, tuple[Any, str, bool, str, tuple[tuple[int, int, dict[str, Any]], ...]]] = {}
_PARTITIONS_MAX = 8192


def _shifted(
    segments: tuple[tuple[int, int, dict[str, Any]], ...], rendered: str, final: str, trim: bool
) -> Sequence[tuple[int, int, dict[str, Any]]]:
    """Macro segments of ``rendered`` moved onto ``final`` (``rendered``, trimmed when ``trim``)."""
    n = len(final)
    lead = 0 if n == len(rendered) or not trim else len(rendered) - len(rendered.lstrip())
    if lead == 0 and segments[-1][1] <= n:
        return segments  # nothing trimmed before or inside them: the ranges stand as they are
    out = []
    for s, e, info in segments:
        s, e = max(0, s - lead), min(n, e - lead)
        if e > s:
            out.append((s, e, info))
    return out


def _untangle(
    rendered: str, infos: list[dict[str, Any]], lit_values: list[tuple[str, str]], out: RenderOutput, trim: bool
) -> Rendered:
    """Remove the markers from a render (recording the inlined ranges) and restore literal values."""
    # pass 1: remove macro markers, recording their ranges (literal tokens stay, they are not whitespace)
    segs: list[tuple[int, int, dict[str, Any]]] = []
    buf: list[str] = []
    length = 0
    stack: list[tuple[int, int]] = []
    balanced = True
    last = 0
    removed: list[tuple[int, int]] = []  # marker tokens taken out, in ``rendered``'s coordinates
    for m in _TOKEN.finditer(rendered):
        chunk = rendered[last : m.start()]
        buf.append(chunk)
        length += len(chunk)
        last = m.end()
        tok = m.group()
        if tok[0] != L_OPEN:
            removed.append((m.start(), m.end()))
        if tok[0] == M_OPEN:
            stack.append((_unhex(tok[1:]), length))
        elif tok == M_CLOSE:
            if not stack:
                balanced = False
                continue
            idx, start = stack.pop()
            if idx < len(infos):
                segs.append((start, length, infos[idx]))
            else:
                balanced = False
        else:
            buf.append(tok)
            length += len(tok)
    buf.append(rendered[last:])
    if stack:
        balanced = False
    if not balanced:
        segs = []
    if out.segments:
        segs += _engine_segments(out.segments, removed, segs)
    stripped = "".join(buf)
    if trim:
        lead = len(stripped) - len(stripped.lstrip())
        stripped = stripped.strip()
        segs = [(max(0, s - lead), min(len(stripped), e - lead), i) for s, e, i in segs]
        segs = [(s, e, i) for s, e, i in segs if e > s]
    # pass 2: restore literal values with their line indentation, shifting ranges
    if lit_values:
        final: list[str] = []
        flen = 0
        shifts: list[tuple[int, int]] = []  # (position in stripped, delta) after each token
        lit_segs: list[tuple[int, int, dict[str, Any]]] = []
        last = 0
        line_start_out = 0
        for m in re.finditer(L_OPEN + "[\ufde0-\ufdef]+", stripped):
            chunk = stripped[last : m.start()]
            final.append(chunk)
            nl = chunk.rfind("\n")
            if nl >= 0:
                line_start_out = flen + nl + 1
            flen += len(chunk)
            name, value = lit_values[_unhex(m.group()[1:])]
            value = value.replace("\n", "\n" + " " * (flen - line_start_out))
            lit_segs.append((flen, flen + len(value), {"kind": "literal_macro", "macro": name}))
            nl = value.rfind("\n")
            if nl >= 0:
                line_start_out = flen + nl + 1
            final.append(value)
            flen += len(value)
            shifts.append((m.end(), len(value) - (m.end() - m.start())))
            last = m.end()
        final.append(stripped[last:])

        def moved(p: int) -> int:
            return p + sum(d for at, d in shifts if at <= p)

        segs = [(moved(s), moved(e), i) for s, e, i in segs] + lit_segs
        stripped = "".join(final)
    return Rendered(stripped, _partition(len(stripped), segs), tuple(out.draws), tuple(out.diagnostics))


def _engine_segments(
    segments: tuple[tuple[int, int, dict[str, Any]], ...],
    removed: list[tuple[int, int]],
    inlined: list[tuple[int, int, dict[str, Any]]],
) -> list[tuple[int, int, dict[str, Any]]]:
    """The renderer's macro segments with the marker tokens taken out.

    A macro inside inlined source-macro text (``{{user}}`` in a ``{{description}}``) belongs to the
    block it was inlined from: its info takes that block's identity fields.
    """
    from ..macros.trace import map_through_deletions

    ranges = [[s, e] for s, e, _ in segments]
    map_through_deletions(ranges, removed)
    out = []
    for (s, e), (_, _, info) in zip(ranges, segments, strict=True):
        if e <= s:
            continue
        around = [seg for seg in inlined if seg[0] <= s and e <= seg[1]]
        if around:
            owner = min(around, key=lambda seg: seg[1] - seg[0])[2]
            info = {**{k: owner[k] for k in _IDENTITY_FIELDS if k in owner}, **info}
        out.append((s, e, info))
    return out


#: the fields that say which block a range came from
_IDENTITY_FIELDS = ("rule_id", "source_id", "block_id", "resource_id", "field")


def _shift_macros(
    text: str, macros: list[tuple[int, int, str, str | None, dict[str, Any]]]
) -> list[tuple[int, int, str, str | None, dict[str, Any]]]:
    """Macro offsets after the reserved noncharacters of ``text`` are removed."""
    removed = [m.start() for m in _RESERVED.finditer(text)]

    def at(p: int) -> int:
        return p - sum(1 for r in removed if r < p)

    return [(at(s), at(e), n, i, info) for s, e, n, i, info in macros]


def _partition(length: int, segs: Sequence[tuple[int, int, dict[str, Any]]]) -> tuple[tuple[int, int, dict[str, Any]], ...]:
    """Cut ``[0, length)`` into ranges, each attributed to the innermost covering segment."""
    if length == 0:
        return ()
    if not segs:
        return ((0, length, {}),)
    # the common case: ranges in order, none inside another (a text's own macros): one pass
    prev = 0
    for s, e, _ in segs:
        if s < prev or e > length:
            break
        prev = e
    else:
        flat: list[tuple[int, int, dict[str, Any]]] = []
        pos = 0
        for s, e, info in segs:
            if s > pos:
                flat.append((pos, s, {}))
            if e > s:
                flat.append((s, e, info))
            pos = e
        if pos < length:
            flat.append((pos, length, {}))
        return tuple(flat)
    cuts = sorted({0, length, *(s for s, _, _ in segs), *(e for _, e, _ in segs)})
    out: list[tuple[int, int, dict[str, Any]]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if b <= a or a >= length:
            continue
        covering = [(e - s, i) for s, e, i in segs if s <= a and b <= e]
        info = min(covering, key=lambda t: t[0])[1] if covering else {}
        if out and out[-1][2] is info and out[-1][1] == a:
            out[-1] = (out[-1][0], b, info)
        else:
            out.append((a, b, info))
    return tuple(out)
