"""Hypothesis strategies for SillyTavern macro text, exported for users' own fuzzing.

:func:`macro_templates` draws text the way prompt authors (and attackers) write it: known macro
names in random case, every argument form (``::``, legacy ``:`` and whitespace), flags, nesting,
scoped pairs ``{{x}}..{{/x}}``, ``{{if}}``/``{{else}}``, the ``.var``/``$var`` shorthand with its
operators, brace escapes, ``<USER>``-style markers, and broken pieces (unterminated ``{{``, stray
``}}``, mismatched closers, ``|`` inside braces) mixed with the edge characters
``{ } : | \\ ! # / . $``.

The point is coverage of the grammar's corners, not realism: a generated text is usually
nonsense, but every branch of the lexer and evaluator is reachable from it. Sizes stay small
(a few hundred characters) so property tests remain fast; Hypothesis shrinks failures to the
smallest text that still fails.
"""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["MACRO_NAMES", "macro_names", "macro_templates"]

#: Names the engine knows (section 1.10), plus a few unknown ones to exercise the fallback.
MACRO_NAMES: tuple[str, ...] = (
    "user", "char", "group", "charIfNotGroup", "groupNotMuted", "notChar", "persona",
    "description", "charDescription", "personality", "scenario", "charPrompt", "charInstruction",
    "charJailbreak", "mesExamples", "mesExamplesRaw", "charFirstMessage", "greeting", "charVersion",
    "original", "input", "model", "isMobile", "newline", "space", "noop", "trim", "//", "comment",
    "reverse", "if", "else", "random", "pick", "roll", "banned", "outlet", "lastMessage",
    "lastUserMessage", "lastCharMessage", "lastMessageId", "lastSwipeId", "currentSwipeId",
    "allChatRange", "time", "date", "weekday", "isotime", "isodate", "datetimeformat",
    "idleDuration", "idle_duration", "timeDiff", "setvar", "getvar", "addvar", "incvar", "decvar",
    "hasvar", "varexists", "deletevar", "flushvar", "setglobalvar", "getglobalvar", "addglobalvar",
    "incglobalvar", "decglobalvar", "hasglobalvar", "deleteglobalvar", "maxPrompt", "exampleSeparator",
    "chatStart", "systemPrompt", "instructUserPrefix", "unknownMacro", "a-b", "x_y",
)

_EDGE = "{}:|\\!#/.$"
_FLAGS = "!?~#/>"
_OPERATORS = ("", "=", "+=", "-=", "++", "--", "||", "??", "||=", "??=", "==", "!=", ">", ">=", "<", "<=")
_VAR_NAMES = ("x", "y", "myvar", "counter", "a-b", "flag", "n1", "1", "x-")

_plain = st.text(
    alphabet=st.sampled_from("abcXYZ 019,-\n\t" + _EDGE + "é😀<>\"'"),
    max_size=12,
)


def _random_case(name: str) -> st.SearchStrategy[str]:
    """``name`` with each letter upper- or lower-cased at random (lookups are case-insensitive)."""
    return st.lists(st.booleans(), min_size=len(name), max_size=len(name)).map(
        lambda flips: "".join(c.upper() if up else c.lower() for c, up in zip(name, flips))
    )


def macro_names() -> st.SearchStrategy[str]:
    """A known macro name (or a near miss) in random case."""
    return st.sampled_from(MACRO_NAMES).flatmap(_random_case)


_padding = st.sampled_from(("", "", " ", "  ", "\n", " \n "))
_flags = st.lists(st.sampled_from(_FLAGS), max_size=2).map("".join)

#: Argument values that mean something to particular macros.
_meaningful_args = st.sampled_from(
    (
        "1d6", "2d1+3", "1d1-3", "d20", "6", "0d6", "1001d6", "abc", "UTC+2", "UTC-5:30", "UTC+99",
        "YYYY-MM-DD HH:mm", "LLLL", "[at] LT", "dddd Do", "2023-01-01", "2023-01-02T10:00Z",
        "a,b\\,c", "0", "1", "false", "off", "true", "-1", "10001", "007", "2.5", "[1,2]",
        '{"a":1}', "", " ", "!", "x",
    )
)


