"""Text -> frozen macro nodes, with SillyTavern 1.18's tolerance for malformed macros.

Well-formed macros follow ``grammars/macros.lark``. Malformed ones are where SillyTavern's
behaviour is subtle: its Chevrotain parser *recovers* (it inserts or deletes single tokens,
re-synchronises on the follow sets of the rules being parsed, and skips junk between document
items), and the evaluator then shows the recovered fragments as text. Authors' cards depend on
the result (a ``{{user{{pick::a}}`` stays as written, an unterminated ``{{`` before a valid
macro leaves that macro working), so this module reproduces that recovery exactly:

* :mod:`.lexer` produces SillyTavern's token stream (mode stack, dropped characters);
* :class:`_Parser` is a recursive-descent reading of the same grammar with the same recovery
  rules (single-token insertion/deletion, rule-level re-sync, in-repetition re-sync at document
  level). Its recursion follows brace nesting only, which :data:`MAX_NESTING` caps at 64 before
  parsing starts, so Python's stack is never at risk;
* :func:`document_items` flattens what did not parse completely into text spans, keeping the
  complete macros nested inside it (SillyTavern's walker does the same).

The Lark grammar is used by :func:`validate_macro` as the reference syntax of a well-formed
macro (tests assert that every complete macro this parser builds is accepted by it); the
run-time path never needs Earley or backtracking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from lark import Transformer

from ..errors import Diagnostic
from ..spans import Span
from .lexer import T, Tok, tokenize

__all__ = [
    "MAX_NESTING",
    "ArgNode",
    "MacroNode",
    "Plain",
    "VarNode",
    "document_items",
    "parse_macros",
    "validate_macro",
]

#: Brace nesting deeper than this is left as written (``MACRO_NESTING_LIMIT``).
MAX_NESTING = 64

_FLAGS = (T.FLAG, T.FILTERFLAG)
_ARG_TOKENS = frozenset((T.START, T.IDENT, T.UNKNOWN, T.COLON, T.EQUALS, T.QUOTE))
_ARGC_TOKENS = _ARG_TOKENS | {T.DCOLON}
_VALUE_TOKENS = frozenset((T.START, T.IDENT, T.UNKNOWN))
_OPS = frozenset((T.INC, T.DEC, T.VALOP))
_MACRO_SECOND = frozenset((T.FLAG, T.FILTERFLAG, T.LOCAL, T.GLOBAL, T.DSLASH, T.MIDENT))

# local follow sets of each rule occurrence (what may come next inside the calling rule)
_F_DOC = frozenset((T.EOF,))
_F_MACRO_IN_DOC = frozenset((T.PLAINTEXT, T.OPENBRACE, T.START))
_F_END = frozenset((T.END,))
_F_NONE: frozenset[int] = frozenset()
_F_ARG_IN_ARGS = frozenset((T.DCOLON,))
_F_MACRO_IN_ARG = _ARG_TOKENS
_F_MACRO_IN_ARGC = _ARGC_TOKENS
_F_MACRO_IN_VALUE = _VALUE_TOKENS

# what may follow a macro's "}}" in its full context: a missing "}}" is *inserted* (single-token
# insertion) when the next token is one of these, and the macro then counts as incomplete
_AFTER_DOC_MACRO = frozenset((T.PLAINTEXT, T.OPENBRACE, T.START, T.EOF))
_AFTER_ARG_MACRO = _ARG_TOKENS | {T.DCOLON, T.END}
_AFTER_ARGC_MACRO = _ARGC_TOKENS | {T.END}
_AFTER_VALUE_MACRO = _VALUE_TOKENS | {T.END}
_AFTER_VARNAME = _OPS | {T.END}


@dataclass(frozen=True, slots=True)
class Plain:
    """Text to copy verbatim: plain text, or a fragment that did not form a macro."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ArgNode:
    """One argument: the span of its source (first to last token; ``None`` when empty).

    ``items`` are the argument's own document items when re-parsing its text would give
    exactly them (no recovery inside, no ``{`` glued before a nested ``{{``); the evaluator
    then skips the re-parse SillyTavern performs. ``None`` means "re-parse the span".
    """

    span: tuple[int, int] | None
    items: tuple | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class VarNode:
    """``{{.name op value}}``: scope, name, operator and the value's span and macros."""

    scope: str
    name: str
    op: str | None
    value_span: tuple[int, int] | None
    value_macros: tuple[MacroNode, ...]


