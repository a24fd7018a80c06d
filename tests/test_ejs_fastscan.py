"""The parser's str.find fast path (``_scan_common``) cuts exactly what the grammar cuts.

The fast path handles text plus well-formed opener-code-closer tags and hands everything else to
the Lark grammar. These tests pin both halves: wherever it answers, its nodes equal the grammar's
(offsets included), and the unusual shapes are refused so that the grammar decides them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.ejs.parser import _parser, _scan_common, _slurp
from tavernbox.testing.strategies import ejs_templates

GOLDEN = Path(__file__).resolve().parent / "golden" / "ejs_cases.json"

pieces = st.lists(
    st.sampled_from(["<%", "<%_", "<%=", "<%-", "<%#", "<%%", "%%>", "%>", "-%>", "_%>", " ", "\t", "\n",
                     "a", "-", "_", "%", "<", ">", "=", "#", "x = 1;", "'%'", "\"<\""]),
    max_size=16,
).map("".join)


def grammar_nodes(text: str) -> tuple[object, ...]:
    return tuple(_parser().parse(text))


@settings(max_examples=400, deadline=None)
@given(st.one_of(pieces, ejs_templates()))
def test_fast_path_agrees_with_the_grammar(template: str) -> None:
    text, _, _ = _slurp(template)
    fast = _scan_common(text)
    if fast is None:
        return
    assert fast == grammar_nodes(text)


@pytest.mark.parametrize("template", [
    "a %> b",          # stray closer in text
    "a <%% b",         # literal open
    "<% a %%>",        # literal close ends the code
    "<%=%>",           # empty code
    "<%--%>",          # empty code before a trimming closer
    "<%=%>%>",         # odd shape ejs accepts
    "<% a <%= b %>",   # a tag inside a tag
    "<% never closed",
    "x <%",
])
def test_unusual_shapes_go_to_the_grammar(template: str) -> None:
    assert _scan_common(_slurp(template)[0]) is None


def test_common_shapes_take_the_fast_path() -> None:
    text = "Hi <%= name %>!\n<%_ if (a) { -%>\n<%- raw _%>\t<%# note %>a-b_c%d<e>"
    nodes = _scan_common(_slurp(text)[0])
    assert nodes is not None
    assert nodes == grammar_nodes(_slurp(text)[0])


def test_golden_templates_parse_the_same_either_way() -> None:
    cases = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
    fast_count = 0
    for case in cases:
        text, _, _ = _slurp(case["template"])
        fast = _scan_common(text)
        if fast is not None:
            assert fast == grammar_nodes(text), case["id"]
            fast_count += 1
    assert fast_count > 20
