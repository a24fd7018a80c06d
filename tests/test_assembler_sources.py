"""Built-in sources and the reference/macro primitives they use."""

from __future__ import annotations

from typing import Any

import pytest
from _assembler_support import assemble, chat, registry, rule, texts

from tavernbox import TemplateError
from tavernbox.assembler.sources import builtin_registry, split_authored_text, world_info_from_activation

NATIVES = [rule("native-system"), rule("history"), rule("input")]
CARD = {"character": {"data": {"name": "C", "description": "CHAR", "post_history_instructions": "CARD PHI"}}}


def test_split_authored_text_cuts_at_slot_markers() -> None:
    blocks = split_authored_text("A{{chatHistory}}B{{ worldInfoBefore }}C", "user")
    assert [(b["type"], b.get("text"), b.get("source_id"), b.get("group")) for b in blocks] == [
        ("text", "A", None, None), ("reference", None, "history", None), ("reference", None, "input", None),
        ("text", "B", None, None), ("reference", None, "worldbook", "before"), ("text", "C", None, None)]
    assert [b["type"] for b in split_authored_text("{{worldInfo}}", None, world_info=False)] == ["text"]


def test_native_system_messages_after_conversation_keep_their_boundary() -> None:
    messages = chat("s:system:S", "u1:user:U1", "s2:system:S2", "a1:assistant:A1", "u2:user:U2")
    r = assemble(NATIVES, messages, ["u2"])
    assert [m["id"] for m in r.logical_messages] == ["s", "u1", "s2", "a1", "u2"]
    node = next(n for n in r.nodes if n["block_id"] == "native-system:s2")
    assert node["depth"] == 2


def test_phi_pulls_the_card_field_unlocked_with_its_own_rule() -> None:
    r = assemble([*NATIVES, rule("phi", role="user", text="MORE")], assets=CARD)
    assert texts(r)[-2:] == ["CARD PHI", "MORE"]
    phi = next(n for n in r.nodes if n["block_id"] == "phi")
    assert phi["rule_id"] == "phi" and phi["role"] == "user" and not phi["locked"]  # use_owner_rule, lock false


def test_reference_only_blocks_appear_only_when_referenced() -> None:
    r = assemble([*NATIVES[:1], rule("character"), *NATIVES[1:]], assets=CARD)
    assert "CARD PHI" not in texts(r) and "CHAR" in texts(r)


def test_world_info_groups_follow_their_markers() -> None:
    lore = {"world_info": [{"id": 1, "content": "B1", "position": "before"}, {"id": 2, "content": "A2"},
                           {"id": 3, "content": "D3", "position": "at_depth", "depth": 1, "role": "user"}]}
    r = assemble([rule("native-system"), rule("custom", "c", text="{{worldInfoAfter}}X{{worldInfoBefore}}{{chatHistory}}")],
                 assets=lore)
    assert texts(r) == ["S", "A2", "X", "B1", "U1", "A1", "D3", "U2"]


def test_world_info_from_a_real_activation() -> None:
    from tavernbox.worldinfo import activate_world_info

    book = {"entries": {"0": {"uid": 0, "key": ["inn"], "content": "AN", "position": 2},
                        "1": {"uid": 1, "key": ["inn"], "content": "DEEP", "position": 4, "depth": 1, "role": 1}}}
    entries = world_info_from_activation(activate_world_info([book], [{"role": "user", "content": "the inn"}]))
    assert [(e["id"], e["position"], e["role"], e.get("approximated_from")) for e in entries] == [
        ("book.0", "after", "system", 2), ("book.1", "at_depth", "user", None)]
    r = assemble([*NATIVES, rule("worldbook")], assets={"world_info": entries})
    assert "WORLD_BOOK_SLOT_MISSING" in [d.code for d in r.diagnostics]


def test_dsh_text_substitutes_native_variables_and_refuses_missing_ones() -> None:
    r = assemble([*NATIVES, rule("dsh.text", "d", text="model={{model}} {{Char}} {{user::x}}", inputMode="text")],
                 assets={"native_variables": {"model": "m1"}})
    assert texts(r)[-1] == "model=m1 {{Char}} {{user::x}}"  # identity renderer: no SillyTavern macros
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("dsh.text", "d", text="{{provider}}", inputMode="text")])
    assert err.value.code == "NATIVE_TEXT_VARIABLE_UNAVAILABLE"


def test_tavern_text_with_a_template_tag_needs_the_template_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.ejs

    monkeypatch.delattr(tavernbox.ejs, "render_template", raising=False)
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("tavern.text", "t", text="<%= 1 %>", inputMode="text")])
    assert err.value.code == "TAVERN_TEMPLATE_PARSER_UNAVAILABLE"


def test_tavern_text_expands_template_tags_before_slots_and_records_the_output() -> None:
    import tavernbox.ejs

    if not hasattr(tavernbox.ejs, "render_template"):
        pytest.skip("the EJS stage (issue 3, tavernbox.render_template) is not installed in this tree")
    text = "A<% if (variables.show) { %>{{history}}<% } %>B<%= variables.n * 2 %>"
    r = assemble([rule("native-system"), rule("tavern.text", "t", text=text, inputMode="text")], chat("s:system:S", "u1:user:U1"),
                 [], assets={"template_variables": {"show": True, "n": 21}})
    assert texts(r) == ["S", "A", "U1", "B42"]
    from tavernbox.assembler import replay

    assert replay(r.record).messages == r.messages


