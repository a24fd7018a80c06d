"""A region the LALR grammar rejects is lexed once: the whole-document path resumes after it.

``_region_prefix`` lexes each top-level region to try the grammar on it; when the grammar
rejects one, the recovery parser takes over from that region's start. Its tokens are exactly
what the whole-document lexer makes first there (the lexer is in plain text before and after a
region), so they are handed over and lexing resumes at the region's end (issue 14: a fuzzing
input of a malformed macro lexed it twice). The parse must equal the whole-document parse.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from tavernbox.macros.lexer import tokenize_limited
from tavernbox.macros.parser import MAX_NESTING, Plain, document_items
from tavernbox.macros.regions import _region_prefix
from tavernbox.testing.macro_generator import MacroTextGenerator
from macro_support import NO_REGIONS, NO_REUSE


def _joined(prefix: list, rest: list) -> list:
    """Two parses one after the other, with the text where they meet one item (as in one parse)."""
    if prefix and rest and type(prefix[-1]) is Plain and type(rest[0]) is Plain and prefix[-1].end == rest[0].start:
        return [*prefix[:-1], Plain(prefix[-1].start, rest[0].end), *rest[1:]]
    return [*prefix, *rest]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return (type(value).__name__, tuple(_plain(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (tuple, list)):
        # a span is a Plain pair when read off a regex match, a tuple from the recovery parser
        name = "tuple" if type(value) is Plain else type(value).__name__
        return (name, tuple(_plain(v) for v in value))
    return value


def test_a_rejected_region_hands_its_tokens_to_the_whole_document_path() -> None:
    gen = MacroTextGenerator(random.Random(3))
    rejected = 0
    for _ in range(1500):
        text = gen.text() + " tail {{user}} {{if 1}}x{{/if}}"
        items, stop, region = _region_prefix(text, 0, len(text), MAX_NESTING)
        if isinstance(region, tuple):
            rejected += 1
            toks, end = region
            # the handed-over tokens are the whole-document lexer's first tokens from ``stop``
            errors: list[int] = []
            whole, holes = tokenize_limited(text, stop, len(text), errors, MAX_NESTING)
            assert whole[: len(toks)] == toks and (not whole[len(toks):] or whole[len(toks)][1] >= end)
        for nesting in (MAX_NESTING, 2):
            prefix, stop, region = _region_prefix(text, 0, len(text), nesting)
            if not isinstance(region, tuple):
                continue
            got = document_items(text, 0, len(text), nesting)
            # what the whole-document path makes of the rest, lexing the rejected region itself
            rest, diagnostics, clean = document_items(text, stop, len(text), nesting, shortcuts=NO_REGIONS)
            assert _plain(got[0]) == _plain(_joined(prefix, rest)), text  # text is joined where they meet
            assert (got[1], got[2]) == (diagnostics, clean), text
    assert rejected > 100  # the generator makes plenty of them


def test_a_malformed_region_recovered_on_its_own_equals_the_whole_document_path() -> None:
    # SillyTavern's recovery of a malformed region that reads no further than the type of the
    # next region's first token leaves the parser at the start of a document item: the regions
    # after it parse on their own (issue 14: the recovery parser ran over the whole rest of
    # every malformed fuzzing input, and the evaluator treated all of it as malformed)
    gen = MacroTextGenerator(random.Random(21))
    recovered_texts = 0
    for _ in range(1500):
        text = gen.text() + " tail {{user}} {{if 1}}x{{/if}}"
        recovered: list[tuple[int, int]] = []
        _items, stop, _region = _region_prefix(text, 0, len(text), MAX_NESTING, recovered)
        if recovered:
            recovered_texts += 1
            assert all(a < b <= stop for a, b in recovered)
        for lo in (0, len(text) // 3):
            got = document_items(text, lo)
            assert _plain(got) == _plain(document_items(text, lo, shortcuts=NO_REGIONS)), (text, lo)
    assert recovered_texts > 300  # the generator makes plenty of them


def test_regions_after_a_recovered_one_are_read_on_their_own() -> None:
    cases = {
        "{{a::b}} {{ }} {{user}}": [(9, 14)],
        "{{user}}{{#}}{{char}}": [(8, 13)],  # the re-sync point is the next region's "{{"
        "x {{.}} y {{if 1}}z{{/if}}": [(2, 7)],
        "{{.1}} {{user}}": [(0, 3)],  # "{{." ends the region; "1}}" is text
        "{{!}} {{.x 1}} {{user}}": [(0, 5), (6, 11)],  # "{{.x " ends the region
        # the lexer drops the "{" after "user": recovered on its own too
        "{{a::b}} {{user{{pick::a}} {{char}}": [(9, 26)],
        # nesting past the limit: the whole-document path from there (it cuts the region out)
        "{{a}} " + "{{b::" * 70 + "}}" * 70 + " {{c}}": [],
    }
    for text, regions in cases.items():
        recovered: list[tuple[int, int]] = []
        _items, stop, _region = _region_prefix(text, 0, len(text), MAX_NESTING, recovered)
        assert recovered == regions, text
        assert (stop == len(text)) == bool(regions), text
        got = document_items(text)
        assert _plain(got) == _plain(document_items(text, shortcuts=NO_REGIONS)), text
        assert got[2] is False  # a recovered region makes the parse unclean


def test_a_recovery_that_would_take_a_token_past_the_region_is_not_kept() -> None:
    # the lexer never ends a region inside a macro's arguments, so this cannot come from a text;
    # the bound still holds: a rule that takes the next region's token (here a nested "{{")
    # marks the parse spilled, and the caller goes the whole-document way
    from tavernbox.macros.lexer import T, Tok
    from tavernbox.macros.recovery import _Parser

    text = "{{a::{{b}}"
    toks = [Tok(T.START, 0, 2, 1), Tok(T.MIDENT, 2, 3, 1), Tok(T.DCOLON, 3, 5, 1)]
    parser = _Parser(text, toks, 5, next_type=T.START)
    parser.document()
    assert parser.spilled
    unbounded = _Parser(text, toks, 5)
    unbounded.document()
    assert not unbounded.spilled


def test_a_region_that_ends_on_a_skipped_rule_is_a_region_of_its_own_for_the_nesting_limit() -> None:
    # "{{." then "{": no variable name, and the lexer is back in plain text without a "}}"; the
    # "{{" that follows opens a region of its own, on both paths, so the too-deep region it
    # starts is cut out from there (the whole-document lexer used to count it from "{{.")
    text = "x {{.{{a::{{b::{{c::{{d}}}}}}}} y"
    got = document_items(text, 0, len(text), 3)
    assert _plain(got) == _plain(document_items(text, 0, len(text), 3, shortcuts=NO_REGIONS))
    assert [d.code for d in got[1]] == ["MACRO_NESTING_LIMIT"]
    assert got[1][0].span.start == text.index("{{a")


def test_a_repeated_malformed_region_is_recovered_once_and_shifted() -> None:
    # a repeat is checked without lexing it: its text, what ended it (its "}}", or the
    # characters a skipped rule stopped at) and the type of the token after it must all match
    from tavernbox.macros import MacroContext, expand_macros

    ctx = MacroContext.from_dict({"user": "U", "variables": {"local": {"x": "5"}}})
    texts = [
        "{{#}}" * 5 + "x",  # the last one is followed by text, the others by "{{"
        "{{#}}{{#}}{{{#}}",  # ... and by "{{{" (an opening brace first)
        "{{.1}}{{.x}}{{.1}}{{.}}",  # "{{." ended by "1" repeats, then goes on to a variable name
        "{{ }x{{ }}{{ }x{{ }",  # a skipped rule ended "{{ " before "}x"; "{{ }}" is a macro
        "{{a:}}{{a:}} {{if 1}}b{{/if}}{{a:}}",
        "{{.}}{{.}}{{.x = {{.}}}}",  # one nested in a variable's value
        "{{user!}}{{user!}}",  # a dropped character
        "{{$}}" * 3,  # the last one ends at the end of the input
    ]
    for text in texts:
        got = document_items(text)
        assert _plain(got) == _plain(document_items(text, shortcuts=NO_REGIONS)), text
        assert expand_macros(text, ctx) == expand_macros(text, ctx, shortcuts=NO_REUSE), text
    gen = MacroTextGenerator(random.Random(33))
    for _ in range(400):  # generated pieces, each repeated
        piece = gen.fragment()
        for text in (piece * 3, piece * 2 + "x" + piece):
            assert _plain(document_items(text)) == _plain(document_items(text, shortcuts=NO_REGIONS)), text


def test_a_repeat_of_a_recovered_region_is_neither_lexed_nor_recovered_again(monkeypatch: Any) -> None:
    from tavernbox.macros import regions as regions_module

    calls = {"lexed": 0, "recovered": 0}
    lex, recover = regions_module.tokenize_macro, regions_module._recover_region

    def counting_lex(*args: Any) -> Any:
        calls["lexed"] += 1
        return lex(*args)

    def counting_recover(*args: Any) -> Any:
        calls["recovered"] += 1
        return recover(*args)

    monkeypatch.setattr(regions_module, "tokenize_macro", counting_lex)
    monkeypatch.setattr(regions_module, "_recover_region", counting_recover)
    text = "{{#}}" * 1000 + "{{.1}}" * 1000
    assert _plain(document_items(text)) == _plain(document_items(text, shortcuts=NO_REGIONS))
    assert calls == {"lexed": 2, "recovered": 2}  # the first of each run