def _inline_macro(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``{{ flags name <args> }}`` in one of the three argument forms; args may nest children."""
    arg = st.one_of(_plain, _meaningful_args, children)

    @st.composite
    def build(draw: st.DrawFn) -> str:
        name = draw(macro_names())
        flags = draw(_flags)
        form = draw(st.sampled_from(("none", "dcolon", "colon", "space")))
        if form == "none":
            tail = ""
        elif form == "dcolon":
            args = draw(st.lists(arg, min_size=1, max_size=3))
            tail = "".join("::" + draw(_padding) + a + draw(_padding) for a in args)
        elif form == "colon":
            tail = ":" + draw(arg)
        else:
            tail = " " + draw(arg)
        return "{{" + draw(_padding) + flags + name + tail + draw(_padding) + "}}"

    return build()


def _scoped_macro(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``{{name args}}body{{/name}}``, sometimes with a ``#`` flag or a mismatched closer."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        name = draw(st.sampled_from(("setvar", "trim", "reverse", "if", "//", "setglobalvar", "foo", "user")))
        opener_args = ""
        if name in ("setvar", "setglobalvar"):
            opener_args = "::" + draw(st.sampled_from(_VAR_NAMES))
        elif name == "if":
            opener_args = " " + draw(st.one_of(st.sampled_from(("1", "0", "!x", ".x", "$flag", "description", "")), children))
        flag = draw(st.sampled_from(("", "", "#")))
        body = draw(st.lists(st.one_of(_plain, children), max_size=3).map("".join))
        closer = draw(st.sampled_from((name, name.upper(), name, "other")))
        missing_closer = draw(st.integers(0, 9)) == 0
        closing = "" if missing_closer else "{{/" + closer + "}}"
        return "{{" + flag + draw(_random_case(name)) + opener_args + "}}" + body + closing

    return build()


def _if_else(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``{{if cond}}then{{else}}else{{/if}}`` including nested ifs and doubled else."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        cond = draw(st.one_of(st.sampled_from(("1", "0", "!0", "false", "yes", ".flag", "$flag", "user", "noop", "")), children))
        then = draw(st.one_of(_plain, children))
        parts = ["{{if " + cond + "}}", then]
        for _ in range(draw(st.integers(0, 2))):
            parts += ["{{else}}", draw(st.one_of(_plain, children))]
        if draw(st.integers(0, 9)):
            parts.append("{{/if}}")
        return "".join(parts)

    return build()


def _shorthand(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``{{.name op value}}`` / ``{{$name op value}}`` with every operator."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        prefix = draw(st.sampled_from(".$"))
        name = draw(st.sampled_from(_VAR_NAMES))
        op = draw(st.sampled_from(_OPERATORS))
        value = ""
        if op not in ("", "++", "--"):
            value = draw(st.one_of(_meaningful_args, _plain, children))
        return "{{" + draw(_padding) + prefix + name + draw(_padding) + op + draw(_padding) + value + "}}"

    return build()


_broken = st.sampled_from(
    (
        "{{", "}}", "{{user", "{{ hehe", "{{/if}}", "{{/setvar}}", "{{else}}", "{{{", "}}}", "\\{\\{user\\}\\}",
        "\\{{user}}", "{{user!}}", "{{reverse::a|b}}", "{{// a \\| b }}", "{{§§ x}}", "{{::}}", "{{:}}",
        "{{ }}", "{{.}}", "{{$}}", "{{.1}}", "<USER>", "<BOT>", "<CHAR>", "<GROUP>", "{{time_UTC+2}}",
        "{{//}}", "{{///}}", "{{#}}", "{{!}}", "\\", "{{user}}}}", "{{{{char}}}}",
    )
)


def _fragment(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        _inline_macro(children),
        _scoped_macro(children),
        _if_else(children),
        _shorthand(children),
        _broken,
        _plain,
    )


def macro_templates(max_leaves: int = 12) -> st.SearchStrategy[str]:
    """Macro-heavy text: nested, scoped, conditional, shorthand and deliberately broken macros.

    ``max_leaves`` bounds the nesting/concatenation tree (Hypothesis' ``recursive``), and with it
    the size of each example.
    """
    leaf = st.one_of(_plain, _broken, _inline_macro(_plain), _shorthand(_plain))
    nested = st.recursive(
        leaf,
        lambda children: st.one_of(
            _fragment(children),
            st.lists(children, min_size=2, max_size=4).map("".join),
        ),
        max_leaves=max_leaves,
    )
    return st.lists(st.one_of(nested, _plain), min_size=1, max_size=5).map("".join)
