"""Handlers a plan specialises for their literal arguments (``bind_literal``: ``random``,
``roll``) give exactly what the evaluator gives: text, draws (with dice), diagnostics."""

from __future__ import annotations

from typing import Any

from tavernbox.macros import MacroContext, compile_macros
from tavernbox.macros.plan import LevelPlan
from tavernbox.shortcuts import DEFAULT
from macro_support import NO_PLANS, level_plans

TEXTS = [
    "{{random::quiet::tense::warm}} {{roll::1d20}} {{roll::3d6+2}} {{roll::d4-1}} {{roll::20}}",
    "{{random}}{{random::}}{{random::a}}{{random:: a , b\\,c , d }}{{random::x,y}}",
    "{{roll::0d6}} {{roll::banana}} {{roll::2D8-30}} {{roll::1001d2}} {{roll::99999999999999999999d2}}",
    "a {{roll::1000d2}} b {{random::1::2::3::4::5::6::7}} c",
]


def _render_all(text: str, planned: bool) -> list[Any]:
    template = compile_macros(text)
    out = []
    for seed in range(4):
        result = template.expand(MacroContext(seed=seed), shortcuts=DEFAULT if planned else NO_PLANS)
        out.append((result.text, result.draws, result.diagnostics))
    return out


def _top_plan(template: Any) -> LevelPlan:
    plans = level_plans(template)
    return next(p for p in plans if isinstance(p, LevelPlan))


def test_bound_random_and_roll_match_the_evaluator() -> None:
    for text in TEXTS:
        assert _render_all(text, True) == _render_all(text, False), text


def test_literal_random_and_roll_are_bound_by_the_plan() -> None:
    template = compile_macros("x {{random::a::b}} {{roll::2d6}} {{roll::1001d2}} y")
    for _ in range(3):
        template.expand(MacroContext(seed=1))
    plan = _top_plan(template)
    names = [part.__name__ for part in plan.parts if not isinstance(part, str)]
    # the over-limit roll stays on the evaluator's path (its refusal is a diagnostic each render)
    assert names == ["bound", "bound", "literal"]


def test_context_reads_and_constants_are_inlined_in_the_generated_run() -> None:
    template = compile_macros("{{user}} and {{char}}{{// note }}{{trim}}!")
    ctx = MacroContext(user="Ash", char="Mira")
    for _ in range(3):
        assert template.expand(ctx).text == "Ash and Mira!"
    names = _top_plan(template).runner.__globals__
    assert sorted(k for k in names if k[0] in "rk" and k[1:].isdigit()) == ["k3", "k4", "r0", "r2"]  # parts 1 and 5 are literals



def test_literal_variable_reads_are_inlined_and_match_the_evaluator() -> None:
    text = "{{setvar::a::5}}[{{getvar::a}}|{{getglobalvar::g}}|{{getvar::missing}}|{{getvar::n}}]"
    ctx = MacroContext(local_variables={"n": " 7 "}, global_variables={"g": 2.5})
    want = compile_macros(text).expand(ctx, shortcuts=NO_PLANS)
    template = compile_macros(text)
    for _ in range(3):
        got = template.expand(ctx)
        assert (got.text, got.variables) == (want.text, want.variables)
    names = _top_plan(template).runner.__globals__
    assert sorted(k for k in names if k[0] == "n" and k[1:].isdigit()) == ["n2", "n4", "n6", "n8"]
