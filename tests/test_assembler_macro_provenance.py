"""Span provenance down to the macro: each range a macro or a variable read produced is named.

The issue's rule: every final message's content is covered by UTF-16 ranges naming the rule,
source, block, resource and field, "or macro, or variable read" that produced each range, and
this survives system merging, inlined source macros, the static-render cache and replay.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from _assembler_support import assemble, require_macro_engine, rule

from tavernbox.assembler import replay
from tavernbox.assembler.render import COMPILED_TEMPLATES, RenderOutput, compose_text

NATIVES = [rule("native-system"), rule("history"), rule("input")]
CARD = {
    "character": {"data": {"name": "Seraphina", "description": "Guards {{user}}'s grove."}},
    "persona": {"name": "Ann"},
}


def _utf16_slice(text: str, start: int, end: int) -> str:
    return text.encode("utf-16-le")[2 * start : 2 * end].decode("utf-16-le")


def _named(r: Any, index: int) -> list[tuple[str, str | None, str | None]]:
    """(text, kind, macro) of each span of message ``index``."""
    content = r.messages[index]["content"]
    return [(_utf16_slice(content, s["start"], s["end"]), s.get("kind"), s.get("macro")) for s in r.provenance[index]["spans"]]


def test_each_macro_output_is_its_own_range_with_the_blocks_identity() -> None:
    require_macro_engine()
    r = assemble([*NATIVES, rule("custom", "c", text="😀 {{user}} meets {{char}}.", role="user")], assets=CARD)
    assert r.messages[-1]["content"] == "😀 Ann meets Seraphina."
    assert _named(r, -1) == [
        ("😀 ", None, None),
        ("Ann", "macro_output", "user"),
        (" meets ", None, None),
        ("Seraphina", "macro_output", "char"),
        (".", None, None),
    ]
    spans = r.provenance[-1]["spans"]
    assert {s["rule_id"] for s in spans} == {"c"} and {s["source_id"] for s in spans} == {"custom"}


def test_a_variable_read_names_its_scope_and_variable() -> None:
    require_macro_engine()
    text = "{{setvar::mood::calm}}Mood: {{getvar::mood}}; {{if {{getvar::mood}}}}ok{{/if}}"
    r = assemble([*NATIVES, rule("custom", "c", text=text, role="user")])
    assert r.messages[-1]["content"] == "Mood: calm; ok"
    spans = r.provenance[-1]["spans"]
    read = next(s for s in spans if s.get("kind") == "variable_read")
    assert (read["macro"], read["scope"], read["name"]) == ("getvar", "local", "mood")
    assert _utf16_slice(r.messages[-1]["content"], read["start"], read["end"]) == "calm"
    scoped = next(s for s in spans if s.get("macro") == "if")
    assert scoped["kind"] == "macro_output" and scoped["reads"] == [{"scope": "local", "name": "mood"}]


def test_a_macro_inside_an_inlined_source_macro_belongs_to_the_inlined_block() -> None:
    require_macro_engine()
    r = assemble([*NATIVES, rule("custom", "c", text="About: {{description}}", role="user")], assets=CARD)
    assert r.messages[-1]["content"] == "About: Guards Ann's grove."
    spans = r.provenance[-1]["spans"]
    user = next(s for s in spans if s.get("kind") == "macro_output")
    assert user["macro"] == "user" and user["field"] == "description" and user["source_id"] == "character"
    assert _utf16_slice(r.messages[-1]["content"], user["start"], user["end"]) == "Ann"
    # the rest of the inlined text is still attributed to the description block, as a source macro
    around = [s for s in spans if s.get("kind") == "macro" and s.get("macro") == "description"]
    assert [_utf16_slice(r.messages[-1]["content"], s["start"], s["end"]) for s in around] == ["Guards ", "'s grove."]


def test_macro_ranges_survive_system_merging() -> None:
    require_macro_engine()
    r = assemble(
        [NATIVES[0], rule("custom", "a", text="I am {{char}}.", role="system"),
         rule("custom", "b", text="You are {{user}}.", role="system"), *NATIVES[1:]],
        assets=CARD,
    )
    assert r.messages[0]["content"] == "S\n\nI am Seraphina.\n\nYou are Ann."
    named = [(t, k, m) for t, k, m in _named(r, 0) if k == "macro_output"]
    assert named == [("Seraphina", "macro_output", "char"), ("Ann", "macro_output", "user")]
    rules = [s["rule_id"] for s in r.provenance[0]["spans"] if s.get("kind") == "macro_output"]
    assert rules == ["a", "b"]


def test_the_static_render_cache_keeps_the_ranges_and_replay_reproduces_them() -> None:
    require_macro_engine()
    COMPILED_TEMPLATES.clear()
    rules = [*NATIVES, rule("custom", "c", text="{{char}} waits for {{user}}", role="user")]
    first = assemble(rules, assets=CARD)
    second = assemble(rules, assets=CARD)  # served from the remembered static render
    assert second.provenance == first.provenance
    assert any(s.get("macro") == "user" for s in first.provenance[-1]["spans"])
    again = replay(json.loads(json.dumps(first.record)))
    assert again.provenance == first.provenance


def test_compose_text_moves_macro_ranges_past_markers_trimming_and_literals() -> None:
    # the renderer reports ranges in its own output, which still holds the markers of an inlined
    # source macro and a literal token; the final ranges must land on the right characters
    def render(text: str) -> RenderOutput:
        i = text.index("X")
        return RenderOutput("  " + text, segments=((i + 2, i + 3, {"kind": "macro_output", "macro": "x"}),))

    out = compose_text("{{d}} X {{lit}}", [(0, 5, "d", "DD", {"kind": "macro", "macro": "d"})],
                       (("lit", "L1\nL2"),), render, True)
    assert out.text == "DD X L1\n     L2"
    found = {i.get("macro"): out.text[s:e] for s, e, i in out.spans if i}
    assert found == {"d": "DD", "x": "X", "lit": "L1\n     L2"}


def test_changing_a_returned_provenance_does_not_reach_the_next_request() -> None:
    require_macro_engine()
    rules = [*NATIVES, rule("custom", "c", text="{{setvar::m::x}}{{if {{getvar::m}}}}{{char}}{{/if}}", role="user")]
    first = assemble(rules, assets=CARD)
    span = next(s for s in first.provenance[-1]["spans"] if s.get("macro") == "if")
    span["reads"].append({"scope": "local", "name": "forged"})
    span["macro"] = "forged"
    second = assemble(rules, assets=CARD)
    again = next(s for s in second.provenance[-1]["spans"] if s.get("kind") == "macro_output")
    assert again["macro"] == "if" and again["reads"] == [{"scope": "local", "name": "m"}]


def test_shared_span_infos_in_the_record_refuse_changes_and_copy_as_plain_dicts() -> None:
    import copy
    import pickle

    require_macro_engine()
    r = assemble([*NATIVES, rule("custom", "c", text="Hi {{char}}", role="user")], assets=CARD)
    seg = next(e for e in r.record["renders"] if e.get("segments"))["segments"][0]
    info = seg[2]
    with pytest.raises(TypeError):
        info["macro"] = "forged"
    with pytest.raises(TypeError):
        info.update(macro="forged")
    assert info["macro"] == "char"
    for twin in (dict(info), copy.copy(info), copy.deepcopy(info), pickle.loads(pickle.dumps(info))):
        assert type(twin) is dict and twin == info
    assert json.loads(json.dumps(r.record))["renders"]  # still plain JSON
