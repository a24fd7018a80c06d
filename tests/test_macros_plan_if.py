"""Planned ``{{if}}`` (``builtins.core._bind_if``) gives exactly what the evaluator's ``_if`` gives.

A compiled template's ``{{if}}`` runs from a bound part from the third render on: its condition's
form, its ``{{else}}`` split and its branch levels are decided once. Each text here is rendered
several times through one template with plans on and compared with plans switched off (text,
variables, diagnostics, draws, or the same error), over the corners ``_if`` handles: inverted
conditions, variable references, macro-name conditions (a failing one too), nested ``if``s,
the inline form, ``#`` (no trim), ``{{pick}}`` inside a branch (it hashes the pre-processed
text), and a handler refusal inside a branch.
"""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.macros import MacroContext, compile_macros
from macro_support import NO_PLANS, level_plans

CTX = MacroContext.from_dict(
    {
        "user": "Ash",
        "char": "Mira",
        "chat_id_hash": 99,
        "seed": 5,
        "now": "2026-11-30T10:15:00Z",
        "variables": {"local": {"on": "yes", "off": "off", "zero": 0, "n": 3}, "global": {"g": "1"}},
    }
)

TEXTS = [
    "{{if {{getvar::on}}}}A {{user}}{{else}}B {{char}}{{/if}}",
    "{{if {{getvar::off}}}}A {{user}}{{else}}B {{char}}{{/if}}",
    "{{if !{{getvar::off}}}}  negated {{user}}  {{/if}}",
    "{{if ! {{getvar::on}}}}no{{else}}yes{{/if}}",
    "{{if .on}}local ref{{else}}x{{/if}} {{if $g}}global ref{{/if}} {{if .zero}}z{{else}}not z{{/if}}",
    "{{if user}}name cond{{/if}}{{if original}}fails, stays truthy{{/if}}",
    "{{if {{getvar::on}}}}\n    indented\n      more {{char}}\n{{else}}\n  other\n{{/if}}",
    "{{#if {{getvar::on}}}}\n  kept   \n{{/if}}|",
    "{{if {{getvar::on}}}}outer {{if {{getvar::off}}}}in{{else}}inner else {{user}}{{/if}} tail{{/if}}",
    "{{if::{{getvar::on}}::inline {{char}}}} {{if::::empty cond}}",
    "{{if {{getvar::on}}}}{{pick::a::b::c::d}} {{random::x::y}} {{roll::1d6}}{{/if}}",
    "{{if {{getvar::on}}}}{{setvar::w::1}}{{newline::99999}}{{/if}}{{getvar::w}}",
    "{{if {{getvar::on}}}}{{trim}}\nafter trim{{/if}} and {{if}}{{/if}} {{if a}}{{/if}}",
    "{{if {{getvar::n}}}}{{else}}{{/if}}[{{if 0}}x{{else}}{{/if}}]",
    "{{setvar::c::}}{{if {{getvar::c}}}}set{{else}}{{setvar::c::now}}unset {{getvar::c}}{{/if}}",
    "<USER> {{if {{getvar::on}}}}<BOT> {{time_UTC+2}}{{/if}}",
    # the pre-processed text differs from the caller's, and {{pick}} hashes the one it sees
    *("<USER>" * k + " {{if {{setvar::p::{{pick::1::2::3::4::5::6::7}}}}x}}{{pick::a::b::c::d::e::f::g}}{{/if}}{{getvar::p}}" for k in range(8)),
]


def _outcome(template: Any, **kw: Any) -> Any:
    try:
        r = template.expand(CTX, **kw)
    except TemplateError as exc:
        return ("error", exc.code, exc.message, exc.span)
    return (r.text, r.variables, r.diagnostics, r.draws)


@pytest.mark.parametrize("text", TEXTS)
def test_planned_if_equals_the_evaluator(text: str) -> None:
    want = _outcome(compile_macros(text), shortcuts=NO_PLANS)
    template = compile_macros(text)
    for _ in range(5):
        assert _outcome(template) == want


def test_a_planned_if_runs_from_its_bound_part() -> None:
    # without the binding the top-level plan would hold the generic delayed call
    template = compile_macros("x {{if {{getvar::on}}}}A{{else}}B{{/if}} y")
    for _ in range(3):
        template.expand(CTX)
    plans = level_plans(template, depth=0)
    assert plans
    names = [p.__name__ for p in plans[0].parts if not isinstance(p, str)]
    assert names == ["handled"]
