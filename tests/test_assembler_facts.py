"""The tested upstream facts of research/dsh-assembler.md section 15, as our own cases.

Each test names its fact number. The rest live beside the code they test: retained snapshots
(27-32, 41) in ``test_snapshots_retention.py``, prompt templates (38, 44-47, 50) in
``test_assembler_facts_templates.py`` (42, 43 in ``test_assembler_templates.py``; 48, 49 in
``test_assembler_leases.py``), MVU (51, 52 in ``test_assembler_sources.py``; 53, 54 in
``test_mvu_update.py``) and the built-in strategies (55) in ``test_strategies_builtin.py``.
"""

from __future__ import annotations

import copy

import pytest
from _assembler_support import (
    BASIC,
    DEFAULT_KINDS,
    MODULE_KINDS,
    assemble,
    chat,
    codes,
    registry,
    require_macro_engine,
    roles,
    rule,
    rules_for,
    texts,
)

from tavernbox import TemplateError
from tavernbox.assembler import Assembler, Logical, SourceRegistry, project_system

CARD = {"character": {"data": {"name": "CHARACTER", "description": "CHAR"}}}
LORE = {"world_info": [{"id": "l", "content": "LORE", "position": "after"}]}


def assets(*parts: dict, prompts: list | None = None) -> dict:
    out: dict = {}
    for p in parts:
        out.update(copy.deepcopy(p))
    if prompts is not None:
        out["prompts"] = prompts
    return out


def main(text: str, role: str = "system") -> dict:
    return {"identifier": "main", "role": role, "content": text}


# -- placement and references ------------------------------------------------------------------


def test_fact02_module_order_places_each_module_at_its_row() -> None:
    card = {"character": {"data": {"name": "C", "description": "CHAR", "post_history_instructions": "PHI"}}}
    r = assemble(rules_for(MODULE_KINDS), assets=assets(card, LORE, prompts=[main("MAIN")]))
    assert texts(r) == ["S", "MAIN", "CHAR", "U1", "A1", "U2", "LORE", "PHI"]


def test_fact03_removed_lore_is_gone_and_unchanged_nodes_keep_id_and_hash() -> None:
    first = assemble(rules_for(MODULE_KINDS), assets=assets(CARD, LORE, prompts=[main("MAIN")]))
    second = assemble(rules_for(MODULE_KINDS), assets=assets(CARD, prompts=[main("MAIN")]))
    assert "LORE" not in texts(second)
    node = lambda r: next(n for n in r.nodes if n["block_id"] == "description")  # noqa: E731
    assert (node(first)["hash"], node(first)["input_message_ids"]) == (node(second)["hash"], node(second)["input_message_ids"])


def test_fact04_st_marker_owns_history_and_absolute_prompt_goes_at_its_depth() -> None:
    prompts = [
        main("MAIN", "user"),
        {"identifier": "chatHistory", "marker": True},
        {"identifier": "depthy", "role": "assistant", "content": "DEPTH", "depth": 1},
        {"identifier": "jailbreak", "role": "system", "content": "PHI"},
    ]
    r = assemble(rules_for(DEFAULT_KINDS), assets=assets(prompts=prompts), placement="st")
    assert texts(r) == ["S", "MAIN", "U1", "A1", "DEPTH", "U2", "PHI"]
    assert roles(r)[1] == "user" and roles(r)[4] == "assistant"
    history = next(n for n in r.nodes if n["source_id"] == "history")
    assert history["locked"] and history["lock_reason"].startswith("reference:")


def test_fact05_source_macro_inlines_field_once_with_a_locked_child() -> None:
    require_macro_engine()  # {{lastusermessage}} is the macro engine's
    kinds = [k for k in MODULE_KINDS if k != "character"]
    prompts = [main("Before {{description}} after {{lastusermessage}}")]
    r = assemble(rules_for(kinds), assets=assets(CARD, prompts=prompts))
    joined = "\n".join(texts(r))
    assert joined.count("CHAR") == 1
    node = next(n for n in r.nodes if n["source_id"] == "preset")
    (child,) = node["children"]
    assert child["locked"] and child["resource_id"] == "CHARACTER" and child["lock_reason"] == "macro:description"
    assert texts(r)[1].endswith("after U2")


