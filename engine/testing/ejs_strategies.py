"""Hypothesis strategies for EJS templates in the ST-Prompt-Template dialect.

``ejs_templates()`` draws templates that exercise what the differential test must pin down:
every tag kind, the whitespace closers ``-%>`` / ``_%>`` and ``<%_``, ``<%%`` / ``%%>``
literals, stray closers in text, CR/LF/tab layouts, JavaScript expressions over ``variables``,
control flow spanning tags, local "partial" functions, ``await`` of resolved promises and
variadic ``print``. Now and then a tag throws or does not compile, and a fifth of the draws is
tag soup (random tag tokens and short code) that reaches ejs's odd accepted shapes and its
close-tag errors.

``ejs_variables()`` draws the data those templates read: always the same keys (so that most
templates render instead of failing on a missing name), with values chosen to stress
stringification and escaping. The templates never use timers, ``Date`` or locale formatting,
which differ between engines (research digest, section 3.5).

The tables (``LITERALS``, ``KINDS``, ``TEXT_ATOMS``...) are plain lists, shared with the fast
generator of ``ejs_generator``, which draws the same grammar without Hypothesis.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from hypothesis import strategies as st

__all__ = ["ejs_cases", "ejs_templates", "ejs_variables"]

_SPECIAL_TEXT = ["&", "<", ">", '"', "'", "\\", "`", "${x}", "/", "é", "😀", "中", "\u2028", "{", "}", "$"]
TEXT_ATOMS = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "a", "Hello", "x", "-", "_", "%", "<", ">", "<>", "% >", "-%",
    "%>", "-%>", "_%>", "<%%", "%%>", "<%%>", "<%% x -%>", " %>", "\n\n", " \n", "\t\n",
] + _SPECIAL_TEXT
STRING_CHARS = list("abcXYZ 019&<>\"'/\\\n\té😀中-_")
_STRING_CHARS = st.sampled_from(STRING_CHARS)


# JSON string syntax is JavaScript string syntax; "%" never appears, so no tag can hide inside.
_JS_STRING = st.text(_STRING_CHARS, max_size=8).map(lambda s: json.dumps(s, ensure_ascii=False))


LITERALS = [
    "0", "1", "-0", "42", "3.5", "0.1 + 0.2", "1e21", "1 / 3", "NaN", "10n", "null", "undefined", "true",
    "false", "[]", "[1, [2, 3]]", "[null, undefined, 1]", "{a: 1}", "''", "Promise.resolve(1)",
]
_LITERALS = st.sampled_from(LITERALS)
LOOKUPS = [
    "variables.name", "variables.n", "variables.items", "variables.items.length", "variables.items[0]",
    "variables.obj", "variables.obj.k", "variables.flag", "variables.nothing", "typeof variables.missing",
    "variables.items.join('-')", "JSON.stringify(variables.obj)", "String(variables.name).toUpperCase()",
    "variables.name.length", "Object.keys(variables.obj).join()", "variables.items.map(x => typeof x)",
]
_LOOKUPS = st.sampled_from(LOOKUPS)


BINARY = [" + ", " - ", " * ", " === ", " && ", " || ", " ?? "]
_BINARY = st.sampled_from(BINARY)
WRAPPERS = ["binary", "ternary", "await", "string", "array"]
_WRAPPERS = st.sampled_from(WRAPPERS)


@cache
def _expr(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Expressions over ``variables`` and the local ``names`` in scope (built once per scope)."""
    atoms: list[st.SearchStrategy[str]] = [_LITERALS, _LOOKUPS, _JS_STRING]
    if names:
        atoms.append(st.sampled_from(names))
    return _expr_of(st.one_of(*atoms), 2)


@st.composite
def _expr_of(draw: st.DrawFn, atom: st.SearchStrategy[str], depth: int) -> str:
    # A hand-written depth bound: much cheaper to draw from than st.recursive.
    if depth == 0 or draw(st.integers(0, 2)) > 0:
        return draw(atom)
    wrapper = draw(_WRAPPERS)
    inner = draw(_expr_of(atom, depth - 1))
    if wrapper == "binary":
        return f"({inner}{draw(_BINARY)}{draw(_expr_of(atom, depth - 1))})"
    if wrapper == "ternary":
        return f"({inner} ? {draw(atom)} : {draw(atom)})"
    if wrapper == "await":
        return f"await Promise.resolve({inner})"
    if wrapper == "string":
        return f"String({inner})"
    return f"[{inner}]"


WHITESPACE = ["", " ", " ", "  ", "\t", "\n", " \n ", "\r\n"]
_WS = st.sampled_from(WHITESPACE)
CLOSERS = ["%>", "%>", "-%>", "_%>"]
_CLOSER = st.sampled_from(CLOSERS)
OUTPUT_TAILS = ["", "", ";", " ;  ", " // note", "\n// c", " /* c */"]
_OUTPUT_TAIL = st.sampled_from(OUTPUT_TAILS)
#: (space before, opener, space after the opener, space before the closer, closer, space after)
SCRIPT_LEAD = ["", "", " ", "\t ", "  "]
SCRIPT_OPEN = ["<%", "<%", "<%_"]
SCRIPT_GAP = [" ", " ", "\n"]
SCRIPT_AFTER = ["", "", " ", "\t", "  \t"]
COMMENT_PIECES = ["a", " ", "\n", "<", ">", "-", "//"]
_SCRIPT_WRAP = st.tuples(
    st.sampled_from(SCRIPT_LEAD), st.sampled_from(SCRIPT_OPEN),
    st.sampled_from(SCRIPT_GAP), _WS, _CLOSER, st.sampled_from(SCRIPT_AFTER),
)
_COMMENT = st.tuples(st.lists(st.sampled_from(COMMENT_PIECES), max_size=5), _CLOSER).map(
    lambda t: "<%#" + "".join(t[0]) + t[1]
)
LITERAL_TEXT = ["<%% x %>", "<%%= y -%>\n", "a %%> b", "<%%", "%%>"]
_LITERAL_TEXT = st.sampled_from(LITERAL_TEXT)
_TEXT = st.lists(st.sampled_from(TEXT_ATOMS), max_size=4).map("".join)
KINDS = [
    "text", "text", "text", "output", "output", "output", "print", "comment", "var", "if", "for", "fn", "literal",
    "failure",
]
_KINDS = st.sampled_from(KINDS)
#: Tags that fail at run time or at compile time, so "both fail" is exercised by kind too.
FAILURES = [
    "<%= nope %>", "<%- variables.nothing.x %>", "<% null.f() %>", "<%= JSON.parse('{') %>", "<% (1 + ) %>",
    "<%= 1 2 %>", "<% throw new Error('x') %>", "<% const c = 1; c = 2 %>", "<%- Symbol('s') %>",
]
_FAILURES = st.sampled_from(FAILURES)


