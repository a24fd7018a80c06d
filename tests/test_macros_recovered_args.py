"""Arguments that parsed without recovery keep their items, even in a malformed document.

SillyTavern re-parses every argument's text when it evaluates it. For a well-formed document
the evaluator skips that: the parse already holds each argument's items. A document that needed
recovery somewhere used to re-parse *every* argument, which was most of the work of evaluating
the malformed half of fuzzing inputs (issue 14). The recovery parser now records, per argument,
whether anything was inserted, deleted or skipped while its rule ran; an argument with no
recovery in it (and no character the lexer dropped) holds exactly what a re-parse of its text
finds, so it keeps its items. Every render must equal the fresh one (``shortcuts=NO_REUSE``
re-parses everything).
"""

from __future__ import annotations

import random
from typing import Any

from tavernbox.macros import MacroContext, compile_macros, expand_macros
from tavernbox.macros.parser import MacroNode, Plain, document_items
from tavernbox.testing.macro_generator import MacroTextGenerator
from macro_support import NO_REGIONS, NO_REUSE


def _args(text: str) -> dict[str, list[Any]]:
    items, _diagnostics, clean = document_items(text, shortcuts=NO_REGIONS)  # the recovery parser's nodes
    assert not clean
    return {i.name: [a.items for a in i.args] for i in items if type(i) is MacroNode}


def test_an_argument_without_recovery_keeps_its_items_in_a_malformed_document() -> None:
    # "{{!a" never closes: the document needs recovery, "{{a::b}}" does not
    assert _args("{{a::b}} {{!a")["a"] == [(Plain(5, 6),)]
    nested = _args("{{a:: {{b::c}} z}} {{d:: e {{ }}")
    assert nested["a"][0] is not None and type(nested["a"][0][0]) is MacroNode
    assert nested["d"] == [None]  # "{{ }}" inside it is a malformed macro: re-parsed when evaluated


def test_an_argument_that_needed_recovery_keeps_no_items() -> None:
    # "{{$}}" lacks its variable name: the parser inserts one, so the argument holding it is
    # re-parsed when evaluated (there the same recovery happens, and the level is not clean)
    assert _args("{{addvar {{$}} }}")["addvar"] == [None]
    assert _args("{{a::b}}{{addvar {{$}} }}") == {"a": [(Plain(5, 6),)], "addvar": [None]}


def test_an_argument_with_a_dropped_character_keeps_no_items() -> None:
    # the "{" after "user" is dropped by the lexer: the argument's text re-lexed alone keeps it
    assert _args("{{a::{{user{{x}} y}}")["a"] == [None]
    assert _args("{{b::c}}{{a::{{user{{x}} y}}")["b"] == [(Plain(5, 6),)]


CONTEXT = {
    "user": "User",
    "char": "Character",
    "character": {"description": "DESC {{user}}"},
    "variables": {"local": {"x": "5", "list": "[1,2]"}, "global": {"flag": "true"}},
    "now": "2026-11-30T10:00:00Z",
}


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return ("error", type(exc).__name__, getattr(exc, "code", None))


def test_malformed_fuzzing_texts_render_as_a_full_re_parse_does() -> None:
    # the generator's texts are about half malformed: the ones the change is about
    gen = MacroTextGenerator(random.Random(14))
    ctx = MacroContext.from_dict(CONTEXT)
    malformed = 0
    for n in range(1500):
        text = gen.text() if n % 3 else gen.fragment() + gen.text()
        if not document_items(text)[2]:
            malformed += 1
        fresh = _outcome(lambda text=text: expand_macros(text, ctx, seed=1, shortcuts=NO_REUSE))
        template = compile_macros(text)
        for _ in range(3):  # evaluated, planned, run from plans
            assert _outcome(lambda template=template: template.expand(ctx, seed=1)) == fresh, text
    assert malformed > 400


def test_the_parse_names_the_ranges_that_needed_recovery() -> None:
    from tavernbox.macros.parser import document_parse

    assert document_parse("{{user}} {{if 1}}a{{/if}}")[2:] == (True, ())
    # a region recovered on its own: only it
    assert document_parse("{{a::b}} {{ }} {{user}}")[2:] == (False, ((9, 14),))
    # a dropped character: that region
    assert document_parse("{{a::b}} {{user{{pick::a}} {{char}}")[2:] == (False, ((9, 26),))
    # nesting past the limit sends the rest the whole-document way: all of it from there
    text = "{{a}} " + "{{b::" * 70 + "}}" * 70 + " {{c}}"
    assert document_parse(text)[2:] == (False, ((6, len(text)),))


def test_a_body_that_recovery_did_not_touch_is_not_parsed_again() -> None:
    ctx = MacroContext.from_dict(CONTEXT)
    # the malformed "{{ }}" lies outside the body: the body keeps its items
    text = "{{ }} {{if 1}}a {{user}} b{{else}}c{{/if}}"
    template = compile_macros(text)
    result = template.expand(ctx, seed=1)
    assert result.text == "{{ }} a User b"
    assert result == expand_macros(text, ctx, seed=1, shortcuts=NO_REUSE)
    assert list(template._parse_cache) == [(0, len(text))]  # the top level, nothing else
    # inside the body, it is re-parsed (as SillyTavern re-parses every body)
    text = "{{if 1}}a {{ }} {{user}}{{else}}c{{/if}}"
    template = compile_macros(text)
    result = template.expand(ctx, seed=1)
    assert result == expand_macros(text, ctx, seed=1, shortcuts=NO_REUSE)
    assert len(template._parse_cache) > 1