def test_fact06_st_inline_history_and_input_slots() -> None:
    r = assemble(rules_for(DEFAULT_KINDS), assets=assets(prompts=[main("BEFORE{{history}}MIDDLE{{input}}AFTER")]),
                 placement="st")
    assert texts(r) == ["S", "BEFORE", "U1", "A1", "MIDDLE", "U2", "AFTER"]
    assert all(n["locked"] for n in r.nodes if n["source_id"] in ("history", "input"))


def test_fact07_marker_honours_a_disabled_module() -> None:
    prompts = [main("MAIN"), {"identifier": "worldInfoAfter", "marker": True}]
    r = assemble(rules_for(DEFAULT_KINDS, worldbook={"enabled": False}), assets=assets(LORE, prompts=prompts),
                 placement="st")
    assert "LORE" not in texts(r)


def test_fact08_listed_modules_keep_their_rows_and_macros_expand_to_nothing() -> None:
    card = {"character": {"data": {"name": "C", "description": "CHAR", "post_history_instructions": "PHI"}}}
    r = assemble(rules_for(MODULE_KINDS), assets=assets(card, LORE, prompts=[main("P{{description}}{{history}}{{input}}Q")]))
    assert texts(r) == ["S", "P", "Q", "CHAR", "U1", "A1", "U2", "LORE", "PHI"]


def test_fact09_disabled_listed_module_is_not_revived_by_its_macro() -> None:
    r = assemble(rules_for(MODULE_KINDS, character={"enabled": False}),
                 assets=assets(CARD, LORE, prompts=[main("P{{description}}{{history}}{{input}}Q")]))
    assert not any("CHAR" in t for t in texts(r))


def test_fact10_unlisted_modules_are_placed_by_references() -> None:
    card = {"character": {"data": {"name": "C", "description": "CHAR", "post_history_instructions": "PHI"}}}
    kinds = [k for k in MODULE_KINDS if k not in ("character", "history", "input")]
    r = assemble(rules_for(kinds), assets=assets(card, LORE, prompts=[main("P{{description}}{{history}}{{input}}Q")]))
    assert texts(r) == ["S", "PCHAR", "U1", "A1", "U2", "Q", "LORE", "PHI"]


def test_fact11_custom_text_slots_pull_unlisted_history_and_input() -> None:
    r = assemble([rule("native-system"), rule("custom", "c", text="A{{history}}B{{input}}C", role="user")])
    assert texts(r) == ["S", "A", "U1", "A1", "B", "U2", "C"]
    assert all(n["locked"] for n in r.nodes if n["native"] and n["source_id"] != "native-system")


def test_fact12_text_mode_slots_and_listed_modules() -> None:
    text_rule = rule("tavern.text", "t", text="X{{history}}Y{{input}}Z", role="user", inputMode="text")
    r = assemble([rule("native-system"), text_rule])
    assert texts(r) == ["S", "X", "U1", "A1", "Y", "U2", "Z"]
    r = assemble([rule("native-system"), text_rule, rule("history"), rule("input")])
    assert texts(r) == ["S", "X", "Y", "Z", "U1", "A1", "U2"]


def test_fact13_input_may_move_before_history() -> None:
    kinds = ["native-system", "preset", "input", "history"]
    r = assemble(rules_for(kinds), assets=assets(prompts=[main("MAIN")]))
    assert texts(r).index("U2") < texts(r).index("U1")


