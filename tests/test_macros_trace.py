"""Traced renders: which macro or variable read produced each range of the output.

Tracing observes and never changes the output: over every SillyTavern conformance row the
traced text and variables equal the untraced ones, and the ranges are ordered, disjoint and
inside the text. The post-processing steps (escaped braces, ``{{trim}}``, the else marker)
move the ranges with the text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.macros import MacroContext, compile_macros, expand_macros
from tavernbox.macros.trace import map_through_deletions, post_process_traced
from tavernbox.macros.evaluator import post_process
from tavernbox.testing.strategies import macro_templates

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "conformance" / "st-macros.jsonl"

#: ``now`` is fixed: a render reads the clock per call otherwise, and a generated
#: ``{{datetimeformat:x}}`` (milliseconds) then differed between the plain and the traced render
CTX: dict[str, Any] = {
    "now": "2026-05-04T03:02:01.123Z",
    "user": "Ann",
    "char": "Bob",
    "variables": {"local": {"x": "5", "mood": "calm"}, "global": {"g": "G"}},
}


def _check_ranges(text: str, segments: tuple[Any, ...]) -> None:
    last = 0
    for s in segments:
        assert last <= s.start < s.end <= len(text)
        last = s.end


def test_each_top_level_macro_names_its_output_range_and_source() -> None:
    source = "Hi {{user}}, meet {{char}}."
    result = expand_macros(source, CTX, trace=True)
    assert result.text == "Hi Ann, meet Bob."
    found = [(result.text[s.start : s.end], s.macro, source[s.source_start : s.source_end]) for s in result.segments]
    assert found == [("Ann", "user", "{{user}}"), ("Bob", "char", "{{char}}")]
    assert all(s.kind == "macro" and s.reads == () for s in result.segments)


def test_variable_reads_are_their_own_kind_with_scope_and_name() -> None:
    result = expand_macros("{{getvar::x}}|{{.mood}}|{{getglobalvar::g}}|{{$g}}", CTX, trace=True)
    assert result.text == "5|calm|G|G"
    assert [(s.kind, s.reads) for s in result.segments] == [
        ("variable", (("local", "x"),)),
        ("variable", (("local", "mood"),)),
        ("variable", (("global", "g"),)),
        ("variable", (("global", "g"),)),
    ]
    assert result.segments[1].to_dict()["scope"] == "local" and result.segments[1].to_dict()["name"] == "mood"


def test_a_scoped_macro_owns_its_body_and_lists_the_reads_inside() -> None:
    source = "A {{if .mood}}\n  mood {{getvar::mood}}\n{{/if}} B"
    result = expand_macros(source, CTX, trace=True)
    assert result.text == "A mood calm B"
    (seg,) = result.segments
    assert (seg.macro, seg.kind, result.text[seg.start : seg.end]) == ("if", "macro", "mood calm")
    assert source[seg.source_start : seg.source_end] == "{{if .mood}}\n  mood {{getvar::mood}}\n{{/if}}"
    assert ("local", "mood") in seg.reads


def test_variables_written_then_read_in_the_same_text() -> None:
    result = expand_macros("a{{setvar::k::v}}b{{getvar::k}}c", CTX, trace=True)
    assert result.text == "abvc"
    (seg,) = result.segments  # the write produced no text: no range
    assert (seg.start, seg.end, seg.reads) == (2, 3, (("local", "k"),))


def test_ranges_follow_the_post_processing() -> None:
    # \{ loses its backslash, {{trim}} takes its newlines: the later ranges move left
    source = "\\{ {{user}}\n{{trim}}\n{{char}} \\} {{user}}"
    plain = expand_macros(source, CTX)
    result = expand_macros(source, CTX, trace=True)
    assert result.text == plain.text == "{ AnnBob } Ann"
    assert [result.text[s.start : s.end] for s in result.segments] == ["Ann", "Bob", "Ann"]


def test_preprocessed_markers_point_back_at_the_callers_text() -> None:
    source = "<USER> meets {{char}}"
    result = expand_macros(source, CTX, trace=True)
    assert [source[s.source_start : s.source_end] for s in result.segments] == ["<USER>", "{{char}}"]


def test_an_untraced_render_reports_no_segments_and_a_compiled_template_traces_every_time() -> None:
    assert expand_macros("{{user}}", CTX).segments == ()
    template = compile_macros("{{user}} {{char}} {{getvar::x}}")
    for _ in range(4):  # from the second render on, an untraced render runs from its plan
        assert template.expand(CTX).segments == ()
        traced = template.expand(CTX, trace=True)
        assert [s.macro for s in traced.segments] == ["user", "char", "getvar"]
        assert traced.text == template.expand(CTX).text


def test_to_dict_lists_segments_only_when_traced() -> None:
    assert "segments" not in expand_macros("{{user}}", CTX).to_dict()
    data = expand_macros("{{user}}", CTX, trace=True).to_dict()
    assert data["segments"] == [
        {"kind": "macro", "macro": "user", "start": 0, "end": 3, "source_start": 0, "source_end": 8}
    ]


def test_map_through_deletions_moves_and_clamps() -> None:
    ranges = [[0, 2], [3, 6], [8, 10]]
    map_through_deletions(ranges, [(1, 2), (4, 5), (9, 12)])
    assert ranges == [[0, 1], [2, 4], [6, 7]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\n", "\r", "\\", "{", "}", "{{trim}}", "{{TRIM}}", "\x00\x1fELSE\x1f\x00"])))
def test_traced_post_processing_gives_the_same_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    ranges = [[0, len(text)]]
    assert post_process_traced(text, ranges) == post_process(text)
    assert 0 <= ranges[0][0] <= ranges[0][1] <= len(post_process(text))


@pytest.mark.needs_shared("conformance/st-macros.jsonl")
def test_tracing_never_changes_a_conformance_render() -> None:
    base = {
        "user": "User",
        "char": "Character",
        "persona": "PERSONA",
        "character": {"description": "DESC", "first_mes": "Hi!"},
        "chat": [],
        "chat_id_hash": 123456,
    }
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) > 1000
    for row in rows:
        ctx = MacroContext.from_dict(
            {**base, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        plain = expand_macros(row["template"], ctx)
        traced = expand_macros(row["template"], ctx, trace=True)
        assert (traced.text, traced.variables) == (plain.text, plain.variables), row["id"]
        _check_ranges(traced.text, traced.segments)


@pytest.mark.needs_shared("conformance/st-macros.jsonl")
def test_traced_renders_from_the_plan_equal_the_first_traced_render() -> None:
    # the first render marks ranges in the evaluator; from the third on the top level runs
    # from its plan's traced twin: the same text, variables and ranges every time
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    planned = 0
    for row in rows:
        ctx = MacroContext.from_dict(
            {**CTX, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        template = compile_macros(row["template"])
        first = template.expand(ctx, trace=True)
        for _ in range(3):
            again = template.expand(ctx, trace=True)
            assert (again.text, again.variables, again.segments) == (first.text, first.variables, first.segments), row["id"]
        planned += any(memo.traced is not None for level in template._levels.values() for memo in level.depths.values())
    assert planned > 500  # the twin really ran


def test_a_planned_scoped_macro_keeps_its_whole_source_span() -> None:
    source = "x {{if .mood}}yes{{/if}} {{user}}"
    template = compile_macros(source)
    for _ in range(4):
        result = template.expand(CTX, trace=True)
        assert [source[s.source_start : s.source_end] for s in result.segments] == ["{{if .mood}}yes{{/if}}", "{{user}}"]


@settings(max_examples=150, deadline=None)
@given(macro_templates())
def test_tracing_never_changes_a_generated_render(template: str) -> None:
    compiled = compile_macros(template)
    plain = compiled.expand(CTX, seed=3)
    for _ in range(3):  # the first traced render marks in the evaluator, later ones run the plan's twin
        traced = compiled.expand(CTX, seed=3, trace=True)
        assert (traced.text, traced.variables, traced.draws) == (plain.text, plain.variables, plain.draws)
        _check_ranges(traced.text, traced.segments)