@dataclass(frozen=True, slots=True)
class MacroNode:
    """A macro as parsed. ``complete`` is false when it never got its own ``}}``.

    ``parts`` keeps the consumed tokens and nested macros in order, so an incomplete macro can
    be shown as text around its complete nested macros.
    """

    start: int
    end: int
    complete: bool
    flags: str
    name: str
    args: tuple[ArgNode, ...]
    var: VarNode | None
    inner_start: int
    inner_end: int
    parts: tuple[tuple[int, int] | MacroNode, ...]
    #: the case-insensitive lookup key of the name, and whether this is a ``{{/name}}`` closer
    #: (derived from ``name``/``flags``; stored because pairing reads them for every macro)
    key: str = field(init=False, compare=False, repr=False)
    closing: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.name.lower())
        object.__setattr__(self, "closing", "/" in self.flags)


class _Recognition(Exception):
    """A recognition error travelling up the rule stack (Chevrotain's RecognitionException)."""


@dataclass
class _Builder:
    """A partial CST node: tokens and child nodes consumed so far."""

    parts: list
    start: int = -1
    end: int = -1

    def tok(self, tok: Tok) -> None:
        self.parts.append((tok.start, tok.end))
        if self.start < 0 or tok.start < self.start:
            self.start = tok.start
        if tok.end > self.end:
            self.end = tok.end

    def child(self, start: int, end: int, node: object) -> None:
        self.parts.append(node)
        if start >= 0 and (self.start < 0 or start < self.start):
            self.start = start
        if end > self.end:
            self.end = end


class _MacroB(_Builder):
    def __init__(self) -> None:
        super().__init__([])
        self.flags: list[str] = []
        self.name = ""
        self.args: list[_Builder] = []
        self.var: list = []  # scope, name, op, value builder
        self.end_tok: Tok | None = None
        self.start_tok: Tok | None = None


