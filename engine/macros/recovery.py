"""SillyTavern's recovering parser: a token stream the grammar rejects, parsed as Chevrotain does.

A malformed macro is where SillyTavern's parser *recovers* (it inserts or deletes single tokens,
re-synchronises on the follow sets of the rules being parsed, skips junk between document
items) and its evaluator shows the recovered fragments as text; cards depend on the result
(``{{user{{pick::a}}`` stays as written, an unterminated ``{{`` before a valid macro leaves that
macro working). :class:`_Parser` reproduces that recovery exactly. Its recursion follows brace
nesting only, which :data:`.parser.MAX_NESTING` caps before parsing starts. Tests prove that the
grammar (:mod:`.lalr`) accepts exactly the streams this parser reads without any recovery, with
identical nodes.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from .budget import CHECK_CHARS, check
from .lexer import T, Tok
from .nodes import ArgNode, MacroNode, Plain, VarNode, _macro_node, _tnew

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
