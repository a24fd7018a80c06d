"""The region fast path of the macro parser: a text parsed one top-level region at a time.

The document rule is a sequence of independent items, and the lexer is back in plain mode with
an empty stack after each top-level macro, so a text can be cut there: plain text comes from
the plain-mode rule (the lexer's own regex), a simple macro from one regex match, any other
region from the lexer and the LALR table on that region alone, and a malformed region from the
recovering parser on that region alone. The items are those of the whole-document parse
(:func:`.parser.document_parse` with ``Shortcuts(regions=False)``), as
``tests/test_macros_regions.py`` and ``tests/test_macros_region_resume.py`` prove.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .budget import CHECK_CHARS, CHECK_EVERY, check
from .lexer import PLAIN, WS_CHARS, T, Tok, _MODES, tokenize_macro
from .lalr import lalr_items
from .nodes import ArgNode, MacroNode, Plain, VarNode, _macro_node, _plain, _tnew
from .recovery import _Group, _Parser, _flattened

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
                check(p, text)  # the render's CPU budget (see .budget): one macro may hold 700,000 arguments
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

    The document rule is a sequence of independent items, and the lexer is back in plain mode
    with an empty stack after each top-level macro, so the document is cut there: each region is
    lexed and parsed on its own (:meth:`_RegionScanner.region`), and the regions most texts are
    made of are read without the lexer (:class:`_RegionScanner`'s fast paths). The items are
    those of the whole-document parse.

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
    return _RegionScanner(text, lo, hi, max_nesting, recovered).scan()


class _RegionScanner:
    """:func:`_region_prefix`'s walk over ``text[lo:hi]``: at each region, the fast paths in turn
    (a repeat of the last simple macro or of the last region parsed on its own, plain text, a
    simple macro), else the plain path, :meth:`region`. Each fast path gives the items the plain
    path gives for the same region (``tests/test_macros_regions.py``,
    ``tests/test_macros_region_resume.py``); what each saves is measured by
    ``benchmarks/bench_macros.py`` (the parser paths)."""

    __slots__ = (
        "check_at", "hi", "items", "last_parsed", "last_recovered", "last_shape", "last_source", "max_nesting",
        "pos", "recovered", "recoveries", "shape_end", "shapes", "text",
    )

    def __init__(self, text: str, lo: int, hi: int, max_nesting: int, recovered: list[tuple[int, int]] | None) -> None:
        self.text = text
        self.hi = hi
        self.max_nesting = max_nesting
        #: ``(start, end)`` of the regions recovered on their own; ``None``: stop at the first one
        self.recovered = recovered
        self.items: list = []
        self.pos = lo
        #: where the render's CPU budget is checked next (see .budget)
        self.check_at = lo + CHECK_CHARS
        #: source of a simple macro -> its shape (see _shape), or None when it has none
        self.shapes: dict[str, tuple | None] = {}
        #: the source and shape of the last simple macro built from a shape: a text repeating it
        #: is checked with one ``startswith`` (the match is decided by the characters it spans)
        self.last_source = ""
        self.last_shape: tuple | None = None
        #: where the last node built from ``last_shape`` ended: a copy starting there may begin a run
        self.shape_end = -1
        #: the source of the last well-formed region the LALR table parsed
        self.last_parsed = ""
        #: malformed regions recovered so far, by source and the type of the token after them:
        #: their items relative to the region's start (a hostile text may repeat one)
        self.recoveries: dict[tuple[str, int], list] = {}
        #: the last region lexed and parsed on its own (see :class:`_Repeat`): a repeat of it is
        #: checked without lexing it, and a run of repeats of a region that is all text at once
        self.last_recovered: _Repeat | None = None

    def scan(self) -> tuple[list, int, tuple[list[Tok], int] | bool]:
        """The items as far as the region path goes, where it stopped, and why (see
        :func:`_region_prefix`)."""
        text, hi = self.text, self.hi
        starts = text.startswith
        while self.pos < hi:
            pos = self.pos
            if pos >= self.check_at:
                self.check_at = pos + CHECK_CHARS
                check(pos, text)  # the render's CPU budget (see .budget)
            if self.last_shape is not None and starts(self.last_source, pos, hi):
                self.shape_repeat()
                continue
            last_recovered = self.last_recovered
            if last_recovered is not None and starts(last_recovered.source, pos, hi) and self.region_repeat():
                continue
            # "{{" not followed by a third "{" is a START token (the plain rule's third branch)
            if not (starts("{{", pos, hi) and not starts("{", pos + 2, hi)) and self.plain_text():
                continue
            if self.simple_macro():
                continue
            stop = self.region()
            if stop is not None:
                return self.items, self.pos, stop
        return self.items, hi, False

    # ---- the plain path ---------------------------------------------------------------------
    def region(self) -> tuple[list[Tok], int] | bool | None:
        """One region lexed and parsed on its own (the LALR table, or SillyTavern's recovery when
        ``recovered`` is a list); ``None`` when done, else why the region path stops here."""
        text, hi, pos, recovered = self.text, self.hi, self.pos, self.recovered
        dropped: list[int] | None = [] if recovered is not None else None
        region = tokenize_macro(text, pos, hi, self.max_nesting, dropped)
        if region is None:  # nesting past the limit, or (without ``recovered``) a dropped character
            return False
        toks, end = region
        key: tuple[str, int] | None = None
        if self.recoveries and end - pos <= _SHAPE_CHARS:
            # a region's tokens follow from its text (the lexer starts it in plain text), and
            # its recovery from them and the type of the token after it (looked up only once a
            # region was recovered: a well-formed text pays nothing for it)
            key = (text[pos:end], _first_type(text, end, hi))
            relative = self.recoveries.get(key)
            if relative is not None:
                _put_items(self.items, _shifted(relative, pos))
                _add_range(recovered, pos, end)  # type: ignore[arg-type]
                self.last_recovered = _repeatable(text, toks, key, end, hi, relative, 0, True)
                self.pos = end
                return None
        # a dropped character: as on the whole-document path, the recovery parser builds the
        # region (an argument spanning it keeps no items) and the parse is not clean
        parsed = lalr_items(text, toks) if not dropped else None
        if parsed is None:
            if recovered is None:
                return (toks, end)
            parsed = _recover_region(text, toks, end, hi, dropped)
            if parsed is None:  # the whole-document path from here (it lexes the region itself
                return (toks, end) if not dropped else False  # when it dropped any)
            _add_range(recovered, pos, end)
            if end - pos <= _SHAPE_CHARS and len(self.recoveries) < _SHAPES:
                if key is None:
                    key = (text[pos:end], _first_type(text, end, hi))
                relative = self.recoveries[key] = _shifted(parsed, -pos)
                self.last_recovered = _repeatable(text, toks, key, end, hi, relative, 0, True)
        elif end - pos <= _SHAPE_CHARS:
            # a well-formed region is parsed from its tokens alone (whatever follows it): from its
            # second copy on, a repeat of its text, ended the same way, has the same items
            source = text[pos:end]
            if source == self.last_parsed:
                self.last_recovered = _repeatable(text, toks, (source, -1), end, hi, parsed, pos, False)
            self.last_parsed = source
        if parsed and type(parsed[0]) is Plain:
            _put_items(self.items, parsed)
        else:
            self.items.extend(parsed)  # (a region's items start with its macro, mostly)
        self.pos = end
        return None

    # ---- the fast paths ---------------------------------------------------------------------
    def shape_repeat(self) -> None:
        """A copy of the last simple macro built from a shape (its source starts here): one copy
        after other items (a prompt's "{{user}}" between words), or a run of copies found at
        once and built in one loop ("{{user}}" x 1,000)."""
        text, pos, shape = self.text, self.pos, self.last_shape
        assert shape is not None
        size = len(self.last_source)
        end = pos + size
        if pos != self.shape_end:
            self.items.append(_from_shape(shape, pos, end))
            self.pos = self.shape_end = end
            return
        run_end = _run_end(text, self.last_source, pos, self.hi)
        chunk = size * (CHECK_CHARS // size + 1)
        while pos < run_end:
            stop = min(run_end, pos + chunk)
            self.items.extend([_from_shape(shape, at, at + size) for at in range(pos, stop, size)])
            pos = stop
            check(pos, text)
        self.pos = pos

    def region_repeat(self) -> bool:
        """Repeats of the last region parsed on its own (its source starts here), without lexing
        them; ``False`` when the text after them differs (the plain path decides then)."""
        last = self.last_recovered
        assert last is not None
        text, pos = self.text, self.pos
        run_end = last.repeats(text, pos, self.hi)
        if run_end <= pos:
            return False
        if last.text_only:
            _put_plain(self.items, pos, run_end)
        else:
            size = len(last.source)
            for at in range(pos, run_end, size):
                if at >= self.check_at:
                    self.check_at = at + CHECK_CHARS
                    check(at, text)
                _put_items(self.items, last.at(at))
        if last.recovered:
            _add_range(self.recovered, pos, run_end)  # type: ignore[arg-type]
        self.pos = run_end
        return True

    def plain_text(self) -> bool:
        """Plain text up to the next token that is not text, by the plain mode's own rule (a
        run of text is one item); ``False`` at a START token."""
        plain_re, plain_table = _MODES[PLAIN]
        pos = self.pos
        m = plain_re.match(self.text, pos, self.hi)
        if m is None or plain_table[m.lastindex][0] == T.START:  # type: ignore[index]
            return False  # (the plain mode accepts every character: a match is always found)
        end = m.end()
        items = self.items
        if items and type(items[-1]) is Plain and items[-1][1] == pos:
            items[-1] = _tnew(Plain, (items[-1][0], end))  # text runs are one item
        else:
            items.append(_tnew(Plain, (pos, end)))
        self.pos = end
        return True

    def simple_macro(self) -> bool:
        """A simple macro read off one match of :data:`_SIMPLE_MACRO` (built from the shape of an
        earlier copy of the same source, when it has one), or a lone ``{{`` the lexer skips;
        ``False`` otherwise (the plain path decides)."""
        text, pos, hi = self.text, self.pos, self.hi
        sm = _SIMPLE_MACRO.match(text, pos, hi)
        if sm is None:
            lm = _LONE_START.match(text, pos, hi)
            if lm is None:
                return False
            # the one token of the region, then the skipped whitespace (a gap) up to its end
            _put_plain(self.items, pos, pos + 2)
            self.pos = lm.end()
            return True
        end = sm.end()
        if end - pos > _SHAPE_CHARS:
            node = _simple_node(text, sm, _RICH_ARG_RE, pos)
        else:
            source = text[pos:end]
            shapes = self.shapes
            shape = shapes.get(source, False)
            if shape is False:
                node = _simple_node(text, sm, _RICH_ARG_RE, pos)
                if len(shapes) < _SHAPES:
                    shapes[source] = _shape(node)
            elif shape is None:
                node = _simple_node(text, sm, _RICH_ARG_RE, pos)
            else:
                node = _from_shape(shape, pos, end)
                self.last_source, self.last_shape, self.shape_end = source, shape, end
        self.items.append(node)
        self.pos = node[1]  # the node's own end: the next item starts with the same int
        return True


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
    holds one item, not one per token.
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


