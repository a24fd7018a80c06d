"""Prompts made of ``{{setvar}}``/``{{getvar}}`` and the like are served from their last renders.

A template of ``PURE_MACROS`` is a function of the static context and the local variables before
it, so its render (text, segments, variables after) is kept under both; these tests check that a
served render equals an evaluated one, that any difference in the variables or the context is a
new render, and that anything reading more (the chat, a global variable, the random stream, the
clock) is evaluated every time.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from _assembler_support import assemble, require_macro_engine, rule, texts

import tavernbox.macros
from tavernbox.assembler.render import COMPILED_TEMPLATES, TAVERN, RenderState, _pure_text

NATIVES = [rule("native-system"), rule("history"), rule("input")]
CHAIN = [
    "{{setvar::lang::Tiếng Việt}}{{setvar::n::1}}",
    "{{//a comment}}{{addvar::n::2}}{{trim}}",
    "Language: {{getvar::lang}}, n={{getvar::n}}, {{user}} and {{char}}",
    "{{incvar::n}}!{{getvar::n}}",
    "{{getvar::lang}} again",
]


@pytest.fixture
def expands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the macro engine evaluates, with the template cache emptied around the test."""
    require_macro_engine()
    seen: list[str] = []
    real = tavernbox.macros.CompiledMacros.expand

    @functools.wraps(real)
    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(self.text)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(tavernbox.macros.CompiledMacros, "expand", counting)
    COMPILED_TEMPLATES.clear()
    yield seen
    COMPILED_TEMPLATES.clear()


def _rules(chain: list[str]) -> list[dict[str, Any]]:
    return [*NATIVES, *(rule("custom", f"r{i}", text=t) for i, t in enumerate(chain))]


CARD = {"character": {"data": {"name": "Seraphina"}}, "persona": {"name": "Ann"}}


def test_a_served_chain_equals_the_evaluated_one(expands: list[str]) -> None:
    first = assemble(_rules(CHAIN), assets=CARD)
    assert texts(first)[-3:] == ["Language: Tiếng Việt, n=3, Ann and Seraphina", "4!4", "Tiếng Việt again"]
    evaluated = len(expands)
    assert evaluated == len(CHAIN)
    second = assemble(_rules(CHAIN), assets=CARD)
    assert len(expands) == evaluated  # every prompt served from its kept render
    assert texts(second) == texts(first)
    assert second.to_dict()["nodes"] == first.to_dict()["nodes"]  # text, spans and provenance alike
    assert second.record["renders"] == first.record["renders"]


def test_other_variables_before_a_prompt_are_another_render(expands: list[str]) -> None:
    assemble(_rules(CHAIN), assets=CARD)
    changed = ["{{setvar::lang::English}}{{setvar::n::1}}", *CHAIN[1:]]
    r = assemble(_rules(changed), assets=CARD)
    assert texts(r)[-3:] == ["Language: English, n=3, Ann and Seraphina", "4!4", "English again"]
    # the first prompt is new; the others see new variables, so each is evaluated again
    assert expands[len(CHAIN):] == changed


def test_another_static_context_is_another_render(expands: list[str]) -> None:
    assemble(_rules(CHAIN), assets=CARD)
    other = {"character": {"data": {"name": "Lilith"}}, "persona": {"name": "Ann"}}
    r = assemble(_rules(CHAIN), assets=other)
    assert texts(r)[-3] == "Language: Tiếng Việt, n=3, Ann and Lilith"


def test_variables_a_served_render_leaves_reach_an_evaluated_prompt(expands: list[str]) -> None:
    chain = [*CHAIN, "{{getvar::n}} at {{lastMessage}}"]  # reads the chat: evaluated every time
    first = assemble(_rules(chain), assets=CARD)
    second = assemble(_rules(chain), assets=CARD)
    assert texts(second) == texts(first)
    assert texts(second)[-1].startswith("4 at ")
    assert expands[len(chain):] == [chain[-1]]


@pytest.mark.parametrize("text", [
    "{{setvar::a::1}}{{random::x,y}}", "{{getvar::a}}{{lastMessage}}", "{{setglobalvar::a::1}}",
    "{{getglobalvar::a}}", "{{.a}}", "{{#if 1}}x{{/if}}", "{{//  {{roll::d6}} }}", "{{time}}",
    "{{setvar::a::{{pick::x,y}}}}", "{{ ::a}}", "{{outlet::x}}", "{{trim}}x{{/trim}}",
])
def test_what_reads_more_than_variables_and_names_is_not_pure(text: str) -> None:
    assert not _pure_text(text)


@pytest.mark.parametrize("text", [
    "{{setvar::a::1}}", "{{ GetVar :: a }}", "{{// x }}{{comment::y}}{{noop}}{{newline}}", "{{user}}: {{getvar::a}}",
    "{{incvar::n}}{{decvar::n}}{{hasvar::n}}{{varexists::n}}{{deletevar::n}}{{flushvar::n}}",
])
def test_variable_prompts_are_pure(text: str) -> None:
    assert _pure_text(text)


def _render(text: str, local: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    state = RenderState(macro_context={"user": "Ann", "char": "Sera"}, local_variables=dict(local))
    out = TAVERN.render(text, state)
    return out.text, state.local_variables


@pytest.mark.parametrize("local", [{}, {"n": "1"}, {"n": 1}, {"n": 1.0}, {"n": True}, {"n": None},
                                   {"a": "x", "n": "2"}, {"n": "2", "a": "x"}])
def test_kept_renders_are_keyed_by_the_exact_variables(local: dict[str, Any], expands: list[str]) -> None:
    text = "{{addvar::n::1}}{{getvar::n}}|{{getvar::a}}"
    fresh = _render(text, local)
    for other in ({}, {"n": "1"}, {"n": 1}, {"n": True}, {"a": "x", "n": "2"}):
        _render(text, other)  # fill the kept renders with neighbours
    assert _render(text, local) == fresh
    COMPILED_TEMPLATES.clear()
    assert _render(text, local) == fresh


def test_nested_values_are_not_keyed(expands: list[str]) -> None:
    text = "{{getvar::obj}}"
    _render(text, {"obj": {"k": [1, 2]}})
    _render(text, {"obj": {"k": [1, 2]}})
    assert len(expands) == 2  # evaluated each time: no digest of nested values
