"""The region-by-region parse (``_region_items``) equals the whole-document parse, node for node.

``document_items`` first cuts a document at the points where SillyTavern's lexer is back in plain
text, reads simple macros off one regex match and parses the other regions alone; it falls back
to lexing and parsing the whole document when a region is not clean. That shortcut is only sound
if it builds exactly the whole-document items, *including* each argument's reusable items (which
``ArgNode`` equality ignores), on every text and every window of it the evaluator parses.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.macros.parser import ArgNode, MacroNode, document_items
from tavernbox.macros.regions import _region_items
from tavernbox.testing.strategies import macro_templates
from macro_support import NO_REGIONS

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _deep(value: Any) -> Any:
    """A comparable form of items that keeps what ``==`` skips (argument items, derived keys)."""
    if isinstance(value, MacroNode):
        return (
            "macro", value.start, value.end, value.complete, value.flags, value.name, value.key, value.closing,
            _deep(value.args), value.var, value.inner_start, value.inner_end, _deep(value.parts),
        )
    if isinstance(value, ArgNode):
        return ("arg", value.span, _deep(value.items))
    if isinstance(value, (list, tuple)):
        return tuple(_deep(v) for v in value)
    return value


def _same(text: str, lo: int = 0, hi: int | None = None) -> bool:
    """Whether the region path answered (and then agreed); asserts agreement."""
    end = len(text) if hi is None else hi
    whole = document_items(text, lo, end, shortcuts=NO_REGIONS)
    fast = _region_items(text, lo, end, 64)
    if fast is None:
        return False
    assert whole[1] == [] and whole[2], (text, lo, end)  # the shortcut only answers clean parses
    assert _deep(fast) == _deep(whole[0]), (text, lo, end)
    assert document_items(text, lo, end) == (fast, [], True)
    return True


def _texts(shared: Any) -> list[str]:
    """The templates of SillyTavern's conformance rows (``../shared``)."""
    data = shared("conformance", "st-macros.jsonl")
    return [json.loads(line)["template"] for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_regions_equal_the_whole_document_on_conformance_rows_and_their_windows(shared: Any) -> None:
    rnd = random.Random(7)
    answered = 0
    for text in _texts(shared):
        answered += _same(text)
        for _ in range(4):  # windows, as the evaluator parses argument and body spans
            lo = rnd.randrange(len(text) + 1)
            hi = rnd.randrange(lo, len(text) + 1)
            _same(text, lo, hi)
    assert answered > 500  # the shortcut is actually exercised


def test_regions_equal_the_whole_document_on_the_benchmark_documents() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_macros
    finally:
        sys.path.remove(str(BENCH))
    for doc in [bench_macros.MACRO_TEMPLATE, *bench_macros._ten_kb_documents(5)]:
        assert _same(doc)


def test_simple_macro_edge_shapes() -> None:
    cases = [
        "{{user}}", "{{/if}}", "{{!user}}", "{{>user}}", "{{user-}}", "{{a::}}", "{{a::::}}", "{{a:: x ::y }}",
        "{{a::\u00a0x\u3000}}", "{{a::x\x1f}}", "{{a::\x1cx\x85}}", "{{a::x=\"y\"}}", "{{a:::b}}", "{{a:b}}", "{{a b}}",
        "{{ a}}", "{{a }}", "{{{a}}}",
        "{{// note 12 }}", "{{//}}", "{{///x}}", "{{/ /x}}", "{{a some text}}", "{{a  }}", "{{a\u00a0x}}",
        "{{a x::y}}", "{{!// x}}", "{{#a b c}}", "{{a\tx=\"q\"}}", "{{// a::b}}", "{{//:x}}", "{{/a b}}",
        "{{if {{getvar::x}}}}", "{{a::x{{b}}y::{{c::d}} }}", "{{.x}}", "{{$x--}}", "{{.x ++ }}", "{{.x = }}",
        "{{.x += {{user}} and 1}}", "{{.a-b ?? z}}", "{{.a- = 1}}", "{{.a--b}}", "{{.x == y}}", "{{.x++ = 1}}",
        "{{. x}}", "{{.1x}}", "{{.x|y}}", "{{a {{b}}}}", "{{a {{b c}} d}}", "{{a::{{{b}}}}}", "{{a::{{b}}{{c}}}}",
        "{{a {{.x}}}}", "{{.x = a:b|c\\d}}", "{{.x ||= {{a::b}}}}", "{{a::{{b}}}}}", "{{a::{{b::{{c}}}}}}",
        "{{.x<=3}}", "{{.x<3}}", "{{.x>=3}}", "{{.x-=1}}", "{{!.x}}", "{{.x={{.y}}}}", "{{a::{{// c}}}}",
        "{{a::b}", "{{a::b}}}", "x{{a::{{b}}}}y", "{{a::b|c}}", "{{a::b\\|c}}", "{{//x}}", "{{#a::1}}", "{{?a}}",
        "{{~a}}", "{{a}}{{", "{{", "{", "}}", "{{a::b}}{{/a}}", "{{a::\n}}", "{{a::}}}}",
        # whitespace the lexer skips before and after a flag and after a variable's scope
        "{{ user }}", "{{\n\tuser}}", "{{ ! user}}", "{{!\u00a0user}}", "{{ /if}}", "{{ / if}}", "{{ //x}}",
        "{{ ! // x}}", "{{ // a::b}}", "{{ . x}}", "{{\n$ x ++}}", "{{ .x = {{ user }} }}", "{{ a:: {{ b }} }}",
        "{{ }}", "{{ ! }}", "{{ . }}", "{{ .}}", "{{ $ = 1}}", "{{ !?user}}", "{{ ! ? user}}", "{{ {{user}}}}",
        "{{ a {{ b c}} d}}", "{{ ~a b}}", "{{ #a::1 }}", "{{ >a}}", "{{\u3000a\u2028}}", "{{ a\u00a0}}",
        # the one argument after a single colon
        "{{roll:1d6}}", "{{a: b }}", "{{a:}}", "{{a: }}", "{{a:\u00a0}}", "{{a:b::c}}", "{{a:b:c}}", "{{a::b:c}}",
        "{{a:::b}}", "{{a::::b}}", "{{a:{{b}}}}", "{{a:{{b:c}} d}}", "{{a:b|c}}", "{{a:b\\|c}}", "{{a:\u00a0b}}",
        "{{a:=\"x\"}}", "{{a :b}}", "{{a:}x}}", "{{a:{x}}", "{{.x = a:b}}", "{{a::{{b:c}}}}", "{{// a:b}}",
        "{{a: {{ b }} }}", "{{ a:b }}", "{{a:b}}{{a:b}}{{a:b }}", "{{a:{{b:}}}}", "{{a:{{{b}}}}}", "{{a::}}:b}}",
        "{{a:b{{c}}::d}}", "{{a:\n}}", "{{a:\n:}}", "{{a:}}}}", "{{!a:b}}", "{{a:{{.x}}}}", "{{a:{{ }}}}",
        # several flags, with whitespace between
        "{{!#a}}", "{{ ! # a }}", "{{/?a::b}}", "{{>#a b}}", "{{#!.x = 1}}", "{{!!a:b}}", "{{/ /x}}", "{{! //c}}",
        "{{!#}}", "{{! #}}", "{{!#//}}", "{{~?a{{!#b}}}}", "{{a::{{!#b::c}}}}",
        # the whitespace form and comments holding colons (not first)
        "{{a x::y}}", "{{a x:y:}}", "{{a :x}}", "{{a ::x}}", "{{a x:: }}", "{{a x{{b}}::y}}", "{{// a::b:c}}",
        "{{//:x}}", "{{//::x}}", "{{// :x}}", "{{//x:}}", "{{ // a :: {{ b }} }}", "{{a \u00a0:x}}",
        # "{{" that the lexer leaves at once
        "{{ <x", "{{ ", "{{}x", "{{ {{user}}", "{{1}}", "{{ }", "{{\n\t", "{{-a}}", "{{_}}", "{{ 😀 }}", "{{ \\| }}",
    ]
    for text in cases:
        _same(text)
        for lo in range(len(text) + 1):
            for hi in range(lo, len(text) + 1):
                _same(text, lo, hi)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates(), st.data())