class _Parser:
    """Recursive descent over SillyTavern's token stream, with Chevrotain's recovery."""

    def __init__(self, text: str, toks: list[Tok], hi: int) -> None:
        self.text = text
        self.toks = toks
        self.n = len(toks)
        self.p = 0
        self.follow: list[frozenset[int]] = []
        self.eof = Tok(T.EOF, hi, hi)
        #: recovery events (insertions, deletions, re-syncs, skipped junk); 0 means the token
        #: stream was well-formed and every argument's items can be trusted
        self.anomalies = 0

    # ---- token access --------------------------------------------------------------------
    def la(self, k: int = 1) -> Tok:
        i = self.p + k - 1
        return self.toks[i] if i < self.n else self.eof

    def la_type(self, k: int = 1) -> int:
        i = self.p + k - 1
        return self.toks[i].type if i < self.n else T.EOF

    def resync_type(self) -> int:
        """The type of the first upcoming token in any follow set of the rule stack."""
        union: set[int] = set()
        for f in self.follow:
            union |= f
        i = self.p
        while i < self.n:
            if self.toks[i].type in union:
                return self.toks[i].type
            i += 1
        return T.EOF

    def resync_to(self, ttype: int) -> None:
        while self.la_type() != ttype and self.p < self.n:
            self.p += 1

    def rule_catch(self, own_follow: frozenset[int]) -> bool:
        """Chevrotain's invokeRuleCatch: True when this rule recovers (re-synced here)."""
        self.anomalies += 1
        rtype = self.resync_type()
        if rtype in own_follow:
            self.resync_to(rtype)
            return True
        return False

    # ---- document --------------------------------------------------------------------------
    def document(self) -> list:
        items: list = []
        self.follow.append(_F_DOC)
        try:
            while True:
                self._document_many(items)
                # in-repetition recovery (top-level repetition, EOF expected after it)
                if self.la_type() == T.EOF:
                    break
                self.anomalies += 1
                if self.p + 1 >= self.n:  # single-token deletion would do: no re-sync
                    break
                while self.la_type() not in (T.EOF, T.PLAINTEXT, T.OPENBRACE, T.START):
                    self.p += 1
                if self.la_type() == T.EOF:
                    break
        except _Partial as partial:  # the document rule re-syncs to EOF
            items.append(partial.node)
            self.p = self.n
        self.follow.pop()
        return items

    def _document_many(self, items: list) -> None:
        while True:
            t = self.la_type()
            if t == T.PLAINTEXT or t == T.OPENBRACE:
                tok = self.la()
                items.append(Plain(tok.start, tok.end))
                self.p += 1
            elif t == T.START:
                if self.la_type(2) in _MACRO_SECOND:
                    node = self.macro(_F_MACRO_IN_DOC, _AFTER_DOC_MACRO)
                    items.append(node)
                else:
                    tok = self.la()
                    items.append(Plain(tok.start, tok.end))
                    self.p += 1
            else:
                return

    # ---- macro -----------------------------------------------------------------------------
    def macro(self, own_follow: frozenset[int], after: frozenset[int]) -> MacroNode:
        """The macro rule. Raises :class:`_Partial` when it cannot re-sync by itself.

        ``after`` is what may follow the macro in its context (for single-token insertion).
        """
        b = _MacroB()
        self.follow.append(own_follow)
        try:
            self._macro_body(b, after)
        except _Recognition:
            recovered = self.rule_catch(own_follow)  # the rule is still on the stack here
            self.follow.pop()
            if recovered:
                return self._finish(b)
            raise _Partial(self._finish(b)) from None
        self.follow.pop()
        return self._finish(b)

    def _finish(self, b: _MacroB) -> MacroNode:
        complete = b.end_tok is not None
        start = b.start if b.start >= 0 else (b.start_tok.start if b.start_tok else 0)
        end = b.end if b.end >= 0 else start
        inner_start = b.start_tok.end if b.start_tok else start
        inner_end = b.end_tok.start if b.end_tok else end
        args = tuple(ArgNode(None if a.start < 0 else (a.start, a.end), self._arg_items(a)) for a in b.args)
        var = None
        if b.var:
            scope, name, op, vb = b.var
            vspan = None
            vmacros: tuple[MacroNode, ...] = ()
            if vb is not None and vb.start >= 0:
                vspan = (vb.start, vb.end)
                vmacros = tuple(p for p in vb.parts if isinstance(p, MacroNode))
            var = VarNode(scope, name, op, vspan, vmacros)
        return MacroNode(
            start=start,
            end=end,
            complete=complete,
            flags="".join(b.flags),
            name=b.name,
            args=args,
            var=var,
            inner_start=inner_start,
            inner_end=inner_end,
            parts=() if complete else tuple(b.parts),
        )

    def _arg_items(self, ab: _Builder) -> tuple | None:
        """The document items the argument's text would re-parse into, when that is certain."""
        if ab.start < 0:
            return ()
        text = self.text
        items: list = []
        cursor = ab.start
        for part in ab.parts:
            if isinstance(part, MacroNode):
                if not part.complete or (part.start > ab.start and text[part.start - 1] == "{"):
                    return None
                if part.start > cursor:
                    items.append(Plain(cursor, part.start))
                items.append(part)
                cursor = part.end
        if cursor < ab.end:
            items.append(Plain(cursor, ab.end))
        return tuple(items)

    def _macro_body(self, b: _MacroB, after: frozenset[int]) -> None:
        tok = self.la()
        b.start_tok = tok
        b.tok(tok)
        self.p += 1
        text = self.text
        while self.la_type() in _FLAGS:
            tok = self.la()
            b.flags.append(text[tok.start : tok.end])
            b.tok(tok)
            self.p += 1
        t = self.la_type()
        if t == T.LOCAL or t == T.GLOBAL:
            self._sub(b, self._variable_expr, _F_END)
        elif t == T.DSLASH or t == T.MIDENT:
            self._sub(b, self._macro_name_args, _F_END)
        else:
            raise _Recognition()
        # CONSUME(End) with in-rule recovery: insertion first, then deletion
        if self.la_type() == T.END:
            tok = self.la()
        elif self.la_type() in after:
            self.anomalies += 1
            return  # a virtual "}}": the macro stays incomplete, the caller goes on
        elif self.la_type(2) == T.END:
            self.anomalies += 1
            self.p += 1
            tok = self.la()
        else:
            raise _Recognition()
        b.end_tok = tok
        b.tok(tok)
        self.p += 1

    def _sub(self, b: _Builder, rule, own_follow: frozenset[int]) -> None:  # type: ignore[no-untyped-def]
        """Invoke a sub-rule that writes into ``b``; re-sync here or propagate upwards."""
        self.follow.append(own_follow)
        try:
            rule(b)
        except _Recognition:
            recovered = self.rule_catch(own_follow)
            self.follow.pop()
            if recovered:
                return
            raise
        self.follow.pop()

    def _macro_name_args(self, b: _MacroB) -> None:
        tok = self.la()
        b.name = self.text[tok.start : tok.end]
        b.tok(tok)
        self.p += 1
        if self.la_type() in _ARGC_TOKENS:
            self._sub(b, self._arguments, _F_NONE)

    def _arguments(self, b: _MacroB) -> None:
        if self.la_type() == T.DCOLON:
            b.tok(self.la())
            self.p += 1
            while True:
                self._arg_rule(b, self._argument, _F_ARG_IN_ARGS)
                if self.la_type() != T.DCOLON:
                    break
                b.tok(self.la())
                self.p += 1
        else:
            if self.la_type() == T.COLON:
                b.tok(self.la())
                self.p += 1
            self._arg_rule(b, self._argument_colons, _F_NONE)

    def _arg_rule(self, b: _MacroB, rule, own_follow: frozenset[int]) -> None:  # type: ignore[no-untyped-def]
        ab = _Builder([])
        b.args.append(ab)  # attached even when partial (Chevrotain keeps partial CSTs)
        self.follow.append(own_follow)
        try:
            rule(ab)
        except _Recognition:
            recovered = self.rule_catch(own_follow)
            self.follow.pop()
            self._absorb(b, ab)
            if recovered:
                return
            raise
        self.follow.pop()
        self._absorb(b, ab)

    @staticmethod
    def _absorb(b: _Builder, ab: _Builder) -> None:
        if ab.start >= 0:
            b.child(ab.start, ab.end, _Group(tuple(ab.parts)))

    def _argument(self, ab: _Builder) -> None:
        while True:
            t = self.la_type()
            if t == T.START:
                self._nested(ab, _F_MACRO_IN_ARG, _AFTER_ARG_MACRO)
            elif t in _ARG_TOKENS:
                ab.tok(self.la())
                self.p += 1
            else:
                return

    def _argument_colons(self, ab: _Builder) -> None:
        if self.la_type() not in _ARGC_TOKENS:
            raise _Recognition()  # AT_LEAST_ONE: early exit
        while True:
            t = self.la_type()
            if t == T.START:
                self._nested(ab, _F_MACRO_IN_ARGC, _AFTER_ARGC_MACRO)
            elif t in _ARGC_TOKENS:
                ab.tok(self.la())
                self.p += 1
            else:
                return

    def _nested(self, owner: _Builder, own_follow: frozenset[int], after: frozenset[int]) -> None:
        try:
            node = self.macro(own_follow, after)
        except _Partial as partial:
            node = partial.node
            owner.child(node.start, node.end, node)
            raise _Recognition() from None
        owner.child(node.start, node.end, node)

    def _variable_expr(self, b: _MacroB) -> None:
        tok = self.la()
        scope = self.text[tok.start : tok.end]
        b.tok(tok)
        self.p += 1
        # CONSUME(Var.Identifier) with in-rule recovery (follows: the operators)
        name = ""
        if self.la_type() == T.VARIDENT:
            tok = self.la()
            name = self.text[tok.start : tok.end]
            b.tok(tok)
            self.p += 1
        elif self.la_type() in _AFTER_VARNAME:
            self.anomalies += 1  # single-token insertion: a virtual, empty name
        elif self.la_type(2) == T.VARIDENT:
            self.anomalies += 1
            self.p += 1
            tok = self.la()
            name = self.text[tok.start : tok.end]
            b.tok(tok)
            self.p += 1
        else:
            b.var = [scope, name, None, None]
            raise _Recognition()
        b.var = [scope, name, None, None]
        t = self.la_type()
        if t in _OPS:
            tok = self.la()
            op = self.text[tok.start : tok.end]
            b.var[2] = op
            b.tok(tok)
            self.p += 1
            if t == T.VALOP:
                vb = _Builder([])
                b.var[3] = vb
                self.follow.append(_F_NONE)
                self.follow.append(_F_NONE)
                try:
                    self._variable_value(vb)
                finally:
                    self.follow.pop()
                    self.follow.pop()
                    if vb.start >= 0:
                        b.child(vb.start, vb.end, _Group(tuple(vb.parts)))

    def _variable_value(self, vb: _Builder) -> None:
        while True:
            t = self.la_type()
            if t == T.START:
                self._nested(vb, _F_MACRO_IN_VALUE, _AFTER_VALUE_MACRO)
            elif t in _VALUE_TOKENS:
                vb.tok(self.la())
                self.p += 1
            else:
                return