def test_reference_to_an_unregistered_dependency_is_reported() -> None:
    reg = builtin_registry()
    reg.register({"id": "example.ref", "plugin_id": "example", "name": "ref", "dependencies": ("example.gone",),
                  "resolve": lambda c, r: {"blocks": [{"type": "reference", "id": "r", "source_id": "example.gone"}]}})
    r = assemble([*NATIVES, rule("example.ref", "r")], reg=reg)
    assert [d.code for d in r.diagnostics] == ["ASSEMBLY_SOURCE_UNAVAILABLE", "ASSEMBLY_REFERENCE_UNAVAILABLE"]


def _macro_source(sid: str, name: str, deps: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": sid, "plugin_id": "example", "name": sid, "dependencies": deps,
            "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "b", "text": "x", "referenceOnly": True}],
                                     "macros": {name: "b"}}}


def test_duplicate_source_macros_fail() -> None:
    reg = registry()
    reg.register(_macro_source("example.one", "same"))
    reg.register(_macro_source("example.two", "SAME"))
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.one", "o"), rule("example.two", "t")], reg=reg)
    assert err.value.code == "ASSEMBLY_MACRO_INVALID"


def test_a_macro_of_an_undeclared_source_fails() -> None:
    reg = registry()
    reg.register(_macro_source("example.one", "secret"))
    reg.register({"id": "example.user", "plugin_id": "example", "name": "user",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "b", "text": "see {{secret}}"}]}})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.one", "o"), rule("example.user", "u")], reg=reg)
    assert err.value.code == "ASSEMBLY_DEPENDENCY_UNDECLARED"


def test_use_owner_rule_takes_the_referring_rule_role() -> None:
    reg = registry()
    reg.register({"id": "example.owner", "plugin_id": "example", "name": "owner", "dependencies": ("character",),
                  "resolve": lambda c, r: {"blocks": [{"type": "reference", "id": "r", "source_id": "character",
                                                       "block_ids": ["description"], "use_owner_rule": True}]}})
    r = assemble([*NATIVES[:1], rule("example.owner", "o", role="user"), *NATIVES[1:]], assets=CARD, reg=reg,
                 placement="st")
    node = next(n for n in r.nodes if n["block_id"] == "description")
    assert node["role"] == "user" and node["rule_id"] == "o" and node["locked"]


MVU_STATE = {"hp": 100, "text": "{{user}}\n{{secret}}", "$internal": "hidden",
             "nested": {"$private": 1, "public": "shown"}, "pair": [3, "how many"]}


def test_fact51_world_info_inserts_mvu_state_as_yaml_literally() -> None:
    import yaml

    lore = {"world_info": [{"id": "stats", "content": "State:\n  {{format_message_variable::stat_data}}"}],
            "mvu": {"name": "save1", "stat_data": MVU_STATE}}
    r = assemble([*NATIVES, rule("worldbook")], assets=lore)
    text = texts(r)[-1]
    assert text.startswith("State:\n  ")
    assert yaml.safe_load(text[len("State:\n"):]) == {
        "hp": 100, "text": "{{user}}\n{{secret}}", "nested": {"public": "shown"}, "pair": [3, "how many"]}
    (version,) = [d for d in r.diagnostics if d.code == "WORLD_BOOK_MVU_VARIABLE_VERSION"]
    assert version.data["resource_id"] == "save1" and version.data["revision"].startswith("sha256:")
    assert not [d for d in r.diagnostics if d.code.startswith("MACRO_")]
    span = next(s for s in r.provenance[-1]["spans"] if s.get("kind") == "literal_macro")
    assert span["macro"] == "format_message_variable::stat_data" and span["block_id"] == "worldbook:stats"


def test_fact52_an_entry_without_the_macro_does_not_read_mvu() -> None:
    r = assemble([*NATIVES, rule("worldbook")],
                 assets={"world_info": [{"id": 1, "content": "plain"}], "mvu": {"stat_data": MVU_STATE}})
    assert texts(r)[-1] == "plain" and "WORLD_BOOK_MVU_VARIABLE_VERSION" not in [d.code for d in r.diagnostics]


def test_mvu_state_source_emits_json_and_update_instructions() -> None:
    r = assemble([*NATIVES[:1], rule("tavern.mvu/state", "mvu"), *NATIVES[1:]], assets={"mvu": {"stat_data": {"hp": 1}}})
    state = r.logical_messages[1]
    assert state["role"] == "system" and state["content"].startswith('{"hp": 1}\n') and "JSONPatch" in state["content"]
    assert "MVU_RESOURCE_VERSION" in [d.code for d in r.diagnostics]
    custom = assemble([*NATIVES[:1], rule("tavern.mvu/state", "mvu", text="Only read."), *NATIVES[1:]],
                      assets={"mvu": {"stat_data": {"hp": 1}}})
    assert custom.logical_messages[1]["content"] == '{"hp": 1}\nOnly read.'
    empty = assemble([*NATIVES[:1], rule("tavern.mvu/state", "mvu"), *NATIVES[1:]])
    assert [m["id"] for m in empty.logical_messages] == ["s", "u1", "a1", "u2"]