def test_regions_equal_the_whole_document_on_macro_templates(text: str, data: st.DataObject) -> None:
    _same(text)
    lo = data.draw(st.integers(0, len(text)))
    hi = data.draw(st.integers(lo, len(text)))
    _same(text, lo, hi)


def test_repeated_simple_macros_built_from_their_shape_equal_the_whole_document() -> None:
    # the second and later copies of a source are built from the first one's shape (issue 14)
    from tavernbox.macros.regions import _from_shape, _shape

    once = [
        "{{user}}", "{{/if}}", "{{!user}}", "{{a::}}", "{{a:: x ::y }}", "{{a::\u00a0x\u3000}}", "{{a b}}", "{{if 1}}",
        "{{// note }}", "{{a  }}", "{{#a b c}}", "{{a::x{{b}}y}}", "{{.x = 1}}", "{{$x--}}", "{{a::::b}}", "{{a:b}}",
    ]
    text = "".join(f"{piece} . {piece}{piece}\n" for piece in once) * 3
    assert _same(text)
    # a copy followed by what would extend or break it is read by the match, not by the last copy
    for tricky in ("{{if 1}}{{if 1}}}}", "{{a b}}{{a b}}{{a bc}}", "{{x}}{{x}}{{{x}}}", "{{a::b}}{{a::b}}{{a::b|c}}",
                   "{{a::b}}{{a::b}}{{", "{{a::b}}{{a::b}}\\|{{a::b}}"):
        _same(tricky)
        _whole_equals_resumed(tricky)
    shaped = 0
    for piece in once:
        node = document_items(piece)[0][0]
        shape = _shape(node)
        if shape is not None:
            shaped += 1
            moved = document_items("pad " + piece)[0][1]
            assert _deep(_from_shape(shape, 4, 4 + len(piece))) == _deep(moved)
    assert shaped >= 10  # nested macros and variables are the ones built from the match every time