@dataclass(frozen=True, slots=True)
class _Group:
    """Tokens and macros of one argument (or variable value), kept for flattening."""

    parts: tuple


class _Partial(Exception):
    """A macro rule that could not recover locally, carrying its partial node upwards."""

    def __init__(self, node: MacroNode) -> None:
        super().__init__()
        self.node = node


def _flatten(node: MacroNode, out: list) -> None:
    """An incomplete macro as items: its tokens are text, complete nested macros stay."""
    stack: list = list(reversed(node.parts))
    while stack:
        part = stack.pop()
        if isinstance(part, tuple):
            out.append(Plain(part[0], part[1]))
        elif isinstance(part, MacroNode):
            if part.complete:
                out.append(part)
            else:
                stack.extend(reversed(part.parts))
        elif isinstance(part, _Group):
            stack.extend(reversed(part.parts))


def _depth_limited(hi: int, toks: list[Tok], limit: int) -> tuple[list[Tok], list[tuple[int, int]]]:
    """Replace top-level macro regions nested deeper than ``limit`` by holes (left as written).

    A region runs from a ``{{`` opened at depth 1 to the token that brings the lexer back to
    depth 0 (or the end of input). Tokens carry the lexer's own depth, so ``{{`` fragments the
    lexer abandoned never count.
    """
    if not toks or max(t.depth for t in toks) <= limit:
        return toks, []
    keep: list[Tok] = []
    holes: list[tuple[int, int]] = []
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok.type != T.START or tok.depth != 1:
            keep.append(tok)
            i += 1
            continue
        j = i
        deepest = 0
        while j < n:
            if toks[j].depth > deepest:
                deepest = toks[j].depth
            if toks[j].depth == 0:
                break
            j += 1
        region_end = toks[j].end if j < n else hi
        if deepest > limit:
            holes.append((tok.start, region_end))
        else:
            keep.extend(toks[i : j + 1])
        i = j + 1
    return keep, holes