@pytest.mark.parametrize("text", ["{{chatHistory}}", "{{history}}{{input}}"])
def test_fact14_all_natives_disabled_leaves_only_fresh_custom(text: str) -> None:
    rules = [
        rule("native-system", enabled=False),
        rule("preset"),
        rule("history", enabled=False),
        rule("input", enabled=False),
        rule("custom", "c", text="ONLY FRESH"),
    ]
    messages = chat(*BASIC)
    before = copy.deepcopy(messages)
    r = assemble(rules, messages, assets=assets(prompts=[main(text)]))
    assert [m["content"] for m in r.messages] == ["ONLY FRESH"]
    assert messages == before


def test_fact15_st_with_history_disabled() -> None:
    prompts = [{"identifier": "chatHistory", "marker": True}]
    r = assemble(rules_for(DEFAULT_KINDS, history={"enabled": False}), assets=assets(prompts=prompts), placement="st")
    assert texts(r) == ["S", "U2"]


def test_fact16_phi_text_is_last_and_nodes_use_authored_names() -> None:
    prompts = [{"identifier": "opaque-uuid", "name": "Writing guide", "role": "system", "content": "GUIDE"}]
    r = assemble(rules_for(MODULE_KINDS, phi={"text": "EXTRA PHI"}), assets=assets(prompts=prompts))
    assert texts(r)[-1] == "EXTRA PHI"
    assert any(n["name"] == "Writing guide" for n in r.nodes)


def _only_custom(**custom: object) -> list[dict]:
    return [rule(k, enabled=False) for k in ("native-system", "history", "input")] + [rule("custom", "c", **custom)]


def test_fact17_custom_role_defaults_to_user() -> None:
    r = assemble(_only_custom(text="Reply OK"))
    assert r.messages == [{"id": r.messages[0]["id"], "role": "user", "content": "Reply OK"}]
    assert not [c for c in codes(r) if c.startswith("ASSEMBLY_")]


def test_fact17_legacy_preserve_means_system_and_is_reported_system_only() -> None:
    r = assemble(_only_custom(text="Reply OK", role="preserve"))
    assert [m["role"] for m in r.messages] == ["system"]
    assert "ASSEMBLY_SYSTEM_ONLY" in codes(r)


def test_fact17_empty_result_fails() -> None:
    with pytest.raises(TemplateError) as err:
        assemble(_only_custom(text=""))
    assert err.value.code == "ASSEMBLY_EMPTY"


def test_fact18_equal_depth_in_ascending_order_and_list_placement_overrides_depth() -> None:
    prompts = [
        {"identifier": "chatHistory", "marker": True},
        {"identifier": "high", "role": "system", "content": "HIGH", "depth": 0, "order": 200},
        {"identifier": "low", "role": "system", "content": "LOW", "depth": 0, "order": 10},
    ]
    st = assemble(rules_for(DEFAULT_KINDS), assets=assets(prompts=prompts), placement="st")
    assert texts(st)[-2:] == ["LOW", "HIGH"]
    modules = assemble(rules_for(MODULE_KINDS), assets=assets(prompts=prompts[1:]))
    assert texts(modules)[:3] == ["S", "HIGH", "LOW"]  # list order, not injection order
    assert texts(modules)[3:] == ["U1", "A1", "U2"]


def test_fact18_list_placement_keeps_preset_order_not_injection_order() -> None:
    prompts = [
        {"identifier": "low", "role": "system", "content": "LOW", "depth": 0, "order": 10},
        {"identifier": "high", "role": "system", "content": "HIGH", "depth": 0, "order": 200},
    ]
    r = assemble(rules_for(MODULE_KINDS), assets=assets(prompts=prompts))
    assert texts(r)[:3] == ["S", "LOW", "HIGH"]


def test_fact19_third_party_text_is_verbatim_and_tavern_text_is_rendered() -> None:
    require_macro_engine()
    reg = registry()
    reg.register({"id": "example.literal", "plugin_id": "example", "name": "Literal",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "x", "text": "{{char}} {{roll 1d6}}"}]}})
    r = assemble([rule("example.literal", "lit"), rule("custom", "c", text="{{char}}")], assets=CARD, reg=reg)
    assert texts(r)[-2:] == ["{{char}} {{roll 1d6}}", "CHARACTER"]


