"""Text -> frozen macro nodes, with SillyTavern 1.18's tolerance for malformed macros.

Two steps, both linear and free of recursion on well-formed input:

* :mod:`.lexer` produces SillyTavern's token stream: a contextual (mode-stack) lexer whose modes
  are the lexing contexts of SillyTavern's Chevrotain lexer, including the characters it drops.
* :func:`lalr_items` parses those tokens with the LALR(1) table Lark builds from
  ``grammars/macros.lark``, driven by a tight shift/reduce loop that builds frozen nodes on each
  reduction (offsets come from the tokens; there is no tree and no recursion).

A token stream the grammar rejects holds a malformed macro. There SillyTavern's parser
*recovers* (it inserts or deletes single tokens, re-synchronises on the follow sets of the rules
being parsed, skips junk between document items) and its evaluator shows the recovered
fragments as text; cards depend on the result (``{{user{{pick::a}}`` stays as written, an
unterminated ``{{`` before a valid macro leaves that macro working). :class:`_Parser` reproduces
that recovery exactly, as an error-tolerant fallback. Its recursion follows brace nesting only,
which :data:`MAX_NESTING` caps at 64 before parsing starts. Tests prove that the grammar accepts
exactly the streams the fallback reads without any recovery, with identical nodes.

:func:`document_items` flattens what did not parse completely into text spans, keeping the
complete macros nested inside it (SillyTavern's walker does the same).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from bisect import bisect_left
from dataclasses import dataclass
from operator import itemgetter
from functools import lru_cache
from importlib import resources

from ..errors import Diagnostic
from ..spans import Span
from ..shortcuts import DEFAULT, Shortcuts
from .budget import CHECK_CHARS, CHECK_EVERY, check
import re

from .lexer import PLAIN, WS_CHARS, T, Tok, _MODES, tokenize, tokenize_limited, tokenize_macro

__all__ = [
    "MAX_NESTING",
    "ArgNode",
    "MacroNode",
    "Plain",
    "VarNode",
    "document_items",
    "document_parse",
    "parse_macros",
    "validate_macro",
]

#: Brace nesting deeper than this is left as written (``MACRO_NESTING_LIMIT``).
MAX_NESTING = 64

_FLAGS = (T.FLAG, T.FILTERFLAG)
_START, _PLAINTEXT, _OPENBRACE = T.START, T.PLAINTEXT, T.OPENBRACE
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


# ---- nodes ---------------------------------------------------------------------------------
#
# Plain spans, arguments and macros are tuple subclasses read through C-level field getters:
# building one is a single ``tuple.__new__`` (a frozen slotted dataclass cost one guarded
# descriptor call per field: 1.2 us a macro, a fifth of parsing ``{{if 1}}`` x 200,000), and a
# field read costs what a slot read costs. They stay immutable and hashable; a macro keeps no
# offsets it can derive (``inner_start``/``inner_end``), and a literal argument's span *is* its
# one plain item, which saves ~150 bytes a macro on texts of a few hundred thousand macros.

try:  # the getter namedtuple uses (CPython); a property over itemgetter elsewhere
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    def _tuplegetter(index: int, doc: str) -> property:  # type: ignore[misc]
        return property(itemgetter(index), doc=doc)

_tnew = tuple.__new__


class Plain(tuple):
    """Text to copy verbatim: plain text, or a fragment that did not form a macro."""

    __slots__ = ()
    start: int = _tuplegetter(0, "offset of the first character")  # type: ignore[assignment]
    end: int = _tuplegetter(1, "offset after the last character")  # type: ignore[assignment]

    def __new__(cls, start: int, end: int) -> Plain:
        return _tnew(cls, (start, end))

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"Plain(start={self[0]!r}, end={self[1]!r})"


class ArgNode(tuple):
    """One argument: the span of its source (first to last token; ``None`` when empty).

    ``items`` are the argument's own document items when re-parsing its text would give
    exactly them (no recovery inside, no ``{`` glued before a nested ``{{``); the evaluator
    then skips the re-parse SillyTavern performs. ``None`` means "re-parse the span".
    Equality and hashing read the span only (the items are a cache of its parse).
    """

    __slots__ = ()
    span: tuple[int, int] | None = _tuplegetter(0, "(first, last) offsets, or None")  # type: ignore[assignment]
    items: tuple | None = _tuplegetter(1, "the span's items when known")  # type: ignore[assignment]

    def __new__(cls, span: tuple[int, int] | None, items: tuple | None = None) -> ArgNode:
        return _tnew(cls, (span, items))

    def __getnewargs__(self) -> tuple:
        return (self[0], self[1])

    def __eq__(self, other: object) -> bool:
        if type(other) is not ArgNode:
            return NotImplemented
        return self[0] == other[0]  # type: ignore[index]

    def __ne__(self, other: object) -> bool:
        if type(other) is not ArgNode:
            return NotImplemented
        return self[0] != other[0]  # type: ignore[index]

    def __hash__(self) -> int:
        return hash(self[0])

    def __repr__(self) -> str:
        return f"ArgNode(span={self[0]!r})"


@dataclass(frozen=True, slots=True)
class VarNode:
    """``{{.name op value}}``: scope, name, operator and the value's span and macros."""

    scope: str
    name: str
    op: str | None
    value_span: tuple[int, int] | None
    value_macros: tuple[MacroNode, ...]


class MacroNode(tuple):
    """A macro as parsed. ``complete`` is false when it never got its own ``}}``.

    ``parts`` keeps the consumed tokens and nested macros in order, so an incomplete macro can
    be shown as text around its complete nested macros. ``key`` (the case-insensitive lookup
    key of the name) and ``closing`` (a ``{{/name}}`` closer) derive from ``name``/``flags``;
    they are stored because pairing reads them for every macro.
    """

    __slots__ = ()
    start: int = _tuplegetter(0, "offset of the opening {{")  # type: ignore[assignment]
    end: int = _tuplegetter(1, "offset after the closing }} (or the last token)")  # type: ignore[assignment]
    complete: bool = _tuplegetter(2, "whether the macro got its own }}")  # type: ignore[assignment]
    flags: str = _tuplegetter(3, "the flag characters")  # type: ignore[assignment]
    name: str = _tuplegetter(4, "the name as written")  # type: ignore[assignment]
    args: tuple[ArgNode, ...] = _tuplegetter(5, "the arguments")  # type: ignore[assignment]
    var: VarNode | None = _tuplegetter(6, "the variable shorthand, if it is one")  # type: ignore[assignment]
    parts: tuple = _tuplegetter(7, "an incomplete macro's tokens and nested macros")  # type: ignore[assignment]
    key: str = _tuplegetter(8, "the lower-cased name")  # type: ignore[assignment]
    closing: bool = _tuplegetter(9, "whether this is a {{/name}} closer")  # type: ignore[assignment]

    def __new__(
        cls,
        start: int,
        end: int,
        complete: bool,
        flags: str,
        name: str,
        args: tuple[ArgNode, ...],
        var: VarNode | None,
        parts: tuple = (),
    ) -> MacroNode:
        return _tnew(cls, (start, end, complete, flags, name, args, var, parts, name.lower(), "/" in flags))

    def __getnewargs__(self) -> tuple:
        return tuple(self[:8])

    @property
    def inner_start(self) -> int:
        """Offset after the opening ``{{``."""
        return self[0] + 2  # type: ignore[no-any-return]

    @property
    def inner_end(self) -> int:
        """Offset of the closing ``}}`` (the end, for an incomplete macro)."""
        return self[1] - 2 if self[2] else self[1]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (
            f"MacroNode(start={self[0]!r}, end={self[1]!r}, complete={self[2]!r}, flags={self[3]!r}, "
            f"name={self[4]!r}, args={self[5]!r}, var={self[6]!r}, parts={self[7]!r})"
        )


def _macro_node(start: int, end: int, flags: str, name: str, args: tuple, var: VarNode | None) -> MacroNode:
    """A complete :class:`MacroNode` whose name strings are shared with every node of that name."""
    names = _NAMES.get(name)
    if names is None:
        names = (name, name.lower())
        if len(_NAMES) < 4096:
            _NAMES[name] = names
    return _tnew(MacroNode, (start, end, True, flags, names[0], args, var, (), names[1], "/" in flags))


#: name -> (the name, its lookup key), shared by every node of that name: a text repeating one
#: macro 200,000 times holds two strings, not 400,000 (bounded: a hostile text of distinct
#: names only stops sharing)
_NAMES: dict[str, tuple[str, str]] = {}


def _plain(start: int, end: int) -> Plain:
    """A :class:`Plain` without the call through ``Plain.__new__``."""
    return _tnew(Plain, (start, end))


#: the type :meth:`_Parser.la_type` gives two tokens past a region that plain text follows
_PLAIN_NEXT = -2


class _Recognition(Exception):
    """A recognition error travelling up the rule stack (Chevrotain's RecognitionException)."""


class _Builder:
    """A partial CST node: tokens and child nodes consumed so far (slotted: one is made per
    argument and macro the recovery parser reads)."""

    __slots__ = ("clean", "end", "parts", "start")

    def __init__(self, parts: list) -> None:
        self.parts = parts
        self.start = -1
        self.end = -1
        #: no recovery happened while this argument was parsed (see :meth:`_Parser._arg_rule`)
        self.clean = True

    def tok(self, tok: Tok) -> None:
        start, end = tok[1], tok[2]
        self.parts.append((start, end))
        if self.start < 0 or start < self.start:
            self.start = start
        if end > self.end:
            self.end = end

    def child(self, start: int, end: int, node: object) -> None:
        self.parts.append(node)
        if start >= 0 and (self.start < 0 or start < self.start):
            self.start = start
        if end > self.end:
            self.end = end


class _MacroB(_Builder):
    __slots__ = ("args", "end_tok", "flags", "name", "start_tok", "var")

    def __init__(self) -> None:
        self.parts = []
        self.start = -1
        self.end = -1
        self.clean = True
        self.flags: list[str] = []
        self.name = ""
        self.args: list[_Builder] = []
        self.var: list = []  # scope, name, op, value builder
        self.end_tok: Tok | None = None
        self.start_tok: Tok | None = None


class _Parser:
    """Recursive descent over SillyTavern's token stream, with Chevrotain's recovery."""

    def __init__(
        self, text: str, toks: list[Tok], hi: int, dropped: list[int] | None = None, *, next_type: int = T.EOF
    ) -> None:
        self.text = text
        #: the type of the token after ``toks`` when they are one top-level region of a longer
        #: document (see :func:`_recover_region`; ``EOF`` otherwise): a rule may read that type,
        #: whatever reads further (or that token's offsets) sets :attr:`spilled`
        self.next_type = next_type
        self.bounded = next_type != T.EOF
        self.spilled = False
        #: where the lexer dropped characters (ascending): an argument spanning one keeps no
        #: items, as its text re-lexed on its own may not drop it
        self.dropped = dropped or []
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
        if i < self.n:
            return self.toks[i]
        if self.bounded and len(self.follow) > 1:
            self.spilled = True  # a rule took a token past the region
        return self.eof

    def la_type(self, k: int = 1) -> int:
        i = self.p + k - 1
        if i < self.n:
            return self.toks[i][0]  # type: ignore[no-any-return]
        if self.bounded and len(self.follow) > 1:
            # inside a rule: the next region's first token is known by type; past it, nothing
            if i == self.n:
                return self.next_type
            if i == self.n + 1 and self.next_type != T.START:
                # after plain text or "{": "{{" or the end, no token a macro rule is looking for
                # (a second lookahead only asks for "}}" or a variable name)
                return _PLAIN_NEXT
            self.spilled = True
        return T.EOF  # at the document level the region ends like a document

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
        if self.bounded:
            if self.next_type in union:
                return self.next_type  # resync_to stops at the region's end, before that token
            self.spilled = True  # the re-sync point lies further on, if anywhere
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
            self.spilled = self.bounded  # ... of the whole document, not of the region
        self.follow.pop()
        return items

    def _document_many(self, items: list) -> None:
        # the loops over tokens read them in place (``la_type`` only past the last one): they
        # run once per token of every malformed region
        toks, n = self.toks, self.n
        check_at = (toks[self.p][1] if self.p < n else self.eof[1]) + CHECK_CHARS
        while True:
            p = self.p
            if p < n and toks[p][1] >= check_at:
                check_at = toks[p][1] + CHECK_CHARS
                check(toks[p][1], self.text)  # the render's CPU budget (see .budget)
            t = toks[p][0] if p < n else self.la_type()
            if t == _PLAINTEXT or t == _OPENBRACE:
                tok = toks[p]
                items.append(_tnew(Plain, (tok[1], tok[2])))
                self.p = p + 1
            elif t == _START:
                if self.la_type(2) in _MACRO_SECOND:
                    node = self.macro(_F_MACRO_IN_DOC, _AFTER_DOC_MACRO)
                    items.append(node)
                else:
                    tok = toks[p]
                    items.append(_tnew(Plain, (tok[1], tok[2])))
                    self.p = p + 1
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
        dropped = self.dropped
        args = tuple([
            _tnew(ArgNode, (
                None if a.start < 0 else (a.start, a.end),
                self._arg_items(a) if a.clean and not (dropped and _drops_in(dropped, a.start, a.end)) else None,
            ))
            for a in b.args
        ])
        var = None
        if b.var:
            scope, name, op, vb = b.var
            vspan = None
            vmacros: tuple[MacroNode, ...] = ()
            if vb is not None and vb.start >= 0:
                vspan = (vb.start, vb.end)
                vmacros = tuple(p for p in vb.parts if type(p) is MacroNode)
            var = VarNode(scope, name, op, vspan, vmacros)
        # the derived inner offsets (MacroNode.inner_start/inner_end) are these tokens' edges
        assert b.start_tok is not None and b.start_tok.start == start
        assert not complete or b.end_tok.end == end  # type: ignore[union-attr]
        flags = "".join(b.flags)
        if complete:
            return _macro_node(start, end, flags, b.name, args, var)
        return _tnew(MacroNode, (start, end, False, flags, b.name, args, var, tuple(b.parts), b.name.lower(), "/" in flags))

    def _arg_items(self, ab: _Builder) -> tuple | None:
        """The document items the argument's text would re-parse into, when that is certain.

        The argument itself parsed without recovery (``ab.clean``: no token inserted, deleted or
        skipped while its rule ran, which covers its nested macros), so it holds exactly the
        items a re-parse of its span finds, wherever else the document needed recovery; what
        is left to check is lexical: a nested macro that stayed incomplete, or a ``{`` glued
        before a nested ``{{`` (an opening brace in plain text, an unknown character here).
        """
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
        anomalies = self.anomalies
        self.follow.append(own_follow)
        try:
            rule(ab)
        except _Recognition:
            ab.clean = False
            recovered = self.rule_catch(own_follow)
            self.follow.pop()
            self._absorb(b, ab)
            if recovered:
                return
            raise
        self.follow.pop()
        ab.clean = self.anomalies == anomalies
        self._absorb(b, ab)

    @staticmethod
    def _absorb(b: _Builder, ab: _Builder) -> None:
        if ab.start >= 0:
            b.child(ab.start, ab.end, _Group(tuple(ab.parts)))

    def _argument(self, ab: _Builder) -> None:
        toks, n = self.toks, self.n
        while True:
            p = self.p
            t = toks[p][0] if p < n else self.la_type()
            if t == _START:
                self._nested(ab, _F_MACRO_IN_ARG, _AFTER_ARG_MACRO)
            elif t in _ARG_TOKENS:  # a token of the region (past it only START can be read)
                ab.tok(toks[p])
                self.p = p + 1
            else:
                return

    def _argument_colons(self, ab: _Builder) -> None:
        if self.la_type() not in _ARGC_TOKENS:
            raise _Recognition()  # AT_LEAST_ONE: early exit
        toks, n = self.toks, self.n
        while True:
            p = self.p
            t = toks[p][0] if p < n else self.la_type()
            if t == _START:
                self._nested(ab, _F_MACRO_IN_ARGC, _AFTER_ARGC_MACRO)
            elif t in _ARGC_TOKENS:
                ab.tok(toks[p])
                self.p = p + 1
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
        toks, n = self.toks, self.n
        while True:
            p = self.p
            t = toks[p][0] if p < n else self.la_type()
            if t == _START:
                self._nested(vb, _F_MACRO_IN_VALUE, _AFTER_VALUE_MACRO)
            elif t in _VALUE_TOKENS:
                vb.tok(toks[p])
                self.p = p + 1
            else:
                return


def _drops_in(dropped: list[int], start: int, end: int) -> bool:
    """Whether a dropped character (a run of them starts at each position) lies in ``[start, end)``."""
    i = bisect_left(dropped, start)
    return i < len(dropped) and dropped[i] < end


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
        if type(part) is tuple:
            if out and type(out[-1]) is Plain and out[-1][1] == part[0]:
                out[-1] = _tnew(Plain, (out[-1][0], part[1]))  # contiguous text is one item
            else:
                out.append(_tnew(Plain, (part[0], part[1])))
        elif isinstance(part, MacroNode):
            if part.complete:
                out.append(part)
            else:
                stack.extend(reversed(part.parts))
        elif isinstance(part, _Group):
            stack.extend(reversed(part.parts))


# ---- simple macros read off one regex match (see _region_items) ----------------------------
#
# A macro is "simple" when its token stream has a fixed shape the grammar can only parse one
# way: ``{{``, flags, then a name with no arguments, ``::`` arguments, the one argument after a
# single ``:`` or one legacy whitespace argument; or ``//`` and a comment; or the variable
# shorthand ``.name``/``$name`` with ``++``/``--`` or an operator and a value; then ``}}``.
# Whitespace may come before, between and after the flags and after the scope (the lexer skips
# it there: ``{{ user }}``, ``{{ ! # a}}``, ``{{ . x}}``). ``::`` argument text excludes whatever
# switches the lexer's mode or splits (``{ } | \\ :``); the one argument of the colon,
# whitespace and comment forms may hold ``:`` and ``::`` but not start with ``:`` (that one
# is a separator); a value excludes braces; all may hold simple macros (one level). Every part is possessive or atomic, as each token of the lexer
# is matched on its own (and no input can make the regex backtrack quadratically).

_WS_CLASS = "[" + re.escape(WS_CHARS) + "]"
_FLAG = r"(?:[!?~#>]|/(?!/))"
_NAME = r"[a-zA-Z][a-zA-Z0-9_-]*+"
_VARNAME = r"(?>[a-zA-Z](?:[a-zA-Z0-9_-]*[a-zA-Z0-9_])?)"
_STEP = r"(?>\+\+|--)"  # checked before the operators, as the lexer orders them
_VALOP = r"(?>\?\?=|\?\?|\|\|=|\|\||-=|==|!=|>=|>|<=|<|\+=|=)"
_FLAT_ARG = r"[^{}|\\:]*+"
#: the one argument after a single ``:`` (``{{roll:1d6}}``), where ``::`` and ``:`` are its text
_FLAT_COLON_ARG = r"[^{}|\\]*+"
_FLAT_VALUE = r"[^{}]*+"
#: a single ``:`` followed by at least one token (``{{a:}}`` is malformed: the grammar wants one)
_COLON = ":(?!:)(?=" + _WS_CLASS + "*+[^}" + re.escape(WS_CHARS) + "])"


def _macro_pattern(arg: str, colon_arg: str, value: str, capture: bool) -> str:
    g = (lambda body: f"({body})") if capture else (lambda body: f"(?:{body})")
    # whitespace the lexer skips (around the flags, after the scope of a variable)
    ws = _WS_CLASS + "*+"
    return (
        r"\{\{" + ws + g("(?:" + _FLAG + ws + ")*+") + "(?:"
        # a name or "//", then "::" arguments, or the one argument after whitespace, a single
        # colon or (a comment) nothing: one group each (every copy of an argument pattern with
        # its nested macros costs milliseconds to compile at import)
        + g(_NAME + "|//") + "(?:" + g(f"(?:::{arg})++")
        + "|(?:" + _WS_CLASS + "++(?!:)|" + _COLON + "|(?<=//)(?!" + ws + ":))" + g(colon_arg) + ")?"
        + "|" + g("[.$]") + ws + g(_VARNAME) + _WS_CLASS + "*+"
        + "(?:" + g(_STEP) + _WS_CLASS + "*+|" + g(_VALOP) + g(value) + ")?"
        + r")\}\}"
    )


#: ``str.translate`` table deleting JavaScript whitespace
_NO_WS = dict.fromkeys(map(ord, WS_CHARS))
#: ``{{`` that the lexer leaves at once (no ``}}``, flag, name, comment or variable after it):
#: a region of one START token, which the grammar reads as text
_LONE_START = re.compile(r"\{\{" + _WS_CLASS + r"*+(?!\}\}|[/.$!?~#>a-zA-Z])")

_FLAT_MACRO = _macro_pattern(_FLAT_ARG, _FLAT_COLON_ARG, _FLAT_VALUE, capture=False)
_RICH_ARG = r"(?:[^{}|\\:]++|" + _FLAT_MACRO + ")*+"
_RICH_COLON_ARG = r"(?:[^{}|\\]++|" + _FLAT_MACRO + ")*+"
_RICH_VALUE = r"(?:[^{}]++|" + _FLAT_MACRO + ")*+"
#: a simple macro whose arguments and value may hold flat simple macros (at the top level)
_SIMPLE_MACRO = re.compile(_macro_pattern(_RICH_ARG, _RICH_COLON_ARG, _RICH_VALUE, capture=True))
#: a simple macro without nested macros (inside an argument or value of the one above)
_FLAT_SIMPLE = re.compile(_macro_pattern(_FLAT_ARG, _FLAT_COLON_ARG, _FLAT_VALUE, capture=True))
_RICH_ARG_RE = re.compile(_RICH_ARG)
_FLAT_ARG_RE = re.compile(_FLAT_ARG)

_EMPTY_ARG = ArgNode(None, ())


def _trimmed(text: str, lo: int, hi: int) -> Plain | None:
    """``(first, last)`` token bounds of ``text[lo:hi]``: the span minus JavaScript whitespace.

    A :class:`Plain` (a pair), so a literal argument can hold its span as its one item.
    """
    piece = text[lo:hi]
    stripped = piece.lstrip(WS_CHARS)
    if not stripped:
        return None
    if len(stripped) == len(piece) and stripped[-1] not in WS_CHARS:
        return _tnew(Plain, (lo, hi))
    a = lo + (len(piece) - len(stripped))
    return _tnew(Plain, (a, a + len(stripped.rstrip(WS_CHARS))))


def _inner_items(text: str, a: int, b: int) -> list:
    """Plain gaps and the (flat) simple macros of an argument's or value's span."""
    out: list = []
    cursor = a
    ticks = CHECK_EVERY
    for fm in _FLAT_SIMPLE.finditer(text, a, b):
        start = fm.start()
        ticks -= 1
        if not ticks:
            ticks = CHECK_EVERY
            check(start, text)  # the render's CPU budget (see .budget)
        if start > cursor:
            out.append(_plain(cursor, start))
        node = _simple_node(text, fm, _FLAT_ARG_RE, start)
        out.append(node)
        cursor = node.end
    if cursor < b:
        out.append(_plain(cursor, b))
    return out


def _text_arg(text: str, lo: int, hi: int) -> ArgNode:
    """The argument the grammar builds from ``text[lo:hi]`` (its own items: gaps and macros)."""
    span = _trimmed(text, lo, hi)
    if span is None:
        return _EMPTY_ARG
    if text.find("{", span[0], span[1]) < 0:
        return _tnew(ArgNode, (span, (span,)))  # the span is the argument's one plain item
    return _tnew(ArgNode, (span, tuple(_inner_items(text, span[0], span[1]))))


def _simple_node(text: str, sm: re.Match[str], arg_re: re.Pattern[str], pos: int) -> MacroNode:
    """The node the grammar builds for a :data:`_SIMPLE_MACRO`/:data:`_FLAT_SIMPLE` match at ``pos``.

    ``pos`` is the caller's own int for ``sm.start()``: the end of one item is the next one's
    start, and sharing the object saves one int per macro.
    """
    end = sm.end()
    flag, name, dcolon, spaced, scope, varname, step, valop, value = sm.groups()
    if flag:
        flag = flag.translate(_NO_WS)  # the flags without the whitespace between them
    if scope is not None:
        if valop is None:
            var = VarNode(scope, varname, step, None, ())
        else:
            vstart = sm.start(9)
            span = _trimmed(text, vstart, sm.end(9))
            if span is None:
                var = VarNode(scope, varname, valop, None, ())
            else:
                macros = tuple(i for i in _inner_items(text, span[0], span[1]) if type(i) is MacroNode)
                var = VarNode(scope, varname, valop, span, macros)
        return _macro_node(pos, end, flag or "", "", (), var)
    args: tuple = ()
    if dcolon:
        built = []
        p = sm.start(3)
        stop = sm.end(3)
        ticks = CHECK_EVERY
        while p < stop:  # at a "::"
            ticks -= 1
            if not ticks:
                ticks = CHECK_EVERY
                check(p, text)  # the render's CPU budget (see .budget): 700,000 arguments take ~2 s
            p += 2
            q = arg_re.match(text, p, stop).end()  # type: ignore[union-attr]
            built.append(_text_arg(text, p, q))
            p = q
        args = tuple(built)
    elif spaced:
        # one whitespace-, colon- or comment-form argument; only whitespace means none
        # (name_only; after a colon there is always a token, see _COLON)
        arg = _text_arg(text, sm.start(4), sm.end(4))
        if arg is not _EMPTY_ARG:
            args = (arg,)
    return _macro_node(pos, end, flag or "", name, args, None)


#: simple macros up to this long are parsed once per text and distinct source (see _shape)
_SHAPE_CHARS = 96
#: distinct simple macros remembered per parse (a text of 200,000 distinct ones stops adding)
_SHAPES = 4096


def _shape(node: MacroNode) -> tuple | None:
    """What a simple macro's node is, relative to its start; ``None`` unless every argument is literal.

    A prompt repeats the same few macros (``{{user}}``, ``{{char}}``; a hostile text one macro
    200,000 times): the node of a repeated source differs only by its offset, so it is built
    from this instead of from the regex match (one lookup instead of reading groups, trimming
    and scanning each argument).
    """
    var = node.var
    if var is not None and (var.value_span is not None or var.value_macros):
        return None  # a value holds offsets (a variable without one is frozen: it is shared)
    start = node[0]
    rel: list = []
    for arg in node.args:
        span = arg.span
        if span is None:
            rel.append(None)
        elif arg.items == (span,):
            rel.append((span[0] - start, span[1] - start))
        else:
            return None  # nested macros: their nodes would need shifting too
    return node.flags, node.name, tuple(rel), node.key, node.closing, var


def _from_shape(shape: tuple, pos: int, end: int) -> MacroNode:
    """The node of :func:`_shape`'s macro at ``pos``."""
    flags, name, rel, key, closing, var = shape
    args: tuple = ()
    if len(rel) == 1 and rel[0] is not None:  # the common case: one literal argument
        r = rel[0]
        span = _tnew(Plain, (pos + r[0], pos + r[1]))
        args = (_tnew(ArgNode, (span, (span,))),)
    elif rel:
        built = []
        for r in rel:
            if r is None:
                built.append(_EMPTY_ARG)
            else:
                span = _tnew(Plain, (pos + r[0], pos + r[1]))
                built.append(_tnew(ArgNode, (span, (span,))))
        args = tuple(built)
    return _tnew(MacroNode, (pos, end, True, flags, name, args, var, (), key, closing))


def _region_items(text: str, lo: int, hi: int, max_nesting: int) -> list | None:
    """The LALR parse of ``text[lo:hi]`` by :func:`_region_prefix`, or ``None`` when a region stopped it."""
    items, stop, _ = _region_prefix(text, lo, hi, max_nesting)
    return items if stop == hi else None


def _region_prefix(
    text: str, lo: int, hi: int, max_nesting: int, recovered: list[tuple[int, int]] | None = None
) -> tuple[list, int, tuple[list[Tok], int] | bool]:
    """The LALR parse of ``text[lo:hi]``, built one top-level region at a time, as far as it goes.

    Lexing plain text and parsing a document token by token cost ~15 us a macro, most of it
    Python overhead per token. The document rule is a sequence of independent items, and the
    lexer is back in plain mode with an empty stack after each top-level macro, so the
    document is cut there: plain text comes from the plain-mode rule (the lexer's own regex), a
    simple macro (:data:`_SIMPLE_MACRO`) from one match, any other region from the lexer and
    the LALR table on that region alone. The items are those of the whole-document parse.

    Returns ``(items, stop, rejected)``: the items of ``text[lo:stop]``, where ``stop`` is ``hi``
    or the start of the first region this path cannot answer (a dropped character, nesting past
    the limit, or a region the grammar rejects: then ``rejected`` is that region's tokens and
    end, which the whole-document lexer would produce first from ``stop``). The whole-document path owns
    diagnostics and recovery; the lexer and SillyTavern's parser are both back at the start of a
    document item at a region's start, so the caller runs that path on ``text[stop:hi]`` only, and
    skips its LALR attempt when the grammar already rejected a region of it.

    With ``recovered`` (a list), a region the grammar rejects, or one where the lexer dropped a
    character, is first recovered on its own (:func:`_recover_region`): when SillyTavern's
    recovery of it reads no further than the next region's first token type, its items are the
    whole-document path's, the region's ``(start, end)`` is appended to ``recovered`` (the
    parse is then not clean) and the regions after it go on as before. Only nesting past the
    limit, or a recovery that reads further, stops the region path then.
    """
    plain_re, plain_table = _MODES[PLAIN]
    simple = _SIMPLE_MACRO.match
    lone = _LONE_START.match
    starts = text.startswith
    items: list = []
    append = items.append
    #: source of a simple macro -> its shape (see _shape), or None when it has none
    shapes: dict[str, tuple | None] = {}
    #: the source and shape of the last simple macro built from a shape: a text repeating it
    #: is checked with one ``startswith`` (the match is decided by the characters it spans)
    last_source = ""
    last_shape: tuple | None = None
    #: where the last node built from ``last_shape`` ended: a copy starting there may begin a run
    shape_end = -1
    #: the source of the last well-formed region the LALR table parsed
    last_parsed = ""
    #: malformed regions recovered so far, by source and the type of the token after them:
    #: their items relative to the region's start (a hostile text repeating one, "{{#}}" x
    #: 400,000, cost ~30 us a region to recover, 12 s; a repeat costs a shift)
    recoveries: dict[tuple[str, int], list] = {}
    #: the last region lexed and parsed on its own (see :class:`_Repeat`): a repeat of it is
    #: checked without lexing it, and a run of repeats of a region that is all text at once
    last_recovered: _Repeat | None = None
    pos = lo
    check_at = pos + CHECK_CHARS
    while pos < hi:
        if pos >= check_at:
            check_at = pos + CHECK_CHARS
            check(pos, text)  # the render's CPU budget (see .budget)
        if last_shape is not None and starts(last_source, pos, hi):
            size = len(last_source)
            end = pos + size
            if pos != shape_end:  # one copy after other items (a prompt's "{{user}}" between words)
                append(_from_shape(last_shape, pos, end))
                pos = shape_end = end
                continue
            # a run of the same simple macro ("{{user}}" x 1,000): found at once, built in one loop
            run_end = _run_end(text, last_source, pos, hi)
            chunk = size * (CHECK_CHARS // size + 1)
            while pos < run_end:
                stop = min(run_end, pos + chunk)
                items.extend([_from_shape(last_shape, at, at + size) for at in range(pos, stop, size)])
                pos = stop
                check(pos, text)
            continue
        if last_recovered is not None and starts(last_recovered.source, pos, hi):
            run_end = last_recovered.repeats(text, pos, hi)
            if run_end > pos:
                if last_recovered.text_only:
                    _put_plain(items, pos, run_end)
                else:
                    size = len(last_recovered.source)
                    for at in range(pos, run_end, size):
                        if at >= check_at:
                            check_at = at + CHECK_CHARS
                            check(at, text)
                        _put_items(items, last_recovered.at(at))
                if last_recovered.recovered:
                    _add_range(recovered, pos, run_end)  # type: ignore[arg-type]
                pos = run_end
                continue
        # "{{" not followed by a third "{" is a START token (the plain rule's third branch)
        if not (starts("{{", pos, hi) and not starts("{", pos + 2, hi)):
            m = plain_re.match(text, pos, hi)
            if m is None:  # pragma: no cover - the plain mode accepts every character
                return items, pos, False
            if plain_table[m.lastindex][0] != T.START:  # type: ignore[index]
                end = m.end()
                if items and type(items[-1]) is Plain and items[-1][1] == pos:
                    items[-1] = _tnew(Plain, (items[-1][0], end))  # text runs are one item
                else:
                    append(_tnew(Plain, (pos, end)))
                pos = end
                continue
        sm = simple(text, pos, hi)
        if sm is None:
            lm = lone(text, pos, hi)
            if lm is not None:
                # the one token of the region, then the skipped whitespace (a gap) up to its end
                _put_plain(items, pos, pos + 2)
                pos = lm.end()
                continue
        else:
            end = sm.end()
            if end - pos > _SHAPE_CHARS:
                node = _simple_node(text, sm, _RICH_ARG_RE, pos)
            else:
                source = text[pos:end]
                shape = shapes.get(source, False)
                if shape is False:
                    node = _simple_node(text, sm, _RICH_ARG_RE, pos)
                    if len(shapes) < _SHAPES:
                        shapes[source] = _shape(node)
                elif shape is None:
                    node = _simple_node(text, sm, _RICH_ARG_RE, pos)
                else:
                    node = _from_shape(shape, pos, end)
                    last_source, last_shape, shape_end = source, shape, end
            append(node)
            pos = node[1]  # the node's own end: the next item starts with the same int
            continue
        dropped: list[int] | None = [] if recovered is not None else None
        region = tokenize_macro(text, pos, hi, max_nesting, dropped)
        if region is None:  # nesting past the limit, or (without ``recovered``) a dropped character
            return items, pos, False
        toks, end = region
        key: tuple[str, int] | None = None
        if recoveries and end - pos <= _SHAPE_CHARS:
            # a region's tokens follow from its text (the lexer starts it in plain text), and
            # its recovery from them and the type of the token after it (looked up only once a
            # region was recovered: a well-formed text pays nothing for it)
            key = (text[pos:end], _first_type(text, end, hi))
            relative = recoveries.get(key)
            if relative is not None:
                _put_items(items, _shifted(relative, pos))
                _add_range(recovered, pos, end)
                last_recovered = _repeatable(text, toks, key, end, hi, relative, 0, True)
                pos = end
                continue
        # a dropped character: as on the whole-document path, the recovery parser builds the
        # region (an argument spanning it keeps no items) and the parse is not clean
        parsed = lalr_items(text, toks) if not dropped else None
        if parsed is None:
            if recovered is None:
                return items, pos, (toks, end)
            parsed = _recover_region(text, toks, end, hi, dropped)
            if parsed is None:  # the whole-document path from here (it lexes the region itself
                return items, pos, (toks, end) if not dropped else False  # when it dropped any)
            _add_range(recovered, pos, end)
            if end - pos <= _SHAPE_CHARS and len(recoveries) < _SHAPES:
                if key is None:
                    key = (text[pos:end], _first_type(text, end, hi))
                relative = recoveries[key] = _shifted(parsed, -pos)
                last_recovered = _repeatable(text, toks, key, end, hi, relative, 0, True)
        elif end - pos <= _SHAPE_CHARS:
            # a well-formed region is parsed from its tokens alone (whatever follows it): from its
            # second copy on, a repeat of its text, ended the same way, has the same items (a
            # hostile text of one nested macro x 200,000 lexed and parsed each: ~8 us a copy)
            source = text[pos:end]
            if source == last_parsed:
                last_recovered = _repeatable(text, toks, (source, -1), end, hi, parsed, pos, False)
            last_parsed = source
        if parsed and type(parsed[0]) is Plain:
            _put_items(items, parsed)
        else:
            items.extend(parsed)  # (a region's items start with its macro, mostly)
        pos = end
    return items, hi, False


def _add_range(ranges: list[tuple[int, int]], start: int, end: int) -> None:
    """Append ``[start, end)`` to sorted, disjoint ``ranges``, joined to the last one it touches."""
    if ranges and ranges[-1][1] == start:
        ranges[-1] = (ranges[-1][0], end)
    else:
        ranges.append((start, end))


class _Repeat:
    """A region :func:`_region_prefix` lexed and parsed on its own, to check repeats of it cheaply.

    A region's tokens follow from its text and from what ended it: its own ``}}``, or a
    skipped rule, and then the (at most two) characters after it that did not match there
    (``tail``). A well-formed region's items follow from its tokens alone; a recovered one's
    also from the type of the token after it (``next_type``, ``-1`` for a well-formed one).
    """

    __slots__ = ("source", "tail", "next_type", "_items", "_base", "recovered", "_text_only", "_inner")

    def __init__(
        self, source: str, tail: str | None, next_type: int, items: list, base: int, recovered: bool
    ) -> None:
        self.source = source
        self.tail = tail
        self.next_type = next_type
        #: the region's items, whose offsets are ``base`` ahead of relative ones (moved to
        #: relative offsets at the first repeat: most regions are not repeated)
        self._items = items
        self._base = base
        self.recovered = recovered
        #: the region is text and nothing else ("{{.", "{{!}}x"): one item, so a run of repeats is
        #: one item too (both decided at the first repeat: most regions are not repeated)
        self._text_only: bool | None = None
        #: whether a repeat followed by another repeat passes the end checks (a run's inner ones)
        self._inner: bool | None = None

    @property
    def text_only(self) -> bool:
        """Whether the region's items are one text item spanning it (see :meth:`repeats`)."""
        text_only = self._text_only
        if text_only is None:
            items, base = self._items, self._base
            size = len(self.source)
            text_only = self._text_only = len(items) == 1 and type(items[0]) is Plain and items[0] == (base, base + size)
        return text_only

    def at(self, pos: int) -> list:
        """The region's items for a repeat starting at ``pos``."""
        if self._base:
            self._items = _shifted(self._items, -self._base)
            self._base = 0
        return _shifted(self._items, pos)

    def _ends_ok(self, text: str, end: int, hi: int) -> bool:
        tail = self.tail
        if tail is not None and not text.startswith(tail, end, hi):
            return False
        return self.next_type < 0 or _first_type(text, end, hi) == self.next_type

    def repeats(self, text: str, pos: int, hi: int) -> int:
        """Where the run of repeats of the region starting at ``pos`` ends (``pos`` when none
        passes its end checks). Each repeat but the last is followed by another, so only the
        last one's end is checked against the text; the run is found by doubling comparisons."""
        source = self.source
        size = len(source)
        inner = self._inner
        if inner is None:
            inner = self._inner = self._ends_ok(source + source[:3], size, size + 3)
        if not inner:
            return pos + size if self._ends_ok(text, pos + size, hi) else pos
        end = _run_end(text, source, pos, hi)
        if not self._ends_ok(text, end, hi):
            end -= size  # the last repeat does not end as the region did; the one before it does
        return end


#: the longest block :func:`_run_end` compares at once
_RUN_BLOCK = 1 << 16


def _run_end(text: str, unit: str, pos: int, hi: int) -> int:
    """The end of the run of ``unit`` repeated from ``pos`` (which starts with it) in ``text[:hi]``.

    Blocks of repeats double while they match and halve when one does not: a run of ``n``
    repeats costs ``O(log n)`` comparisons (C speed) instead of ``n`` Python steps.
    """
    block = unit
    while True:
        if text.startswith(block, pos, hi):
            pos += len(block)
            if len(block) < _RUN_BLOCK:
                block += block
        elif len(block) == len(unit):
            return pos
        else:
            block = block[: len(block) // len(unit) // 2 * len(unit)]


def _put_plain(items: list, start: int, end: int) -> None:
    """Append text ``[start, end)`` to ``items``, joined to a text item ending at ``start``.

    Contiguous text is one :class:`Plain` on both parse paths: the evaluator copies it the same
    either way, and a hostile run of flattened macros ("{{.1}}" x 350,000, ~3 text tokens each)
    no longer holds an item per token (~160 MB).
    """
    if items:
        last = items[-1]
        if type(last) is Plain and last[1] == start:
            items[-1] = _tnew(Plain, (last[0], end))
            return
    items.append(_tnew(Plain, (start, end)))


def _put_items(items: list, more: list) -> None:
    """``items.extend(more)`` for coalesced ``more``, joining the text where they meet."""
    if more and items and type(more[0]) is Plain:
        last = items[-1]
        if type(last) is Plain and last[1] == more[0][0]:
            items[-1] = _tnew(Plain, (last[0], more[0][1]))
            items.extend(more[1:])
            return
    items.extend(more)


def _coalesced(items: list) -> list:
    """``items`` (in order) with contiguous text joined (see :func:`_put_plain`)."""
    out: list = []
    for item in items:
        if type(item) is Plain and out:
            last = out[-1]
            if type(last) is Plain and last[1] == item[0]:
                out[-1] = _tnew(Plain, (last[0], item[1]))
                continue
        out.append(item)
    return out


def _repeatable(
    text: str, toks: list[Tok], key: tuple[str, int], end: int, hi: int, items: list, base: int, recovered: bool
) -> _Repeat | None:
    """:func:`_region_prefix`'s ``last_recovered`` for a region (its ``items`` are ``base`` ahead of
    relative offsets), or ``None`` when its end cannot be checked cheaply (it ends at the input's end)."""
    if toks and toks[-1][0] == T.END and toks[-1][2] == end:
        # its "}}" ended it: its text alone decides
        return _Repeat(key[0], None, key[1], items, base, recovered)
    if end + 2 > hi:
        return None
    # a skipped rule ended it: what did not match there (at most "}}") is part of the check
    return _Repeat(key[0], text[end : end + 2], key[1], items, base, recovered)


def _shifted(items: Sequence[Any], delta: int) -> list:
    """``items`` with every offset moved by ``delta`` (nodes, arguments, spans, parts)."""
    return [_shift(item, delta) for item in items]


def _shift(value: Any, d: int) -> Any:
    kind = type(value)
    if kind is Plain:
        return _tnew(Plain, (value[0] + d, value[1] + d))
    if kind is tuple:  # a span, or a token in an incomplete macro's parts
        return (value[0] + d, value[1] + d)
    if kind is MacroNode:
        var = value[6]
        if var is not None and (var.value_span is not None or var.value_macros):
            var = VarNode(
                var.scope, var.name, var.op, None if var.value_span is None else _shift(var.value_span, d),
                tuple(_shift(m, d) for m in var.value_macros),
            )  # (one without a value holds no offset: it is shared, frozen)
        args, parts = value[5], value[7]
        return _tnew(MacroNode, (
            value[0] + d, value[1] + d, value[2], value[3], value[4],
            tuple([_shift(a, d) for a in args]) if args else (), var,
            tuple([_shift(p, d) for p in parts]) if parts else (), value[8], value[9],
        ))
    if kind is ArgNode:
        span, items = value
        return _tnew(ArgNode, (
            None if span is None else _shift(span, d), None if items is None else tuple(_shift(i, d) for i in items)
        ))
    if kind is _Group:
        return _Group(tuple(_shift(p, d) for p in value.parts))
    raise TypeError(f"cannot shift {kind.__name__}")  # pragma: no cover - every node kind is above


def _first_type(text: str, pos: int, hi: int) -> int:
    """The type of the token the lexer makes first at ``pos`` in plain text (``EOF`` at ``hi``)."""
    if pos >= hi:
        return T.EOF
    if not text.startswith("{{", pos, hi):
        return T.PLAINTEXT  # a run of text, or a lone "{"
    return T.OPENBRACE if text.startswith("{", pos + 2, hi) else T.START


def _recover_region(text: str, toks: list[Tok], end: int, hi: int, dropped: list[int] | None = None) -> list | None:
    """The whole-document path's items for one malformed top-level region, or ``None``.

    The region's tokens are what the whole-document lexer makes there (the lexer is in plain
    text before and after it). SillyTavern's parser is at the start of a document item before
    it; if its recovery reads no further than the type of the next region's first token
    (which re-syncs and inserted ``}}`` may depend on) and no macro swallows the rest of the
    document, it is back at the start of a document item after the region, and what it built
    is what the whole-document parse builds: the regions after it parse on their own. ``None``
    when it read further (the caller then runs the whole-document path from the region).
    """
    parser = _Parser(text, toks, end, dropped, next_type=_first_type(text, end, hi))
    raw = parser.document()
    if parser.spilled:
        return None
    items = _flattened(raw)
    before = items[:]
    items.sort(key=lambda i: (i.start, i.end))
    return _coalesced(items) if items != before else items


def _flattened(raw: list) -> list:
    """The recovery parser's items with each incomplete macro flattened (see :func:`_flatten`)."""
    items: list = []
    for item in raw:
        if type(item) is MacroNode and not item.complete:
            _flatten(item, items)
        elif type(item) is Plain and items and type(items[-1]) is Plain and items[-1][1] == item[0]:
            items[-1] = _tnew(Plain, (items[-1][0], item[1]))  # contiguous text is one item
        else:
            items.append(item)
    return items


def document_items(
    text: str, lo: int = 0, hi: int | None = None, max_nesting: int = MAX_NESTING, *, shortcuts: Shortcuts = DEFAULT
) -> tuple[list, list[Diagnostic], bool]:
    """The top-level items of ``text[lo:hi]`` in order: :class:`Plain` spans and complete macros.

    Incomplete macros are flattened; tokens no rule accepted are not items (the caller copies
    the gaps between items verbatim, as SillyTavern does). Offsets are absolute in ``text``.
    The flag is true when nothing needed recovery (then argument items can be trusted).
    """
    items, diagnostics, clean, _untrusted = document_parse(text, lo, hi, max_nesting, shortcuts=shortcuts)
    return items, diagnostics, clean


def document_parse(
    text: str, lo: int = 0, hi: int | None = None, max_nesting: int = MAX_NESTING, *, shortcuts: Shortcuts = DEFAULT
) -> tuple[list, list[Diagnostic], bool, tuple[tuple[int, int], ...]]:
    """:func:`document_items`, and the ranges of ``text`` where the parse needed recovery.

    Outside those ranges the items are what a parse of any span made of whole items finds (the
    lexer and the parser are at the start of a document item between two top-level items), so
    the evaluator can hand a scoped macro's body its items instead of re-parsing its text. The
    ranges are the regions recovered on their own and, when the whole-document path ran and
    needed recovery (or cut too-deep regions out), everything from where it started; empty
    when the flag is true. ``shortcuts.regions`` off: the whole-document path only (the
    region-by-region parse must equal it).
    """
    if hi is None:
        hi = len(text)
    prefix: list = []
    rejected = False
    recovered: list[tuple[int, int]] = []
    if shortcuts.regions:
        prefix, stop, rejected = _region_prefix(text, lo, hi, max_nesting, recovered)
        if stop == hi:
            return prefix, [], not recovered, tuple(recovered)
        lo = stop  # the prefix is the whole-document parse up to there (see _region_prefix)
    lex_errors: list[int] = []
    if rejected:
        # the rejected region was lexed completely (no dropped character, within the nesting
        # limit) and the lexer is back in plain text after it: its tokens are the ones
        # ``tokenize_limited`` would make first, so lexing resumes at its end
        head, resume = rejected  # type: ignore[misc]
        toks, holes = tokenize_limited(text, resume, hi, lex_errors, max_nesting)
        toks = head + toks
    else:
        toks, holes = tokenize_limited(text, lo, hi, lex_errors, max_nesting)
    diagnostics: list[Diagnostic] = []
    for start, end in holes:
        diagnostics.append(
            Diagnostic(
                "MACRO_NESTING_LIMIT",
                f"macros nested deeper than {max_nesting} levels; left as written",
                Span(start, end),
            )
        )
    # a dropped character: the fallback builds the nodes, and an argument holding one keeps no
    # items (its text re-lexed on its own may not drop it), so the evaluator re-parses it
    lalr = None if (rejected and not holes) or lex_errors else lalr_items(text, toks)
    if lalr is not None:  # well-formed: the LALR grammar's parse
        raw_items = lalr
        clean = not holes
    else:  # a malformed macro somewhere: SillyTavern's recovery decides what stays text
        parser = _Parser(text, toks, hi, lex_errors)
        raw_items = parser.document()
        clean = parser.anomalies == 0 and not lex_errors and not holes
    items = _flattened(raw_items)
    for start, end in holes:
        items.append(Plain(start, end))
    if holes or not clean:
        before = items[:]
        items.sort(key=lambda i: (i.start, i.end))
        if holes or items != before:
            items = _coalesced(items)  # text that met only once in order
        _add_range(recovered, lo, hi)
    clean = not recovered  # nothing here needed recovery, nor did a region before
    if prefix:
        _put_items(prefix, items)
        return prefix, diagnostics, clean, tuple(recovered)
    return items, diagnostics, clean, tuple(recovered)


def parse_macros(text: str) -> tuple[Plain | MacroNode, ...]:
    """The top-level items of ``text``: verbatim spans and complete macros, with offsets."""
    return tuple(document_items(text)[0])


# ---- the LALR path (grammars/macros.lark) --------------------------------------------------
#
# Lark compiles the grammar into its LALR(1) parse table; the loop below drives that table over
# the mode lexer's tokens. It is Lark's own shift/reduce algorithm without its per-token
# ``Token`` objects and tree callbacks (the table is the parser; those wrappers tripled the
# cost), and it builds our frozen nodes directly on each reduction: no tree, no recursion.

_TYPE_NAMES = {value: name for name, value in vars(T).items() if isinstance(value, int) and name != "EOF"}


class _Splice(list):
    """Children of an inlined helper rule (``_item``, ``__arg_star_0``...), spliced into the parent."""


def _children(values: list) -> list:
    out: list = []
    for v in values:
        if type(v) is _Splice:
            out.extend(v)
        else:
            out.append(v)
    return out


def _span(items: list) -> tuple[int, int] | None:
    if not items:
        return None
    return (items[0][1] if type(items[0]) is Tok else items[0].start, items[-1][2] if type(items[-1]) is Tok else items[-1].end)


class _Reducer:
    """One parse's reduction actions (they need the text for names and glued braces)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def _arg(self, items: list) -> ArgNode:
        span = _span(items)
        if span is None:
            return ArgNode(None, ())
        text = self.text
        out: list = []
        cursor = span[0]
        for part in items:
            if type(part) is MacroNode:
                if part.start > span[0] and text[part.start - 1] == "{":
                    return ArgNode(span, None)
                if part.start > cursor:
                    out.append(_plain(cursor, part.start))
                out.append(part)
                cursor = part.end
        if cursor < span[1]:
            out.append(_plain(cursor, span[1]))
        return ArgNode(span, tuple(out))

    def start(self, c: list) -> list:
        return _children(c)

    def text_(self, c: list) -> Plain:
        return _plain(c[0][1], c[0][2])

    def flags(self, c: list) -> str:
        text = self.text
        return "".join(text[t[1] : t[2]] for t in _children(c))

    def seq(self, c: list) -> list:
        return _children(c)

    def args_dcolon(self, c: list) -> list[ArgNode]:
        return [self._arg(part) for part in _children(c) if type(part) is list]

    def args_colon(self, c: list) -> list[ArgNode]:
        return [self._arg(c[1])]

    def args_space(self, c: list) -> list[ArgNode]:
        return [self._arg(_children(c))]

    def name_only(self, c: list) -> tuple:
        return (self.text[c[0][1] : c[0][2]], [], None)

    def name_args(self, c: list) -> tuple:
        return (self.text[c[0][1] : c[0][2]], c[1], None)

    def _var(self, c: list, op: str | None, value: list | None) -> tuple:
        text = self.text
        scope = text[c[0][1] : c[0][2]]
        name = text[c[1][1] : c[1][2]]
        if value is None:
            return ("", [], VarNode(scope, name, op, None, ()))
        macros = tuple(v for v in value if type(v) is MacroNode)
        return ("", [], VarNode(scope, name, op, _span(value), macros))

    def var_get(self, c: list) -> tuple:
        return self._var(c, None, None)

    def var_step(self, c: list) -> tuple:
        return self._var(c, self.text[c[2][1] : c[2][2]], None)

    def var_op(self, c: list) -> tuple:
        return self._var(c, self.text[c[2][1] : c[2][2]], c[3])

    def macro(self, c: list) -> MacroNode:
        start_tok, flags, body, end_tok = c
        name, args, var = body
        return _macro_node(start_tok[1], end_tok[2], flags, name, tuple(args), var)


_RULE_ACTIONS = {
    "start": "start",
    "text": "text_",
    "macro": "macro",
    "flags": "flags",
    "arg": "seq",
    "argc": "seq",
    "value": "seq",
    "args_dcolon": "args_dcolon",
    "args_colon": "args_colon",
    "args_space": "args_space",
    "name_only": "name_only",
    "name_args": "name_args",
    "var_get": "var_get",
    "var_step": "var_step",
    "var_op": "var_op",
}


@lru_cache(maxsize=1)
def _table() -> tuple:
    """Lark's LALR(1) table for ``grammars/macros.lark``, keyed by our token ints.

    Each state maps a token type (``-1`` for end of input) or a rule name (for gotos) to
    ``(is_shift, next state or rule number)``; rule number -> ``(action name, size, rule name)``.

    Building it with Lark costs a fresh process about as much as a whole warm assembly, so the
    table Lark builds is kept in :mod:`.lalr_table` with the digest of the grammar it came from;
    when the grammar file no longer has that digest, Lark builds it here as before (a test keeps
    the stored table equal to Lark's).
    """
    import hashlib

    grammar = (resources.files("tavernbox.grammars") / "macros.lark").read_text(encoding="utf-8")
    from . import lalr_table

    if lalr_table.GRAMMAR_DIGEST == hashlib.sha256(grammar.encode("utf-8")).hexdigest():
        return lalr_table.TABLE
    return build_table(grammar)


def build_table(grammar: str) -> tuple:
    """:func:`_table` computed by Lark from the grammar's text."""
    from lark import Lark
    from lark.parsers.lalr_analysis import Shift

    lark = Lark(grammar, parser="lalr", lexer="basic")
    parse_table = lark.parser.parser.parser.parse_table
    ints = {name: value for value, name in _TYPE_NAMES.items()}
    ints["$END"] = -1
    states: dict = {}
    rule_ids: dict = {}
    rules: list = []
    for number, row in parse_table.states.items():
        out: dict = {}
        for key, (action, arg) in row.items():
            # plain ints/strs as keys and rule numbers as values: Lark's Token and Rule objects
            # hash and compare in Python, which dominated the loop
            plain_key = ints.get(key, str(key))
            if action is Shift:
                out[plain_key] = (True, arg)
                continue
            if arg not in rule_ids:
                rule_ids[arg] = len(rules)
                name = arg.alias or arg.origin.name
                if name.startswith("_"):
                    act = None  # an inlined helper rule: splice its children into the parent
                elif arg.options.expand1:
                    act = ""  # a ?rule with one child passes it through
                else:
                    act = _RULE_ACTIONS[name]
                rules.append((act, len(arg.expansion), str(arg.origin.name)))
            out[plain_key] = (False, rule_ids[arg])
        states[number] = out
    return states, parse_table.start_states["start"], parse_table.end_states["start"], rules


#: reduction kinds of the driver
_SPLICE, _PASS, _CALL = 0, 1, 2


@lru_cache(maxsize=1)
def _driver_table() -> tuple:
    """:func:`_table` in the shape the driver loop reads fastest.

    ``actions[state]`` maps a token type (``-1``: end of input) to an int: ``>= 0`` shifts to
    that state, ``-1 - r`` reduces by rule ``r``. ``rules[r]`` is ``(kind, action name, size,
    goto)`` with ``goto`` the state -> next state map of the rule's origin, so a reduction does
    not look the origin up in the uncovered state's row.
    """
    states, start_state, end_state, rules = _table()
    actions: list[dict[int, int]] = [{} for _ in range(max(states) + 1)]
    for number, row in states.items():
        actions[number] = {
            key: (arg if is_shift else -1 - arg) for key, (is_shift, arg) in row.items() if type(key) is int
        }
    compiled = []
    for act, size, origin in rules:
        goto = {number: row[origin][1] for number, row in states.items() if origin in row}
        kind = _SPLICE if act is None else (_PASS if act == "" else _CALL)
        compiled.append((kind, act, size, goto))
    return actions, start_state, end_state, compiled


class _Local(threading.local):
    """A per-thread reducer with its bound actions (the driver loop is not re-entrant)."""

    def __init__(self) -> None:
        _, _, _, rules = _driver_table()
        self.reducer = _Reducer("")
        self.rules = [
            (kind, getattr(self.reducer, act) if kind == _CALL else None, size, goto) for kind, act, size, goto in rules
        ]


_local: _Local | None = None


def lalr_items(text: str, toks: list[Tok]) -> list | None:
    """Parse a token stream with the LALR grammar; ``None`` when it holds a malformed macro.

    Lark's shift/reduce algorithm over its own table. Helper rules (``_item``, ``__x_star_n``)
    splice their children into the parent; a one-child helper passes the child up as is
    (every consumer treats a lone child and a one-element splice alike), which saves a list
    per document item.
    """
    global _local
    actions, state, end_state, _ = _driver_table()
    if _local is None:
        _local = _Local()
    local = _local
    local.reducer.text = text
    rules = local.rules
    state_stack = [state]
    push_state = state_stack.append
    value_stack: list = []
    push_value = value_stack.append
    n = len(toks)
    i = 0
    tok = toks[0] if n else None
    key = tok[0] if n else -1
    check_at = (tok[1] if n else 0) + CHECK_CHARS  # type: ignore[index]
    while True:
        act = actions[state].get(key)
        if act is None:
            return None
        if act >= 0:  # shift
            if key >= 0 and tok[1] >= check_at:  # type: ignore[index]
                check_at = tok[1] + CHECK_CHARS  # type: ignore[index]
                check(tok[1], text)  # type: ignore[index]  # the render's CPU budget (see .budget)
            state = act
            push_state(state)
            push_value(tok)
            i += 1
            if i < n:
                tok = toks[i]
                key = tok[0]
            else:
                tok = None
                key = -1
            continue
        kind, fn, size, goto = rules[-1 - act]
        if kind == _SPLICE:
            if size == 1:
                value = value_stack[-1]  # passes up as is (a splice stays one)
                del state_stack[-1]
            elif size == 0:
                value = _Splice()
                push_value(value)
            else:
                children = value_stack[-size:]
                del value_stack[-size:]
                del state_stack[-size:]
                first = children[0]
                if type(first) is _Splice:
                    value = first
                else:
                    value = _Splice()
                    value.append(first)
                for child in children[1:]:
                    if type(child) is _Splice:
                        value.extend(child)
                    else:
                        value.append(child)
                push_value(value)
        elif kind == _PASS:
            del state_stack[-1]  # the single child stays on the value stack
        else:
            if size:
                children = value_stack[-size:]
                del value_stack[-size:]
                del state_stack[-size:]
                push_value(fn(children))
            else:
                push_value(fn([]))
        state = goto[state_stack[-1]]
        push_state(state)
        if key == -1 and state == end_state:
            return value_stack[-1]


def validate_macro(source: str) -> bool:
    """Whether ``source`` is exactly one well-formed macro by the LALR grammar."""
    toks = tokenize(source)
    items = lalr_items(source, toks)
    return items is not None and len(items) == 1 and isinstance(items[0], MacroNode)
