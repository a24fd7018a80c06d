"""The parser: SillyTavern's lexer modes, the LALR grammar, and the recovery path agree.

* On every well-formed token stream the recovering parser and the LALR grammar
  (``grammars/macros.lark``) build the same nodes; on every malformed one the grammar refuses
  and the recovery records at least one event (so the grammar is the exact boundary).
* Reusing a well-formed parent's parse of an argument gives the same output as re-parsing the
  argument text the way SillyTavern does.
* The lexer's mode stack and character dropping, nesting holes, and offsets.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tavernbox.macros import expand_macros, parse_macros
from tavernbox.macros.lexer import T, tokenize
from tavernbox.macros.lalr import lalr_items
from tavernbox.macros.parser import MacroNode, Plain, document_items, validate_macro
from tavernbox.macros.recovery import _Parser
from tavernbox.testing.strategies import macro_templates
from macro_support import NO_REUSE


def _templates(shared: Any) -> list[str]:
    """The templates of SillyTavern's conformance rows (``../shared``)."""
    data = shared("conformance", "st-macros.jsonl")
    return [json.loads(line)["template"] for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]


def _both(text: str) -> tuple[list | None, list, int]:
    toks = tokenize(text)
    parser = _Parser(text, toks, len(text))
    items = parser.document()
    return lalr_items(text, toks), items, parser.anomalies


def _strip(items: list) -> list:
    """Nodes without the parse-reuse hints (the LALR path does not compute them)."""
    out = []
    for item in items:
        if isinstance(item, MacroNode):
            out.append((item.start, item.end, item.flags, item.name, [a.span for a in item.args], item.var))
        else:
            out.append(item)
    return out


def test_lalr_grammar_is_exactly_the_well_formed_boundary_on_conformance_data(shared: Any) -> None:
    accepted = 0
    for text in _templates(shared):
        lalr, items, anomalies = _both(text)
        if anomalies == 0:
            assert lalr is not None, text
            assert _strip(lalr) == _strip(items), text
            accepted += 1
        else:
            assert lalr is None, text
    assert accepted > 100


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates())
def test_lalr_grammar_boundary_on_generated_templates(text: str) -> None:
    lalr, items, anomalies = _both(text)
    if anomalies == 0:
        assert lalr is not None and _strip(lalr) == _strip(items)
    else:
        assert lalr is None


def test_reusing_parsed_arguments_equals_reparsing_them_on_conformance_data(shared: Any) -> None:
    ctx = {"user": "User", "char": "Character", "chat_id_hash": 123456}
    for text in _templates(shared):
        a = expand_macros(text, ctx)
        b = expand_macros(text, ctx, shortcuts=NO_REUSE)
        assert (a.text, a.variables) == (b.text, b.variables), text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates())
def test_reusing_parsed_arguments_equals_reparsing_them_on_generated_templates(text: str) -> None:
    # a fixed clock: {{time}}, {{isotime}} or {{datetimeformat:x}} (milliseconds) would otherwise
    # differ between the two expansions whenever the clock ticks between them
    ctx = {"user": "User", "char": "Character", "chat_id_hash": 1, "now": "2026-11-30T21:15:00Z"}
    a = expand_macros(text, ctx)
    b = expand_macros(text, ctx, shortcuts=NO_REUSE)
    assert (a.text, a.variables) == (b.text, b.variables)


def test_lexer_modes_decide_which_braces_close() -> None:
    # "{{user" then "{{pick" is dropped by the lexer (no rule after a name accepts "{"),
    # so the first macro is user with one argument and stays as written
    assert expand_macros("{{user{{pick::a}}", {"user": "U"}).text == "{{user{{pick::a}}"
    kinds = [t.type for t in tokenize("{{reverse::a|b}}")]
    assert T.PIPE in kinds and T.FIDENT in kinds


def test_lexer_tokens_carry_absolute_offsets_in_a_window() -> None:
    text = "xx{{user}}yy"
    toks = tokenize(text, 2, 10)
    assert [(t.type, t.start, t.end) for t in toks] == [(T.START, 2, 4), (T.MIDENT, 4, 8), (T.END, 8, 10)]


def test_parse_macros_returns_frozen_nodes_with_offsets() -> None:
    nodes = parse_macros("a {{reverse::b::{{user}}}} c")
    assert isinstance(nodes[0], Plain) and (nodes[0].start, nodes[0].end) == (0, 2)
    macro = nodes[1]
    assert isinstance(macro, MacroNode) and macro.name == "reverse" and macro.complete
    assert [a.span for a in macro.args] == [(13, 14), (16, 24)]
    with pytest.raises(AttributeError):
        macro.name = "x"  # type: ignore[misc]


def test_validate_macro_uses_the_lalr_grammar() -> None:
    assert validate_macro("{{setvar::x::{{user}}}}")
    assert validate_macro("{{ .x += 1 }}")
    assert not validate_macro("{{reverse::a|b}}")
    assert not validate_macro("{{user")


def test_deep_brace_nesting_becomes_a_hole_without_recursion() -> None:
    depth = 5000
    text = "{{reverse::" * depth + "x" + "}}" * depth
    items, diags, clean = document_items(text)
    assert [d.code for d in diags] == ["MACRO_NESTING_LIMIT"]
    assert items == [Plain(0, len(text))] and not clean
    assert sys.getrecursionlimit() >= 1000  # nothing above needed to raise it