def document_items(
    text: str, lo: int = 0, hi: int | None = None, max_nesting: int = MAX_NESTING
) -> tuple[list, list[Diagnostic], bool]:
    """The top-level items of ``text[lo:hi]`` in order: :class:`Plain` spans and complete macros.

    Incomplete macros are flattened; tokens no rule accepted are not items (the caller copies
    the gaps between items verbatim, as SillyTavern does). Offsets are absolute in ``text``.
    The flag is true when nothing needed recovery (then argument items can be trusted).
    """
    if hi is None:
        hi = len(text)
    lex_errors: list[int] = []
    toks = tokenize(text, lo, hi, lex_errors)
    diagnostics: list[Diagnostic] = []
    toks, holes = _depth_limited(hi, toks, max_nesting)
    for start, end in holes:
        diagnostics.append(
            Diagnostic(
                "MACRO_NESTING_LIMIT",
                f"macros nested deeper than {max_nesting} levels; left as written",
                Span(start, end),
            )
        )
    parser = _Parser(text, toks, hi)
    raw_items = parser.document()
    clean = parser.anomalies == 0 and not lex_errors and not holes
    items: list = []
    for item in raw_items:
        if isinstance(item, MacroNode) and not item.complete:
            _flatten(item, items)
        else:
            items.append(item)
    for start, end in holes:
        items.append(Plain(start, end))
    if holes or not clean:
        items.sort(key=lambda i: (i.start, i.end))
    return items, diagnostics, clean


