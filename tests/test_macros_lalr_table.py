"""The stored LALR(1) table (``macros/lalr_table.py``) is Lark's table for ``grammars/macros.lark``.

A fresh process reads the table instead of building it with Lark (about as long as a whole warm
assembly). Lark still owns the grammar: the stored table must be the automaton Lark builds for
the grammar file as it is (compared up to state numbering, which Lark varies from run to run),
and a grammar with another digest is built by Lark at first use.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from tavernbox.macros import lalr, lalr_table, parse_macros
from tavernbox.macros.write_lalr_table import canonical_table, table_module_text


def grammar() -> str:
    return (resources.files("tavernbox.grammars") / "macros.lark").read_text(encoding="utf-8")


#: texts whose macros go through the LALR table (nested, scoped, variable shorthands, malformed)
TEXTS = [
    "{{if {{char}}}}yes{{else}}no{{/if}}",
    "{{setvar::a::{{getvar::b}}}} {{.a += 2}} {{$g}}",
    "{{random::a,b::{{user}}}} {{ roll : 1d6 }} {{//comment}}",
    "{{#if x}}{{trim}}{{/if}} {{reverse::{{char}}",
    "{{ {{ }} }} {{::}} {{a::b::c}}",
]


def test_the_stored_table_is_larks_table_for_the_grammar() -> None:
    assert lalr_table.GRAMMAR_DIGEST == hashlib.sha256(grammar().encode("utf-8")).hexdigest(), \
        "the grammar changed: run python -m tavernbox.macros.write_lalr_table"
    assert lalr_table.TABLE == canonical_table(lalr.build_table(grammar()))
    assert canonical_table(lalr.build_table(grammar())) == canonical_table(lalr.build_table(grammar()))
    assert table_module_text().endswith("\n") and "GRAMMAR_DIGEST" in table_module_text()


def _parsed() -> list:
    return [parse_macros(t) for t in TEXTS]


def _reset() -> None:
    lalr._table.cache_clear()
    lalr._driver_table.cache_clear()
    lalr._local = None


def test_a_stale_table_is_ignored_and_lark_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _reset()
    try:
        assert lalr._table() is lalr_table.TABLE
        stored = _parsed()
        _reset()
        monkeypatch.setattr(lalr_table, "GRAMMAR_DIGEST", "0" * 64)
        built = lalr._table()
        assert built is not lalr_table.TABLE and canonical_table(built) == lalr_table.TABLE
        assert _parsed() == stored
    finally:
        monkeypatch.undo()
        _reset()
