"""Level plans (``tavernbox.macros.plan``) give exactly what the evaluator gives.

A compiled template builds a plan for a level the second time it evaluates it and runs it from
the third render on. Every conformance row and Hypothesis' macro-heavy texts are rendered four
times through one template with plans on, and compared with the same template rendered with
plans switched off (``Shortcuts(plans=False)``): text, variables, diagnostics and draws, or the
same error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.errors import TemplateError
from tavernbox.macros import MacroContext, MacroRegistry, compile_macros, evaluator
from tavernbox.macros import plan as plan_module
from tavernbox.macros.plan import LevelPlan
from tavernbox.testing.strategies import macro_templates
from macro_support import NO_PLANS, level_plans

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "conformance" / "st-macros.jsonl"

CONTEXT: dict[str, Any] = {
    "user": "User",
    "char": "Character",
    "persona": "PERSONA",
    "character": {"description": "DESC {{user}}", "personality": "PERS", "first_mes": "Hi!"},
    "chat": [{"role": "user", "name": "User", "content": "hello"}],
    "chat_id_hash": 123456,
    "now": "2026-11-30T10:15:00Z",
    "seed": 3,
}


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except TemplateError as exc:
        return ("error", exc.code, exc.message, exc.span)


def _reference(text: str, ctx: MacroContext, **kw: Any) -> Any:
    template = compile_macros(text)
    return [_outcome(lambda: template.expand(ctx, shortcuts=NO_PLANS, **kw)) for _ in range(2)]


def _same_with_plans(text: str, ctx: MacroContext, **kw: Any) -> None:
    want = _reference(text, ctx, **kw)
    assert want[0] == want[1]
    template = compile_macros(text)
    for _ in range(4):
        assert _outcome(lambda: template.expand(ctx, **kw)) == want[0]


def _plans(template: Any) -> list[LevelPlan]:
    return level_plans(template)


@pytest.mark.needs_shared("conformance/st-macros.jsonl")
def test_plans_equal_the_evaluator_on_every_conformance_row() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) > 1000
    for row in rows:
        ctx = MacroContext.from_dict(
            {**CONTEXT, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        _same_with_plans(row["template"], ctx)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates(), st.integers(min_value=0, max_value=2**16))
def test_plans_equal_the_evaluator_on_macro_templates(text: str, seed: int) -> None:
    _same_with_plans(text, MacroContext.from_dict({**CONTEXT, "seed": seed}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates(), st.integers(min_value=0, max_value=2**16))
def test_looping_plans_equal_the_evaluator_on_macro_templates(text: str, seed: int) -> None:
    # plans above _STRAIGHT_PARTS parts loop instead of running as one generated function
    saved = plan_module._STRAIGHT_PARTS
    plan_module._STRAIGHT_PARTS = 0
    try:
        _same_with_plans(text, MacroContext.from_dict({**CONTEXT, "seed": seed}))
    finally:
        plan_module._STRAIGHT_PARTS = saved


def test_the_output_limit_from_a_looping_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "_STRAIGHT_PARTS", 0)
    test_the_output_limit_is_raised_at_the_same_item_from_plans()


def test_a_repeated_template_runs_from_plans() -> None:
    text = "Hi {{user}} and {{char}}: {{setvar::a::1}}{{getvar::a}} {{if {{getvar::a}}}}yes {{user}}{{/if}}"
    template = compile_macros(text)
    ctx = MacroContext.from_dict(CONTEXT)
    first = template.expand(ctx)
    assert not _plans(template)  # a level evaluated once has no plan yet
    assert template.expand(ctx) == first
    assert _plans(template)
    assert template.expand(ctx) == first
    assert first.text == "Hi User and Character: 1 yes User"


def test_a_plan_loops_until_its_second_run_and_only_then_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # generating and compiling a level's function costs ~0.5 ms: a template rendered twice (a
    # fuzz check's determinism re-render, one CLI request) must not pay it
    compiled: list[LevelPlan] = []
    real = LevelPlan._straight

    def counting(self: LevelPlan) -> Any:
        compiled.append(self)
        return real(self)

    monkeypatch.setattr(LevelPlan, "_straight", counting)
    text = "{{setvar::a::1}}{{getvar::a}} {{roll::1d6}} {{if {{getvar::a}}}}yes{{/if}}"
    template = compile_macros(text)
    ctx = MacroContext.from_dict(CONTEXT)
    first = template.expand(ctx)
    assert template.expand(ctx) == first
    assert _plans(template) and not compiled  # planned, looping
    assert template.expand(ctx) == first
    assert compiled  # the second run of a plan compiles it for the next ones
    count = len(compiled)
    for _ in range(3):
        assert template.expand(ctx) == first
    assert len(compiled) == count  # compiled once


def test_a_registry_change_between_renders_is_seen_by_plans() -> None:
    registry = MacroRegistry.default()
    registry.register("shout", lambda call: "A", min_args=1, max_args=1)
    template = compile_macros("{{shout::x}} {{user}}")
    for _ in range(3):
        assert template.expand({}, registry=registry).text == "A User"
    registry.register("shout", lambda call: "B", min_args=1, max_args=1)
    assert template.expand({}, registry=registry).text == "B User"
    registry.register("shout", lambda call: "C", min_args=2, max_args=2)  # now the wrong arity
    result = template.expand({}, registry=registry)
    assert result.text == "{{shout::x}} User"
    assert [d.code for d in result.diagnostics] == ["MACRO_ARITY"]


def test_dynamic_macros_shadow_what_a_plan_bound() -> None:
    template = compile_macros("{{user}} {{reverse::ab}}")
    for _ in range(3):
        assert template.expand({}).text == "User ba"
    assert template.expand({}, dynamic={"user": "Dyn"}).text == "Dyn ba"
    assert template.expand({}).text == "User ba"


def test_handler_failures_and_arity_are_reported_the_same_from_plans() -> None:
    text = "{{reverse}} {{roll::999999d6}} {{newline::x}} {{nosuch::a}} {{greeting::1}}"
    _same_with_plans(text, MacroContext.from_dict(CONTEXT))
    template = compile_macros(text)
    results = [template.expand(CONTEXT) for _ in range(3)]
    assert results[2] == results[0]
    assert {d.code for d in results[0].diagnostics} >= {"MACRO_ARITY", "MACRO_UNKNOWN"}


def test_the_output_limit_is_raised_at_the_same_item_from_plans() -> None:
    big = "x" * (evaluator.MAX_OUTPUT_CHARS - 10)
    ctx = MacroContext.from_dict({**CONTEXT, "variables": {"local": {"big": big}, "global": {}}})
    # the plain text after the variable crosses the limit: the error names that text
    text = "{{getvar::big}}" + "y" * 40 + "{{user}}"
    want = _reference(text, ctx)[0]
    assert want[:2] == ("error", "MACRO_OUTPUT_LIMIT")
    assert want[3] is not None
    _same_with_plans(text, ctx)


def test_a_failing_context_handler_is_reported_the_same_from_plans() -> None:
    from tavernbox.macros.registry import context_handler

    registry = MacroRegistry.default()
    calls: list[int] = []

    def boom(ctx: MacroContext) -> str:
        calls.append(1)
        raise KeyError("nope")

    registry.register("boom", context_handler(boom))
    registry.register("who", context_handler(lambda ctx: 42))  # a non-string value is converted
    text = "a {{boom}} b {{who}}"
    want = _reference(text, MacroContext(), registry=registry)[0]
    assert want.text == "a {{boom}} b 42"
    assert [d.code for d in want.diagnostics] == ["MACRO_HANDLER_ERROR"]
    _same_with_plans(text, MacroContext(), registry=registry)
    assert calls


def test_literal_variable_and_constant_macros_from_plans_match_the_evaluator() -> None:
    text = (
        "{{setvar::a::5}}{{getvar::a}} {{setglobalvar::g::x}}{{getglobalvar::g}} {{getvar::missing}}|"
        "{{setvar::::v}}{{reverse::abc}}{{newline::2}}{{space::99999999}}{{newline::-1}}{{// note }}"
        "{{noop}}{{trim}}{{else}} {{getvar::obj}}"
    )
    ctx = MacroContext.from_dict({**CONTEXT, "variables": {"local": {"obj": [1, {"k": 2}]}, "global": {}}})
    want = _reference(text, ctx)[0]
    assert want.text.startswith("5 x |{{setvar::::v}}cba\n\n{{space::99999999}}")
    assert {d.code for d in want.diagnostics} >= {"MACRO_REPEAT_LIMIT", "MACRO_HANDLER_ERROR"}
    _same_with_plans(text, ctx)


def test_parsed_dice_formulas_are_reused_and_refusals_raised_each_time() -> None:
    from tavernbox.macros.dice import parse_formula

    assert parse_formula("2d6+1") == parse_formula("2d6+1") == (2, 6, 1)
    for _ in range(2):
        with pytest.raises(TemplateError) as info:
            parse_formula("5000d6")
        assert info.value.code == "MACRO_ROLL_LIMIT"


def test_if_macros_bound_by_plans_match_the_evaluator() -> None:
    text = (
        "{{if {{getvar::t}}}}A {{user}}{{else}}B{{/if}}|{{if !{{getvar::t}}::x}}|{{if .t}}v{{/if}}|"
        "{{if user}}\n  indented\n  {{char}}\n{{/if}}|{{#if 1}}  kept  {{/if}}|{{if}}{{/if}}|{{if a::b::c}}|"
        "{{if 1}}{{if 0}}in{{else}}out{{/if}}{{/if}}|{{if 1}}{{/if}}"
    )
    for variables in ({"t": "wary"}, {"t": ""}, {}):
        ctx = MacroContext.from_dict({**CONTEXT, "variables": {"local": variables, "global": {}}})
        _same_with_plans(text, ctx)
