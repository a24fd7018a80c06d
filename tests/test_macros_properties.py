"""Properties of expand_macros over arbitrary text and over macro-heavy text (Hypothesis).

The contract (issue 2): any ``str`` expands without raising, except a ``TemplateError`` for the
documented resource limits; text with no ``{{``, ``<`` or ``\\`` comes back unchanged; the same
seed gives the same text and draws; the caller's context is never mutated; diagnostics point
into the caller's text.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tavernbox
from tavernbox import TemplateError
from tavernbox.testing.strategies import macro_templates

#: The only codes expand_macros may raise with: the hostile-input limits of the issue.
LIMIT_CODES = {
    "MACRO_INPUT_LIMIT",
    "MACRO_OUTPUT_LIMIT",
    "MACRO_ROLL_LIMIT",
    "MACRO_REPEAT_LIMIT",
    "MACRO_NESTING_LIMIT",
    "MACRO_TIME_LIMIT",
}

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: For properties that expand macro-heavy text twice per example.
HEAVY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _context() -> dict[str, Any]:
    return {
        "user": "User",
        "char": "Character",
        "persona": "PERSONA",
        "character": {
            "description": "DESC {{user}}",
            "personality": "PERS",
            "scenario": "SCEN",
            "mes_example": "<START>\nEX",
            "first_mes": "Hi!",
            "alternate_greetings": ["Alt1", "Alt2"],
        },
        "chat": [
            {"role": "user", "name": "User", "content": "hello from user"},
            {"role": "assistant", "name": "Character", "content": "reply"},
        ],
        "chat_id_hash": 123456,
        "variables": {"local": {"x": "5", "flag": "true", "list": "[1,2]"}, "global": {"flag": "0"}},
        "seed": 7,
        "now": "2026-11-30T10:00:00Z",
    }


def _expand(text: str, context: dict[str, Any], seed: int | None = None) -> Any:
    """Expand, allowing only the documented limit errors; return the result or None."""
    try:
        result = tavernbox.expand_macros(text, context, seed=seed)
    except TemplateError as error:
        assert error.code in LIMIT_CODES, (error.code, error.message)
        return None
    assert isinstance(result.text, str)
    for diagnostic in result.diagnostics:
        if diagnostic.span is not None:
            assert 0 <= diagnostic.span.start <= diagnostic.span.end <= len(text), diagnostic
    return result


@SETTINGS
@given(st.text())
def test_any_text_expands(text: str) -> None:
    _expand(text, _context())


@SETTINGS
@given(macro_templates())
def test_macro_templates_expand(text: str) -> None:
    _expand(text, _context())


_SPECIAL = re.compile(r"\{(?=\{)|[<\\]")


def _without_macro_syntax(text: str) -> str:
    """Remove ``<``, ``\\`` and braces that start ``{{`` until none is left (``{<{`` loses
    its ``<`` and would otherwise become ``{{``)."""
    while True:
        cleaned = _SPECIAL.sub("", text)
        if cleaned == text:
            return text
        text = cleaned


@SETTINGS
@given(st.text().map(_without_macro_syntax))
def test_text_without_macro_syntax_is_unchanged(text: str) -> None:
    assert "{{" not in text and "<" not in text and "\\" not in text
    result = tavernbox.expand_macros(text, _context())
    assert result.text == text
    assert result.diagnostics == ()


@HEAVY
@given(macro_templates(), st.integers(min_value=0, max_value=2**32))
def test_same_seed_same_text_and_draws(text: str, seed: int) -> None:
    first = _expand(text, _context(), seed=seed)
    tavernbox.expand_macros("{{random::a::b::c}}{{roll::1d6}}", _context(), seed=seed + 1)  # unrelated render
    second = _expand(text, _context(), seed=seed)
    if first is None:
        assert second is None
        return
    assert second is not None
    assert second.text == first.text
    assert second.draws == first.draws
    assert second.variables == first.variables


@HEAVY
@given(st.one_of(macro_templates(), st.sampled_from([
    "{{setvar::x::9}}{{addvar::list::3}}{{incvar::n}}{{setglobalvar::flag::1}}{{.x += 2}}{{$g = v}}",
    "{{deletevar::x}}{{flushglobalvar::flag}}{{.flag ||= yes}}{{.new ??= 1}}",
])))
def test_context_is_not_mutated(text: str) -> None:
    context = _context()
    before = copy.deepcopy(context)
    _expand(text, context)
    assert context == before


@HEAVY
@given(macro_templates())
def test_variables_snapshot_is_fresh(text: str) -> None:
    result = _expand(text, _context())
    if result is None:
        return
    result.variables["local"]["injected"] = "x"
    again = _expand(text, _context())
    assert again is not None and "injected" not in again.variables["local"]


# The strategy itself: every advertised feature shows up in a fixed sample of its output, so
# the properties above really exercise it.
FEATURES = {
    "scoped pair": lambda s: re.search(r"\{\{#?[a-zA-Z/]+[^{}]*\}\}.*\{\{/", s, re.S) is not None,
    "if/else": lambda s: "{{if " in s.lower() and "{{else}}" in s.lower(),
    "local shorthand with operator": lambda s: re.search(r"\{\{\s*\.[\w-]+\s*(\+\+|\?\?=|\|\|=|\+=)", s) is not None,
    "global shorthand": lambda s: re.search(r"\{\{\s*\$[\w-]+", s) is not None,
    "nested macro in an argument": lambda s: re.search(r"\{\{[^{}]*::[^{}]*\{\{[^{}]*\}\}[^{}]*\}\}", s) is not None,
    "legacy colon form": lambda s: re.search(r"\{\{\s*[a-zA-Z]+:[^:]", s) is not None,
    "whitespace form": lambda s: re.search(r"\{\{\s*[a-zA-Z][\w-]* [^\s}:]", s) is not None,
    "mixed-case name": lambda s: re.search(r"\{\{[a-z]*[A-Z][a-z]+[A-Z]", s) is not None,
    "unterminated opener": lambda s: s.rstrip().endswith("{{") or "{{ hehe" in s,
    "pipe inside braces": lambda s: re.search(r"\{\{[^}]*\|[^}]*\}\}", s) is not None,
    "backslash escape": lambda s: "\\{" in s,
    "marker": lambda s: "<USER>" in s or "<BOT>" in s or "<CHAR>" in s,
    "every edge character": lambda s: all(c in s for c in "{}:|\\!#/.$"),
}


def test_macro_templates_reach_every_feature() -> None:
    sample: list[str] = []

    @settings(max_examples=200, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(macro_templates())
    def collect(text: str) -> None:
        sample.append(text)

    collect()
    missing = [name for name, seen in FEATURES.items() if not any(seen(text) for text in sample)]
    assert not missing, missing