def _whole_equals_resumed(text: str, lo: int = 0, hi: int | None = None) -> None:
    end = len(text) if hi is None else hi
    resumed = document_items(text, lo, end)
    whole = document_items(text, lo, end, shortcuts=NO_REGIONS)
    assert _deep(resumed[0]) == _deep(whole[0]), (text, lo, end)
    assert resumed[1:] == whole[1:], (text, lo, end)


def test_a_malformed_region_resumes_the_whole_document_path_there() -> None:
    # valid regions first, then one the grammar rejects, a dropped character, too-deep nesting
    for text in ["{{user}} a {{if 1}} {{!a", "{{user}}{{a::b}} {{user{{pick::a}}", "x {{a}} {{b::c|}} {{d}}",
                 "{{user}} {{.}} {{user}}", "{{a}} " + "{{b::" * 70 + "}}" * 70 + " {{c}}", "{{a}}{{.x++ 1}}{{b}}",
                 "{{a}} {{#}} {{b}} {{/if}}", "{{user}}\n{{// x}}{{a:b|c}}{{"]:
        _whole_equals_resumed(text)
        for lo in range(0, len(text), 3):
            _whole_equals_resumed(text, lo)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(macro_templates(), st.data())
def test_resuming_after_the_regions_equals_the_whole_document_path(text: str, data: st.DataObject) -> None:
    _whole_equals_resumed(text)
    lo = data.draw(st.integers(0, len(text)))
    _whole_equals_resumed(text, lo, data.draw(st.integers(lo, len(text))))


def test_common_shapes_are_read_off_one_match() -> None:
    # issue 14: these went through the lexer and the LALR table region by region (a fuzzing
    # input is dense with them, and real prompts write "{{ user }}" and "{{roll:1d6}}")
    from tavernbox.macros.regions import _LONE_START, _SIMPLE_MACRO

    for text in ["{{ user }}", "{{\n\tuser}}", "{{ ! # a}}", "{{/?a::b}}", "{{ . x}}", "{{roll:1d6}}",
                 "{{a:b::c}}", "{{a x::y}}", "{{// a::b:c}}", "{{//::x}}", "{{a: {{ b }} }}"]:
        assert _SIMPLE_MACRO.fullmatch(text), text
    for text in ["{{a :x}}", "{{// :x}}", "{{a:}}", "{{ }}"]:  # a separator first, or no token: the grammar's
        assert not _SIMPLE_MACRO.fullmatch(text), text
    for text in ["{{ <x", "{{}x", "{{1}}", "{{"]:
        assert _LONE_START.match(text), text
    for text in ["{{ }}", "{{a", "{{.x", "{{/"]:
        assert not _LONE_START.match(text), text