FOR_SOURCES = ["variables.items", "[1, 2]", "Object.keys(variables.obj)", "'ab'"]


def _script(draw: st.DrawFn, body: str) -> str:
    lead, opener, gap, ws, closer, after = draw(_SCRIPT_WRAP)
    return f"{lead}{opener}{gap}{body}{ws}{closer}{after}"


@cache
def _output_tag(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["<%=", "<%-"]), _WS, _expr(names), _OUTPUT_TAIL, _WS, _CLOSER).map("".join)


@cache
def _block(depth: int, names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """A sequence of template parts; ``names`` are the JavaScript locals in scope (built once)."""
    return _block_of(depth, names)


@st.composite
def _block_of(draw: st.DrawFn, depth: int, names: tuple[str, ...]) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 5 if depth == 0 else 3))):
        kind = draw(_KINDS)
        if kind == "text":
            parts.append(draw(_TEXT))
        elif kind == "output":
            parts.append(draw(_output_tag(names)))
        elif kind == "print":
            args = draw(st.lists(_expr(names), max_size=3))
            parts.append(_script(draw, f"print({', '.join(args)});"))
        elif kind == "comment":
            parts.append(draw(_COMMENT))
        elif kind == "var":
            name = f"v{depth}"
            parts.append(_script(draw, f"var {name} = {draw(_expr(names))};"))
            if name not in names:
                names = (*names, name)
        elif kind == "literal":
            parts.append(draw(_LITERAL_TEXT))
        elif kind == "failure":
            parts.append(draw(_FAILURES))
        elif depth < 2 and kind == "if":
            cond = draw(_expr(names))
            parts.append(_script(draw, f"if ({cond}) {{") + draw(_block(depth + 1, names)))
            if draw(st.booleans()):
                parts.append(_script(draw, "} else {") + draw(_block(depth + 1, names)))
            parts.append(_script(draw, "}"))
        elif depth < 2 and kind == "for":
            item = f"it{depth}"
            source = draw(st.sampled_from(FOR_SOURCES))
            head = draw(st.sampled_from([f"for (const {item} of {source}) {{",
                                         f"for (let {item} = 0; {item} < 3; {item}++) {{"]))
            parts.append(_script(draw, head) + draw(_block(depth + 1, (*names, item))) + _script(draw, "}"))
        elif depth < 2 and kind == "fn":
            fname = f"part{depth}"
            call = draw(st.sampled_from([f"{fname}(1); {fname}('<b>');", f"[3, 4].forEach({fname});",
                                         f"print({fname}(variables.name));"]))
            parts.append(_script(draw, f"function {fname}(p) {{") + draw(_block(depth + 1, (*names, "p")))
                         + _script(draw, "}") + _script(draw, call))
    return "".join(parts)


SOUP_TOKENS = [
    "<%", "<%_", "<%=", "<%-", "<%#", "<%%", "%%>", "%>", "-%>", "_%>", " ", "  ", "\n", "\t", "\r\n",
    " 1 ", "'a'", " 'x' ", "a", "-", "_", "%", "<", ">", " print(2) ", "//", ";",
]


def _soup() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(SOUP_TOKENS), max_size=10).map("".join)


def ejs_templates() -> st.SearchStrategy[str]:
    """EJS templates: mostly well-formed programs over ``variables``, sometimes tag soup."""
    return st.one_of(_block(0, ()), _block(0, ()), _block(0, ()), _block(0, ()), _soup())


SCALAR_FLOATS = [0.5, -2.25, 1e21, 1e-7, 0.1]
N_FLOATS = [2.5, -0.5, 1e21]
OBJ_KEYS = ["k", "a", "b c", "<x>", "2", "1"]


def ejs_variables() -> st.SearchStrategy[dict[str, Any]]:
    """The data ``ejs_templates()`` reads: fixed keys, values that stress conversion and escaping."""
    scalar = st.one_of(
        st.integers(-1000, 1000), st.sampled_from(SCALAR_FLOATS), st.booleans(), st.none(),
        st.text(_STRING_CHARS, max_size=6),
    )
    return st.fixed_dictionaries({
        "name": st.text(_STRING_CHARS, max_size=10),
        "n": st.one_of(st.integers(-5, 100), st.sampled_from(N_FLOATS)),
        "items": st.lists(scalar, max_size=4),
        "obj": st.dictionaries(st.sampled_from(OBJ_KEYS), scalar, max_size=3),
        "flag": st.booleans(),
        "nothing": st.none(),
    })


def ejs_cases() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """``(template, variables)`` pairs, as the differential test consumes them."""
    return st.tuples(ejs_templates(), ejs_variables())