def test_fact20_reference_to_an_undeclared_source_fails() -> None:
    reg = registry()
    reg.register({"id": "example.sneaky", "plugin_id": "example", "name": "Sneaky",
                  "resolve": lambda c, r: {"blocks": [{"type": "reference", "id": "r", "source_id": "history"}]}})
    with pytest.raises(TemplateError) as err:
        assemble([rule("example.sneaky", "s")], reg=reg)
    assert err.value.code == "ASSEMBLY_DEPENDENCY_UNDECLARED"


def _notes_registry() -> tuple[SourceRegistry, object]:
    reg = registry()
    dispose = reg.register({"id": "example.notes", "plugin_id": "example", "name": "Notes",
                            "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "dock", "text": "DOCK"}]}})
    return reg, dispose


NOTES_RULES = [rule("native-system"), rule("history"), rule("input"), rule("example.notes", "n", role="user", depth=1)]


def test_fact21_third_party_source_at_depth_one() -> None:
    reg, _ = _notes_registry()
    r = assemble(NOTES_RULES, reg=reg)
    assert texts(r) == ["S", "U1", "A1", "DOCK", "U2"]
    assert roles(r)[3] == "user"


def test_fact22_unregistered_source_is_reported_and_left_out() -> None:
    reg, dispose = _notes_registry()
    dispose()  # type: ignore[operator]
    r = assemble(NOTES_RULES, reg=reg)
    assert texts(r) == ["S", "U1", "A1", "U2"]
    (d,) = [d for d in r.diagnostics if d.code == "ASSEMBLY_SOURCE_UNAVAILABLE"]
    assert d.data == {"source_id": "example.notes", "rule_id": "n"}


def test_fact23_implicit_dependency_takes_its_settings_from_capabilities() -> None:
    seen = {}
    reg = registry()

    def dep(context, rule):  # noqa: ANN001, ANN202
        seen.update(rule)
        return {"blocks": []}

    reg.register({"id": "example.dep", "plugin_id": "example", "name": "Dep", "resolve": dep,
                  "roles": ("system",), "lifetimes": ("request",)})
    reg.register({"id": "example.main", "plugin_id": "example", "name": "Main", "dependencies": ("example.dep",),
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "m", "text": "M"}]}})
    assemble([rule("native-system"), rule("example.main", "m"), rule("history"), rule("input")], reg=reg)
    assert (seen["enabled"], seen["role"], seen["lifetime"], seen["depth"]) == (False, "system", "request", None)
    with pytest.raises(TemplateError) as err:
        assemble([rule("example.main", "m"), rule("example.dep", "d", enabled=False, role="user")], reg=reg)
    assert err.value.code == "ASSEMBLY_RULE_UNSUPPORTED"


# -- depth and tool transactions ----------------------------------------------------------------

TOOL_CHAT = [
    {"id": "s", "role": "system", "content": "S"},
    {"id": "u", "role": "user", "content": "U"},
    {"id": "tc", "role": "assistant", "content": None, "tool_calls": [{"id": "call", "name": "f", "arguments": "{}"}]},
    {"id": "tr", "role": "tool", "content": "R", "tool_call_id": "call"},
]


def test_fact24_depth_inside_a_tool_transaction_moves_after_it() -> None:
    r = assemble([rule("native-system"), rule("history"), rule("input"),
                  rule("custom", "x", text="EXTRA", role="system", depth=1)], TOOL_CHAT, [])
    assert [m["id"] for m in r.logical_messages[:4]] == ["s", "u", "tc", "tr"]
    assert texts(r)[-1] == "EXTRA"
    node = next(n for n in r.nodes if n["source_id"] == "custom")
    assert node["adjusted_for_tools"] and node["lock_reason"] == "depth"


