"""A level's kept output (``LevelPlan._memoised``) gives exactly what the evaluator gives.

A level made of literals, constants (comments, ``{{trim}}``), context fields and literal
``{{setvar}}``/``{{getvar}}`` (at least ``plan._KEPT_MIN_CALLS`` of them) keeps its last output and hands it out again while the fields it
reads and the variables it reads before writing them are the same; its writes are made again.
Templates built from those pieces are rendered with a changing sequence of contexts (repeats
included, so kept outputs are used), traced and untraced, and each render is compared with
the same template rendered with plans switched off.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.errors import TemplateError
from tavernbox.macros import MacroContext, compile_macros
from macro_support import NO_PLANS

PIECES = [
    "prose ", "\n", "\r\n", "{{trim}}", "{{// a comment }}", "{{user}}", "{{char}}", "{{description}}",
    "{{setvar::a::wary}}", "{{setvar::a:: 7 }}", "{{setvar::n::2.50}}", "{{getvar::a}}", "{{getvar::n}}",
    "{{getvar::missing}}", "{{getglobalvar::g}}", "{{setglobalvar::g::[1]}}", "{{addvar::a::1}}",
    "{{newline}}", "\\{\\{trim\\}\\}", "{{getvar::a}}{{trim}}\n",
]
VALUES = ["", "x", " 7 ", "3", 2.5, 0, True, [1, "b"], {"k": 1}, "-0", "\n"]


def _context(user: str, a: Any, g: Any, n: Any) -> MacroContext:
    local = {} if a is None else {"a": a}
    if n is not None:
        local["n"] = n
    return MacroContext.from_dict(
        {
            "user": user,
            "char": "Mira",
            "character": {"description": "DESC {{user}}"},
            "variables": {"local": local, "global": {} if g is None else {"g": g}},
        }
    )


def _outcome(template: Any, ctx: MacroContext, trace: bool, **kw: Any) -> Any:
    try:
        result = template.expand(ctx, trace=trace, **kw)
    except TemplateError as exc:
        return ("error", exc.code, exc.message)
    return (result.text, result.variables, result.diagnostics, result.draws, result.segments)


contexts = st.builds(
    _context,
    st.sampled_from(["Ash", "Bo", ""]),
    st.one_of(st.none(), st.sampled_from(VALUES)),
    st.one_of(st.none(), st.sampled_from(VALUES)),
    st.one_of(st.none(), st.sampled_from(VALUES)),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=30).map("".join),
    st.lists(contexts, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(min_value=0, max_value=2), st.booleans()), min_size=4, max_size=12),
)
def test_kept_level_outputs_equal_the_evaluator(text: str, ctxs: list[MacroContext], order: list[tuple[int, bool]]) -> None:
    template = compile_macros(text)
    for index, trace in order:
        ctx = ctxs[index % len(ctxs)]
        want = _outcome(compile_macros(text), ctx, trace, shortcuts=NO_PLANS)
        assert _outcome(template, ctx, trace) == want, (text, index, trace)


def test_a_kept_output_is_used_and_its_writes_made_again() -> None:
    text = "{{// settings }}{{trim}}\n{{setvar::tone::wary}}{{trim}}\nKeep {{char}} {{getvar::tone}} with {{user}} ({{getvar::n}})."
    template = compile_macros(text)
    ctx = _context("Ash", None, None, "4")
    first = template.expand(ctx)
    for _ in range(4):
        again = template.expand(ctx)
        assert again == first
    assert again.text == "Keep Mira wary with Ash (4)."
    assert again.variables["local"] == {"n": "4", "tone": "wary"}
    # the kept output really is handed out: the same string object, render after render
    assert template.expand(ctx).text is template.expand(ctx).text
    # a changed input (the variable read before any write, or a field) runs the level again
    assert template.expand(_context("Ash", None, None, "5")).text == "Keep Mira wary with Ash (5)."
    assert template.expand(_context("Bo", None, None, "5")).text == "Keep Mira wary with Bo (5)."


def test_a_traced_render_records_the_reads_of_a_kept_nested_level() -> None:
    # a traced render's stores log each read: a nested level with a kept output still runs
    # (reading only its inputs would log ``n`` and miss the read of ``a`` after its write)
    template = compile_macros("{{if 1}}{{setvar::a::y}}{{getvar::a}} {{getvar::n}} {{user}}{{// c }}{{char}}{{trim}}{{user}}{{/if}}")
    ctx = _context("Ash", "x", None, "4")
    for _ in range(4):
        template.expand(ctx)
    for _ in range(2):
        traced = template.expand(ctx, trace=True)
        assert traced.text == "y 4 AshMiraAsh"
        assert [s.reads for s in traced.segments] == [(("local", "a"), ("local", "n"))]
