"""SillyTavern 1.18's multi-mode macro lexer, reproduced token for token.

Which ``}}`` closes which ``{{`` is decided by the lexer, not the grammar: inside a macro the
text after a name, a ``|`` or a variable operator is read in different *modes*, and a character
no rule of the current mode accepts is silently dropped (Chevrotain's lexer recovery). That is
why ``{{user{{pick::a}}`` reads as the macro ``user`` with the argument ``a``, and why a ``|``
swallows the next ``{{`` in SillyTavern. Reproducing the modes is the only way to agree with it
on malformed text, so this module is a mode-stack lexer with the same rules in the same order.

Each mode is one compiled alternation whose branches are tried left to right (Python's regex
alternation has exactly the first-match semantics of Chevrotain's ordered token list), so a
token costs one ``match`` call and the whole pass is linear. Skipped tokens (whitespace and the
zero-width mode switches) are not emitted.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .budget import CHECK_CHARS, check

__all__ = ["Tok", "tokenize", "tokenize_limited", "tokenize_macro", "T", "WS_CHARS"]

# JavaScript's \s
WS_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS = r"[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_IDENT = r"[a-zA-Z][a-zA-Z0-9_-]*"
_VARIDENT = r"[a-zA-Z](?:[a-zA-Z0-9_-]*[a-zA-Z0-9_])?"
_END_OF_IDENT = rf"(?:{_WS}+|(?=:{{1,2}})|(?=[|}}]))"


class T:
    """Token types (small ints: compared on every parser step)."""

    EOF = 0
    PLAINTEXT = 1
    OPENBRACE = 2
    START = 3
    END = 4
    FLAG = 5
    FILTERFLAG = 6
    DSLASH = 7
    MIDENT = 8  # the macro name
    DCOLON = 9
    COLON = 10
    EQUALS = 11
    QUOTE = 12
    IDENT = 13
    UNKNOWN = 14
    ESCPIPE = 15
    PIPE = 16
    FIDENT = 17
    LOCAL = 18
    GLOBAL = 19
    VARIDENT = 20
    INC = 21
    DEC = 22
    VALOP = 23


class Tok(NamedTuple):
    type: int
    start: int
    end: int
    depth: int = 0  # open macros after this token (the lexer's count of macro modes)


# mode ids
PLAIN, DEF, IDENT_END, ARGS, FILTER, FILTER_END, VAR_ID, VAR_AFTER, VAR_VALUE = range(9)

# Each rule: (group name, pattern, token type or None for skipped, action)
# actions: "" none, "push:M", "pop", "pop+push:M"
_RULES: dict[int, list[tuple[str, str, int | None, str]]] = {
    PLAIN: [
        # possessive runs: one step per run of non-braces instead of one per character
        ("plaintext", r"(?:[^{]++|\{(?!\{))++", T.PLAINTEXT, ""),
        ("openbrace", r"\{(?=\{\{)", T.OPENBRACE, ""),
        ("start", r"\{\{", T.START, f"push:{DEF}"),
    ],
    DEF: [
        ("end", r"\}\}", T.END, "pop"),
        ("dslash", r"//", T.DSLASH, f"push:{ARGS}"),
        ("local", r"\.", T.LOCAL, f"push:{VAR_ID}"),
        ("glob", r"\$", T.GLOBAL, f"push:{VAR_ID}"),
        ("flag", r"[!?~#/]", T.FLAG, ""),
        ("filterflag", r">", T.FILTERFLAG, ""),
        ("ws", rf"{_WS}+", None, ""),
        ("mident", _IDENT, T.MIDENT, f"push:{IDENT_END}"),
        ("popper", r"", None, "pop"),
    ],
    IDENT_END: [
        ("beforeend", r"(?=\}\})", None, "pop"),
        ("endofident", _END_OF_IDENT, None, f"pop+push:{ARGS}"),
    ],
    ARGS: [
        ("start", r"\{\{", T.START, f"push:{DEF}"),
        ("escpipe", r"\\\|", T.ESCPIPE, ""),
        ("pipe", r"\|", T.PIPE, f"push:{FILTER}"),
        ("dcolon", r"::", T.DCOLON, ""),
        ("colon", r":", T.COLON, ""),
        ("equals", r"=", T.EQUALS, ""),
        ("quote", r'"', T.QUOTE, ""),
        ("ident", _IDENT, T.IDENT, ""),
        ("ws", rf"{_WS}+", None, ""),
        ("unknown", r"[^}]|\}(?!\})", T.UNKNOWN, ""),
        ("popper", r"", None, "pop"),
    ],
    FILTER: [
        ("ws", rf"{_WS}+", None, ""),
        ("fident", _IDENT, T.FIDENT, f"pop+push:{FILTER_END}"),
    ],
    FILTER_END: [
        ("beforeend", r"(?=\}\})", None, "pop"),
        ("fendofident", _END_OF_IDENT, None, "pop"),
    ],
    VAR_ID: [
        ("ws", rf"{_WS}+", None, ""),
        ("varident", _VARIDENT, T.VARIDENT, f"pop+push:{VAR_AFTER}"),
        ("popper", r"", None, "pop"),
    ],
    VAR_AFTER: [
        ("ws", rf"{_WS}+", None, ""),
        ("inc", r"\+\+", T.INC, ""),
        ("dec", r"--", T.DEC, ""),
        ("valop", r"\?\?=|\?\?|\|\|=|\|\||-=|==|!=|>=|>|<=|<|\+=|=", T.VALOP, f"pop+push:{VAR_VALUE}"),
        ("beforeend", r"(?=\}\})", None, "pop"),
        ("popper", r"", None, "pop"),
    ],
    VAR_VALUE: [
        ("start", r"\{\{", T.START, f"push:{DEF}"),
        ("ident", _IDENT, T.IDENT, ""),
        ("ws", rf"{_WS}+", None, ""),
        ("unknown", r"[^}]|\}(?!\})", T.UNKNOWN, ""),
        ("popper", r"", None, "pop"),
    ],
}


def _compile() -> dict[int, tuple[re.Pattern[str], list[tuple[int | None, int, int]]]]:
    """One alternation per mode; group index -> (token type, pops, pushed mode or -1)."""
    out = {}
    for mode, rules in _RULES.items():
        parts = []
        table: list[tuple[int | None, int, int]] = [(None, 0, -1)]  # group 0 is the whole match
        for name, pattern, ttype, action in rules:
            parts.append(f"(?P<{name}>{pattern})")
            pops = 1 if action.startswith("pop") else 0
            push = int(action.rsplit(":", 1)[1]) if "push:" in action else -1
            table.append((ttype, pops, push))
        regex = re.compile("|".join(parts))
        # lastindex is the number of the matched top-level group: map every group number
        full: list[tuple[int | None, int, int]] = [(None, 0, -1)] * (regex.groups + 1)
        for name, index in regex.groupindex.items():
            rule_no = [r[0] for r in rules].index(name) + 1
            full[index] = table[rule_no]
        out[mode] = (regex, full)
    return out


_MODES = _compile()


def _after_dropped(regex: re.Pattern[str], text: str, pos: int, hi: int) -> int:
    """Where lexing resumes after the character at ``pos`` no rule of the mode accepts: the first
    position after it where one does (Chevrotain drops the characters in between)."""
    pos += 1
    while pos < hi and regex.match(text, pos, hi) is None:
        pos += 1
    return pos


def tokenize(text: str, lo: int = 0, hi: int | None = None, errors: list[int] | None = None) -> list[Tok]:
    """The token stream SillyTavern's lexer produces for ``text[lo:hi]`` (skipped tokens left out).