def test_fact26_depth_beyond_the_conversation_and_without_one() -> None:
    rules = [rule("native-system"), rule("history"), rule("input"), rule("custom", "x", text="DEEP", role="user", depth=9)]
    assert texts(assemble(rules)) == ["S", "DEEP", "U1", "A1", "U2"]
    assert texts(assemble(rules, chat("s:system:S"), [])) == ["S", "DEEP"]


# -- system projection --------------------------------------------------------------------------


def L(mid: str, role: str, native: bool, content: object = None) -> Logical:  # noqa: N802
    return Logical({"id": mid, "role": role, "content": mid if content is None else content}, native)


def _contents(p) -> list:  # noqa: ANN001
    return [m["content"] for m in p.messages]


def test_fact33_contributions_accumulate_and_native_updates_replace_the_base() -> None:
    logical = [
        L("OLD", "system", True), L("CURRENT", "system", True), L("MAIN", "system", False), L("INPUT", "user", True),
        L("LORE", "system", False), L("ANSWER", "assistant", True), L("UPDATED", "system", True),
        L("TAIL", "system", False), L("NEXT", "user", False),
    ]
    p = project_system(logical, system_prompt_update="in-history")
    assert _contents(p) == [
        "CURRENT\n\nMAIN", "INPUT", "CURRENT\n\nMAIN\n\nLORE", "ANSWER", "UPDATED\n\nMAIN\n\nLORE\n\nTAIL", "NEXT",
    ]
    first = p.records[0]
    assert first["replaced_native_ids"] == ["OLD"] and first["contributor_ids"] == ["CURRENT", "MAIN"]
    assert p.messages[1] is logical[3].message and p.messages[3] is logical[5].message


def test_fact34_native_base_then_changed_contribution() -> None:
    p = project_system([L("CURRENT", "system", True), L("CHANGED", "system", False), L("INPUT", "user", True)])
    assert _contents(p) == ["CURRENT\n\nCHANGED", "INPUT"]


def test_fact35_late_system_needs_the_capability() -> None:
    logical = [L("BASE", "system", True), L("INPUT", "user", True), L("TAIL", "system", False)]
    with pytest.raises(TemplateError) as err:
        project_system(logical)
    assert err.value.code == "ASSEMBLY_SYSTEM_UPDATES_UNSUPPORTED"
    p = project_system(logical, preview=True)
    assert p.capability == "unverified"
    assert [d.code for d in p.diagnostics] == ["SYSTEM_UPDATE_CAPABILITY_UNVERIFIED"]
    ok = project_system([L("BASE", "system", True), L("MAIN", "system", False), L("INPUT", "user", True)])
    assert _contents(ok) == ["BASE\n\nMAIN", "INPUT"]


