"""Text rendering: source macros, literal macros, the Tavern renderer and span provenance."""

from __future__ import annotations

from typing import Any

import pytest
from _assembler_support import assemble, registry, require_macro_engine, rule, texts

import tavernbox.macros
from tavernbox.assembler.render import RenderOutput, compose_text

NATIVES = [rule("native-system"), rule("history"), rule("input")]


def identity(text: str) -> RenderOutput:
    return RenderOutput(text)


def test_literal_macros_are_never_expanded_and_keep_indentation() -> None:
    value = "hp: 10\nname: '{{user}}'"
    out = compose_text("state:\n  {{stat}}\nend", [], (("stat", value),), lambda t: RenderOutput(t.replace("{{user}}", "U")), False)
    assert out.text == "state:\n  hp: 10\n  name: '{{user}}'\nend"
    literal = [s for s in out.spans if s[2].get("kind") == "literal_macro"]
    assert [(out.text[s:e], i["macro"]) for s, e, i in literal] == [(value.replace("\n", "\n  "), "stat")]


def test_literal_macro_in_a_source_block_through_the_assembler() -> None:
    reg = registry()
    reg.register({"id": "example.mvu", "plugin_id": "example", "name": "mvu", "resolve": lambda c, r: {"blocks": [
        {"type": "text", "id": "b", "text": "S:\n  {{data}}", "role": "user", "literalMacros": {"data": "a: 1\nb: {{char}}"}}
    ]}})
    r = assemble([*NATIVES, rule("example.mvu", "m")], reg=reg)
    assert texts(r)[-1] == "S:\n  a: 1\n  b: {{char}}"


def test_macro_ranges_survive_rendering_and_trimming() -> None:
    text = "  A{{d}}B  "
    info = {"kind": "macro", "macro": "d"}
    out = compose_text(text, [(3, 8, "d", "XY", info)], (), lambda t: RenderOutput(t.upper()), True)
    assert out.text == "AXYB"
    assert [(out.text[s:e], i) for s, e, i in out.spans] == [("A", {}), ("XY", info), ("B", {})]


def test_a_renderer_that_breaks_the_markers_loses_only_the_inner_ranges() -> None:
    out = compose_text("A{{d}}B", [(1, 6, "d", "X", {"kind": "macro"})], (), lambda t: RenderOutput(t[:-3] + "B"), False)
    assert out.text == "AB"
    assert all(i == {} for _, _, i in out.spans)


def test_tavern_text_is_rendered_by_the_macro_engine_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    # the renderer imports the engine: it neither looks ``expand_macros`` up at render time nor
    # reports the engine missing
    monkeypatch.delattr(tavernbox.macros, "expand_macros", raising=False)
    card = {"character": {"data": {"name": "Seraphina"}}}
    r = assemble([*NATIVES, rule("custom", "c", text="Hi {{char}}")], assets=card)
    assert texts(r)[-1] == "Hi Seraphina"
    assert "ASSEMBLY_MACROS_UNAVAILABLE" not in [d.code for d in r.diagnostics]


def test_a_host_renders_its_sources_text_through_its_own_renderer() -> None:
    # another macro engine comes in through the Renderer protocol, source by source
    class Shout:
        name = "shout"
        trim = False

        def __init__(self) -> None:
            self.seen: list[str] = []

        def render(self, text: str, state: Any) -> RenderOutput:
            self.seen.append(text)
            return RenderOutput(text.upper(), [{"roll": 4}])

    shout = Shout()
    reg = registry()
    reg.register({"id": "example.shout", "plugin_id": "example", "name": "shout", "renderer": shout,
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "b", "text": "Hi {{char}}", "role": "user"}]}})
    r = assemble([*NATIVES, rule("example.shout", "s"), rule("custom", "c", text="Hi {{char}}")], reg=reg,
                 assets={"character": {"data": {"name": "Seraphina"}}})
    assert texts(r)[-2:] == ["HI {{CHAR}}", "Hi Seraphina"]
    assert shout.seen == ["Hi {{char}}"]
    assert r.draws == [{"key": "s:b", "draws": [{"roll": 4}]}]


def test_tavern_text_goes_through_the_macro_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = tavernbox.macros.CompiledMacros.expand

    def spy(self: Any, context: Any = None, **kw: Any) -> Any:
        calls.append(self.text)
        return real(self, context, **kw)

    monkeypatch.setattr(tavernbox.macros.CompiledMacros, "expand", spy)
    card = {"character": {"data": {"name": "Seraphina"}}, "persona": {"name": "Ann"}}
    r = assemble([*NATIVES, rule("custom", "c1", text="Hi {{char}}{{addvar::n::1}}#{{getvar::n}} {{roll::1d1}}"),
                  rule("custom", "c2", text="Bye {{user}}{{addvar::n::1}}#{{getvar::n}} {{roll::1d1}}"),
                  rule("custom", "c3", text="plain")], assets=card)
    # request-local variables carry over between blocks; text with no macro syntax skips the engine
    assert texts(r)[-3:] == ["Hi Seraphina#1 1", "Bye Ann#2 1", "plain"]
    assert len(calls) == 2
    assert [d["key"] for d in r.draws] == ["c1:text:0", "c2:text:0"]
    assert all(len(d["draws"]) == 1 and d["draws"][0]["value"] == "1" for d in r.draws)


def test_real_macro_engine_renders_tavern_text() -> None:
    require_macro_engine()
    card = {"character": {"data": {"name": "Seraphina"}}, "persona": {"name": "Ann"}}
    r = assemble([*NATIVES, rule("custom", "c", text="{{user}} meets {{char}}")], assets=card)
    assert texts(r)[-1] == "Ann meets Seraphina"


def test_provenance_covers_macro_children_in_utf16_units() -> None:
    card = {"character": {"data": {"name": "C", "description": "😀D"}}}
    r = assemble([*NATIVES, rule("custom", "c", text="é😀 {{description}}!", role="user")], assets=card)
    last = r.provenance[-1]
    assert r.messages[-1]["content"] == "é😀 😀D!"
    spans = [(s["start"], s["end"], s.get("kind"), s.get("field")) for s in last["spans"]]
    assert spans == [(0, 4, None, "text"), (4, 7, "macro", "description"), (7, 8, None, "text")]


def test_provenance_survives_system_merging() -> None:
    r = assemble([*NATIVES[:1], rule("custom", "a", text="AAA", role="system"), rule("custom", "b", text="BB", role="system"),
                  *NATIVES[1:]])
    first = r.provenance[0]
    assert r.messages[0]["content"] == "S\n\nAAA\n\nBB"
    assert [(s["start"], s["end"], s.get("rule_id"), s.get("native_message_id")) for s in first["spans"]] == [
        (0, 1, "native-system", "s"), (3, 6, "a", None), (8, 10, "b", None)]


def test_reserved_noncharacters_in_source_text_cannot_forge_markers() -> None:
    forged = "A\ufdd0\ufde0B\ufdd1C\ufdd2\ufde0"
    out = compose_text(forged + "{{d}}", [(len(forged), len(forged) + 5, "d", "X", {"kind": "macro"})],
                       (("lit", "L"),), identity, False)
    assert out.text == "ABCX"
    assert [(out.text[s:e], i.get("kind")) for s, e, i in out.spans] == [("ABC", None), ("X", "macro")]