def parse_macros(text: str) -> tuple[Plain | MacroNode, ...]:
    """The top-level items of ``text``: verbatim spans and complete macros, with offsets."""
    return tuple(document_items(text)[0])


# ---- the LALR path (grammars/macros.lark) --------------------------------------------------

_TYPE_NAMES = {value: name for name, value in vars(T).items() if isinstance(value, int) and name != "EOF"}


def _span_of(items: list) -> tuple[int, int] | None:
    if not items:
        return None
    first, last = items[0], items[-1]
    start = first.start_pos if hasattr(first, "start_pos") else first.start
    end = last.end_pos if hasattr(last, "end_pos") else last.end
    return (start, end)


class _LalrBuild(Transformer):
    """Inline LALR callbacks (run on each reduction, no recursion): tokens -> frozen nodes."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)

    def start(self, children: list) -> list:
        return children

    def text(self, children: list) -> Plain:
        tok = children[0]
        return Plain(tok.start_pos, tok.end_pos)

    def flags(self, children: list) -> str:
        return "".join(str(t) for t in children)

    def arg(self, children: list) -> list:
        return children

    argc = arg
    value = arg

    def args_dcolon(self, children: list) -> list[ArgNode]:
        return [ArgNode(_span_of(c)) for c in children if isinstance(c, list)]

    def args_colon(self, children: list) -> list[ArgNode]:
        return [ArgNode(_span_of(children[1]))]

    def args_space(self, children: list) -> list[ArgNode]:
        return [ArgNode(_span_of(children))]

    def name_only(self, children: list) -> tuple:
        return (str(children[0]), [], None)

    def name_args(self, children: list) -> tuple:
        return (str(children[0]), children[1], None)

    def var_get(self, children: list) -> tuple:
        scope, name = children[0], children[1]
        return (str(scope) + str(name), [], VarNode(str(scope), str(name), None, None, ()))

    def var_step(self, children: list) -> tuple:
        scope, name, op = children
        return (str(scope) + str(name), [], VarNode(str(scope), str(name), str(op), None, ()))

    def var_op(self, children: list) -> tuple:
        scope, name, op, value = children
        macros = tuple(v for v in value if isinstance(v, MacroNode))
        var = VarNode(str(scope), str(name), str(op), _span_of(value), macros)
        return (str(scope) + str(name), [], var)

    def macro(self, children: list) -> MacroNode:
        start_tok, flags, body, end_tok = children
        name, args, var = body
        return MacroNode(
            start=start_tok.start_pos,
            end=end_tok.end_pos,
            complete=True,
            flags=flags,
            name="" if var is not None else name,
            args=tuple(args),
            var=var,
            inner_start=start_tok.end_pos,
            inner_end=end_tok.start_pos,
            parts=(),
        )


@lru_cache(maxsize=1)
def _lark():  # type: ignore[no-untyped-def]
    from lark import Lark, Token
    from lark.lexer import Lexer

    class _Feed(Lexer):
        """Hands the mode lexer's tokens to Lark (its own lexers cannot keep a mode stack)."""

        def __init__(self, lexer_conf) -> None:  # type: ignore[no-untyped-def]
            pass

        def lex(self, data):  # type: ignore[no-untyped-def]
            text, toks = data
            names = _TYPE_NAMES
            for tok in toks:
                yield Token(names[tok.type], text[tok.start : tok.end], start_pos=tok.start, end_pos=tok.end)

    grammar = (resources.files("tavernbox.grammars") / "macros.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer=_Feed, transformer=_LalrBuild(), maybe_placeholders=False)


def lalr_items(text: str, toks: list[Tok]) -> list | None:
    """Parse a token stream with the LALR grammar; ``None`` when it holds a malformed macro."""
    from lark.exceptions import LarkError

    try:
        return _lark().parse((text, toks))
    except LarkError:
        return None


def validate_macro(source: str) -> bool:
    """Whether ``source`` is exactly one well-formed macro by the LALR grammar."""
    toks = tokenize(source)
    items = lalr_items(source, toks)
    return items is not None and len(items) == 1 and isinstance(items[0], MacroNode)