def test_fact36_tool_and_empty_messages_pass_unchanged() -> None:
    call = Logical({"id": "tc", "role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}, True)
    result = Logical({"id": "tr", "role": "tool", "content": "R", "tool_call_id": "c"}, True)
    empty = L("E", "user", True, "")
    p = project_system([L("BASE", "system", True), call, result, L("LORE", "system", False), empty],
                       system_prompt_update="in-history")
    assert p.messages[1] is call.message and p.messages[2] is result.message and p.messages[4] is empty.message
    assert p.messages[3]["content"] == "BASE\n\nLORE"


def test_fact37_system_message_with_an_image_is_refused() -> None:
    image = [{"type": "text", "text": "A"}, {"type": "image_url", "image_url": {"url": "x"}}]
    with pytest.raises(TemplateError) as err:
        project_system([L("S", "system", False, image)])
    assert err.value.code == "ASSEMBLY_SYSTEM_NOT_TEXT" and "text-only" in err.value.message


def test_fact39_native_update_replaces_the_base_in_its_slot() -> None:
    messages = chat("OLD:system:OLD", "FIRST:user:FIRST", "ANSWER:assistant:ANSWER", "CURRENT:system:CURRENT",
                    "NEXT:user:NEXT")
    rules = rules_for(MODULE_KINDS)
    r = assemble(rules, messages, ["NEXT"], assets=assets(prompts=[main("MAIN")]))
    assert [m["content"] for m in r.messages] == ["OLD\n\nMAIN", "FIRST", "ANSWER", "CURRENT\n\nMAIN", "NEXT"]
    swapped = rules_for(["native-system", "preset", "input", "history"])
    with pytest.raises(TemplateError) as err:
        assemble(swapped, messages, ["NEXT"], assets=assets(prompts=[main("MAIN")]))
    assert err.value.code == "ASSEMBLY_NATIVE_SYSTEM_ORDER"


@pytest.mark.parametrize("with_input", [False, True])
def test_fact40_late_first_system_keeps_its_boundary(with_input: bool) -> None:
    specs = ["ONE:user:ONE", "ANSWER:assistant:ANSWER", "TWO:user:TWO", "LATE_BASE:system:LATE_BASE"]
    if with_input:
        specs.append("THREE:user:THREE")
    messages = chat(*specs)
    input_ids = [messages[-1]["id"]] if with_input else []
    r = assemble(rules_for(["native-system", "history", "input"]), messages, input_ids)
    assert r.messages == messages
    assert r.system_projection["messages"][0]["index"] == 3
    if with_input:
        with pytest.raises(TemplateError) as err:
            assemble(rules_for(["native-system", "input", "history"]), messages, input_ids)
        assert err.value.code == "ASSEMBLY_NATIVE_SYSTEM_ORDER"


def test_assembler_is_the_default_registry_owner() -> None:
    assert Assembler().registry.get("history") is not None


# -- the greeting (5.4) -----------------------------------------------------------------------

GREETING = {"character": {"data": {"name": "C", "first_mes": "GREETING", "alternate_greetings": ["ALT"]}},
            "include_greeting_reference": True}


def test_fact01_greeting_goes_before_the_conversation_even_when_a_marker_owns_the_input() -> None:
    prompts = [main("MAIN"), {"identifier": "chatHistory", "marker": True}, {"identifier": "post", "role": "user",
                                                                            "content": "AFTER"}]
    messages = chat("official:system:OFFICIAL", "input:user:INPUT", "context:user:CONTEXT")
    before = copy.deepcopy(messages)
    r = assemble(rules_for(DEFAULT_KINDS), messages, ["input", "context"], assets=assets(GREETING, prompts=prompts),
                 placement="st")
    assert texts(r) == ["OFFICIAL", "MAIN", "GREETING", "INPUT", "CONTEXT", "AFTER"]
    assert roles(r)[2] == "assistant" and "GREETING_AFTER_INPUT" not in codes(r)
    assert messages == before


def test_fact25_explicit_greeting_depth_zero_lands_after_input_and_is_reported() -> None:
    prompts = [{"identifier": "chatHistory", "marker": True}]
    r = assemble(rules_for(DEFAULT_KINDS, character={"depth": 0}), assets=assets(GREETING, prompts=prompts),
                 placement="st")
    assert texts(r)[-1] == "GREETING"
    greeting = next(n for n in r.nodes if n["block_id"] == "greeting")
    assert greeting["depth"] == 0 and "GREETING_AFTER_INPUT" in codes(r)
    as_user = assemble(rules_for(DEFAULT_KINDS, character={"depth": 0, "role": "user"}),
                       assets=assets(GREETING, prompts=prompts), placement="st")
    assert "GREETING_AFTER_INPUT" not in codes(as_user)


def test_alternate_greeting_by_index() -> None:
    r = assemble(rules_for(DEFAULT_KINDS), assets=assets(GREETING, {"greeting_index": 1},
                                                          prompts=[{"identifier": "chatHistory", "marker": True}]),
                 placement="st")
    assert "ALT" in texts(r) and "GREETING" not in texts(r)