Offsets are absolute in ``text``; the window's end acts as the end of input for lookaheads,
so an argument can be re-lexed in place without copying it. The offset of each run of dropped
characters is appended to ``errors`` when given.

    Characters no rule of the current mode accepts are dropped until one does, as Chevrotain
    does; they simply do not appear in the stream (the evaluator outputs such gaps verbatim).
    """
    toks: list[Tok] = []
    append = toks.append
    new = tuple.__new__  # Tok._make without its Python-level wrapper
    stack = [PLAIN]
    pos = lo
    n = len(text) if hi is None else hi
    modes = _MODES
    depth = 0
    regex, table = modes[PLAIN]
    check_at = pos + CHECK_CHARS
    while pos < n:
        if pos >= check_at:
            check_at = pos + CHECK_CHARS
            check(pos, text)  # the render's CPU budget (see .budget)
        m = regex.match(text, pos, n)
        if m is None:
            # lexer error: drop characters until some rule of this mode matches
            if errors is not None:
                errors.append(pos)
            pos = _after_dropped(regex, text, pos, n)
            continue
        ttype, pops, push = table[m.lastindex]  # type: ignore[index]
        end = m.end()
        if pops:
            if stack.pop() == DEF:
                depth -= 1
            if push < 0:
                regex, table = modes[stack[-1]]
        if push >= 0:
            stack.append(push)
            if push == DEF:
                depth += 1
            regex, table = modes[push]
        if ttype is not None:
            append(new(Tok, (ttype, pos, end, depth)))
        pos = end
    return toks


def tokenize_macro(
    text: str, lo: int, hi: int, max_depth: int = 1 << 30, dropped: list[int] | None = None
) -> tuple[list[Tok], int] | None:
    """The tokens of the one top-level ``{{`` at ``lo``, up to where the lexer is back in plain text.

    ``tokenize`` from ``lo`` would produce exactly these tokens first (the lexer is in plain
    mode with an empty stack at ``lo`` and again at the returned end), so a document can be
    lexed region by region. ``None`` when a character had to be dropped and ``dropped`` is not
    given (with it, the offset of each run of dropped characters is appended there, as
    :func:`tokenize` does, and lexing goes on), or as soon as macros nest deeper than
    ``max_depth`` (the caller then lexes the whole document, which leaves such regions as
    written: lexing the rest of a 2 MiB region here first would only double that work).
    """
    toks: list[Tok] = []
    append = toks.append
    new = tuple.__new__
    modes = _MODES
    stack = [PLAIN]
    pos = lo
    depth = 0
    regex, table = modes[PLAIN]
    check_at = pos + CHECK_CHARS
    while pos < hi:
        if pos >= check_at:
            check_at = pos + CHECK_CHARS
            check(pos, text)  # the render's CPU budget (see .budget)
        m = regex.match(text, pos, hi)
        if m is None:
            if dropped is None:
                return None
            dropped.append(pos)
            pos = _after_dropped(regex, text, pos, hi)
            continue
        ttype, pops, push = table[m.lastindex]  # type: ignore[index]
        end = m.end()
        if pops:
            if stack.pop() == DEF:
                depth -= 1
            if push < 0:
                regex, table = modes[stack[-1]]
        if push >= 0:
            stack.append(push)
            if push == DEF:
                depth += 1
                if depth > max_depth:
                    return None
            regex, table = modes[push]
        if ttype is not None:
            append(new(Tok, (ttype, pos, end, depth)))
        pos = end
        if len(stack) == 1:
            break
    return toks, pos


#: modes that only a ``}}`` can pop (every other text is one of their tokens): each such frame
#: on the stack needs its own ``}}`` before the lexer can be back in plain text
_NEEDS_CLOSE = frozenset((ARGS, VAR_VALUE))


def _enough_closers(text: str, pos: int, hi: int, need: int) -> bool:
    """Whether ``text[pos:hi]`` holds ``need`` disjoint ``}}`` (scanning no further than the last)."""
    find = text.find
    while need > 0:
        pos = find("}}", pos, hi)
        if pos < 0:
            return False
        pos += 2
        need -= 1
    return True


def tokenize_limited(
    text: str, lo: int, hi: int, errors: list[int], max_depth: int
) -> tuple[list[Tok], list[tuple[int, int]]]:
    """:func:`tokenize`, with each top-level region nested deeper than ``max_depth`` cut out as a hole.

    A region runs from a ``{{`` opened at depth 1 to the first token that leaves the lexer at
    depth 0 (or the end of input); the tokens of a region that goes deeper than ``max_depth``
    are not kept, its ``(start, end)`` is returned instead (the parser leaves it as written).
    Tokenizing everything and filtering afterwards kept ~600,000 tokens of ``{{getvar::`` x
    200,000 alive only to drop them: here the lexer stops making tokens once a region is too
    deep, and stops lexing altogether when the rest of the text holds fewer ``}}`` than the
    frames that each need one (then the region runs to the end of input).
    """
    toks: list[Tok] = []
    append = toks.append
    new = tuple.__new__
    holes: list[tuple[int, int]] = []
    stack = [PLAIN]
    pos = lo
    modes = _MODES
    depth = 0
    regex, table = modes[PLAIN]
    region_index = -1  # index in toks of the depth-1 "{{" opening the current region, or -1
    region_start = 0
    hole = False  # the current region went too deep: no tokens, only the lexer's state
    next_check = 0  # stack size at which to count the "}}" left again (doubling: linear)
    check_at = pos + CHECK_CHARS
    while pos < hi:
        if pos >= check_at:
            check_at = pos + CHECK_CHARS
            check(pos, text)  # the render's CPU budget (see .budget)
        m = regex.match(text, pos, hi)
        if m is None:
            errors.append(pos)
            pos = _after_dropped(regex, text, pos, hi)
            continue
        ttype, pops, push = table[m.lastindex]  # type: ignore[index]
        end = m.end()
        if pops:
            if stack.pop() == DEF:
                depth -= 1
            if push < 0:
                regex, table = modes[stack[-1]]
        if push >= 0:
            stack.append(push)
            if push == DEF:
                depth += 1
            regex, table = modes[push]
        if ttype is not None:
            if region_index < 0 and ttype == T.START and depth == 1:
                region_index = len(toks)
                region_start = pos
            if region_index < 0:
                append(new(Tok, (ttype, pos, end, depth)))
            elif hole:
                if depth == 0:
                    holes.append((region_start, end))
                    region_index = -1
                    hole = False
                elif len(stack) >= next_check:
                    next_check = 2 * len(stack)
                    if not _enough_closers(text, end, hi, sum(1 for mode in stack if mode in _NEEDS_CLOSE)):
                        holes.append((region_start, hi))  # it never gets back to plain text
                        return toks, holes
            elif depth > max_depth:
                del toks[region_index:]
                hole = True
                next_check = 0
            else:
                append(new(Tok, (ttype, pos, end, depth)))
                if depth == 0:
                    region_index = -1
        elif region_index >= 0 and depth == 0:
            # a skipped rule left the lexer in plain text ("{{." then a character no variable
            # name starts with): the region ends here, as ``tokenize_macro``'s does, and a "{{"
            # after it opens a region of its own
            if hole:
                holes.append((region_start, end))
                hole = False
            region_index = -1
        pos = end
    if hole:
        holes.append((region_start, hi))
    return toks, holes
