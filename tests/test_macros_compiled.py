"""A compiled template expands exactly like a fresh ``expand_macros``, render after render.

``compile_macros(text)`` keeps the parse of every argument and body it meets (and each level's
scoped pairs) for later renders, and ``expand_macros`` reuses compiled templates of texts it has
seen. Those caches are only sound if they never change a result, so every conformance row and
Hypothesis' macro-heavy text is rendered three ways: fresh (``shortcuts=NO_REUSE``: no parse
reuse, no cache), and twice through one compiled template (the second render runs on the caches
the first filled). All three ``MacroResult``s must be equal: text, variables, diagnostics, draws.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.macros import MacroContext, MacroRegistry, compile_macros, expand_macros
from tavernbox.testing.strategies import macro_templates
from macro_support import NO_REUSE

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "conformance" / "st-macros.jsonl"

CONTEXT: dict[str, Any] = {
    "user": "User",
    "char": "Character",
    "persona": "PERSONA",
    "character": {"description": "DESC", "personality": "PERS", "first_mes": "Hi!"},
    "chat": [{"role": "user", "name": "User", "content": "hello"}],
    "chat_id_hash": 123456,
    "now": "2026-11-30T10:15:00Z",
    "seed": 3,
}


def _three_ways(text: str, ctx: MacroContext) -> None:
    fresh = expand_macros(text, ctx, shortcuts=NO_REUSE)
    compiled = compile_macros(text)
    first = compiled.expand(ctx)
    second = compiled.expand(ctx)
    assert first == fresh
    assert second == fresh
    assert expand_macros(text, ctx) == fresh  # through expand_macros' own template cache


@pytest.mark.needs_shared("conformance/st-macros.jsonl")
def test_compiled_and_cached_expansion_equals_fresh_on_every_conformance_row() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        ctx = MacroContext.from_dict(
            {**CONTEXT, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        _three_ways(row["template"], ctx)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates(), st.integers(min_value=0, max_value=2**16))
def test_compiled_and_cached_expansion_equals_fresh_on_macro_templates(text: str, seed: int) -> None:
    _three_ways(text, MacroContext.from_dict({**CONTEXT, "seed": seed}))


def test_a_registry_change_between_renders_is_seen() -> None:
    # whether {{x}}...{{/x}} pairs depends on the registry: a memoised pairing must not outlive it
    registry = MacroRegistry.default()
    registry.register("wrap", lambda call: f"[{call.args[0]}]", min_args=1, max_args=1)
    compiled = compile_macros("{{wrap}}body{{/wrap}}")
    assert compiled.expand({}, registry=registry).text == "[body]"
    registry.register("wrap", lambda call: "w", max_args=0)  # can no longer take a body
    again = compiled.expand({}, registry=registry)
    assert again == expand_macros("{{wrap}}body{{/wrap}}", {}, registry=registry, shortcuts=NO_REUSE)
    assert again.text != "[body]"


def test_compile_macros_is_public_api() -> None:
    import tavernbox
    import tavernbox.macros

    assert tavernbox.compile_macros is tavernbox.macros.compile_macros
    assert "compile_macros" in tavernbox.__all__


@pytest.mark.parametrize(
    "text", ["plain prose", "a \\{ b \\} c", "x{y}z", "{{", "{ {", "}}", "<USR>", "line\n\\{{trim}}", "\\"]
)
def test_text_without_macros_expands_like_fresh(text: str) -> None:
    # such a text's output is computed once, at compile time
    ctx = MacroContext.from_dict({**CONTEXT, "variables": {"local": {"n": 1.0}, "global": {"g": "x"}}})
    _three_ways(text, ctx)
