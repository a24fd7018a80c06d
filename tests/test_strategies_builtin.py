"""The built-in strategies (research ``dsh-assembler.md`` 1.4, 6.3, fact 55) and per-session selection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.assembler import Assembler
from tavernbox.assembler.rules import parse_preset
from tavernbox.cli.main import main as cli
from tavernbox.errors import TemplateError
from tavernbox.strategies import BUILTIN_IDS, SelectionStore, StrategyLibrary, builtin_strategy, st_registry

# the fixture of section 1.4: main=user HEAD, worldInfoBefore, chatHistory, jailbreak=system TAIL;
# one lore entry LORE (before, system); history OLD, input NOW
FIXTURE_PRESET = {
    "prompts": [
        {"identifier": "main", "role": "user", "content": "HEAD"},
        {"identifier": "worldInfoBefore", "marker": True},
        {"identifier": "chatHistory", "marker": True},
        {"identifier": "jailbreak", "role": "system", "content": "TAIL"},
    ],
    "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": i} for i in ("main", "worldInfoBefore", "chatHistory", "jailbreak")]}],
}
FIXTURE_LORE = [{"id": "lore", "content": "LORE", "position": "before", "role": "system"}]
FIXTURE_CHAT = [{"id": "old", "role": "user", "content": "OLD"}, {"id": "now", "role": "user", "content": "NOW"}]


def assemble(strategy: Any, st: dict[str, Any] | None = None, chat: list[dict[str, Any]] | None = None,
             **assets: Any) -> Any:
    chat = FIXTURE_CHAT if chat is None else chat
    users = [m["id"] for m in chat if m["role"] == "user"]
    return Assembler(st_registry()).assemble({
        "preset": strategy if not isinstance(strategy, str) else builtin_strategy(strategy), "messages": chat,
        "input_ids": users[-1:], "assets": {"st_preset": st or FIXTURE_PRESET, "world_info": FIXTURE_LORE, **assets},
        "system_prompt_update": "in-history"})


def pairs(result: Any) -> list[tuple[str, str]]:
    return [(m["content"], m["role"]) for m in result.logical_messages]


def codes(result: Any) -> list[str]:
    return [d.code for d in result.diagnostics]


# -- fact 55: the observed outputs of the three built-ins ----------------------------------------------


def test_golden_native_slots_content_before_history_is_system_after_is_user() -> None:
    result = assemble("builtin-native-slots")
    assert pairs(result) == [("HEAD", "system"), ("LORE", "system"), ("OLD", "user"), ("NOW", "user"), ("TAIL", "user")]
    adjusted = [d.data for d in result.diagnostics if d.code == "NATIVE_ROLE_ADJUSTED"]
    assert [(d["from"], d["to"]) for d in adjusted] == [("user", "system"), ("system", "user")]


def test_golden_st_keeps_authored_roles_and_slots() -> None:
    result = assemble("builtin-st")
    assert pairs(result) == [("HEAD", "user"), ("LORE", "system"), ("OLD", "user"), ("NOW", "user"), ("TAIL", "system")]
    assert not [c for c in codes(result) if c.startswith("NATIVE_")]


def test_golden_native_roles_system_before_history_user_after_input() -> None:
    result = assemble("builtin-native-roles")
    assert pairs(result) == [("LORE", "system"), ("TAIL", "system"), ("OLD", "user"), ("NOW", "user"), ("HEAD", "user")]
    assert "NATIVE_PLACEMENT_ADJUSTED" in codes(result)


def test_the_three_builtins_differ() -> None:
    assert len({tuple(pairs(assemble(s))) for s in BUILTIN_IDS}) == 3


def test_builtin_definitions() -> None:
    slots, roles, st = (builtin_strategy(s) for s in ("builtin-native-slots", "builtin-native-roles", "builtin-st"))
    assert (slots.backend, slots.placement) == ("native", "native-slots")
    assert (roles.backend, roles.placement, roles.layout) == ("native", "native-roles", None)
    assert (st.backend, st.placement, st.layout["source"]) == ("core", "st", "preset-slots")
    assert [r.kind for r in st.rules] == ["native-system", "preset", "persona", "character", "worldbook", "history",
                                          "input", "phi"]
    with pytest.raises(TemplateError) as err:
        builtin_strategy("builtin-cache")
    assert err.value.code == "ASSEMBLY_STRATEGY_UNKNOWN"


# -- native-mode rules ---------------------------------------------------------------------------------


def test_native_slots_absent_falls_back_to_roles_first() -> None:
    st = {"prompts": [{"identifier": "main", "role": "user", "content": "HEAD"},
                      {"identifier": "jailbreak", "role": "system", "content": "TAIL"}]}
    result = assemble("builtin-native-slots", st)
    assert "NATIVE_SLOTS_ABSENT" in codes(result) and "ST_WORLD_INFO_UNPLACED" in codes(result)
    assert pairs(result) == [("TAIL", "system"), ("OLD", "user"), ("NOW", "user"), ("HEAD", "user")]


def test_native_depth_boundary_depth_1_before_history_depth_0_after_input() -> None:
    st = {**FIXTURE_PRESET, "prompts": [*FIXTURE_PRESET["prompts"],
          {"identifier": "d0", "role": "system", "content": "D0", "injection_position": 1, "injection_depth": 0},
          {"identifier": "d1", "role": "user", "content": "D1", "injection_position": 1, "injection_depth": 1}]}
    st["prompt_order"] = [{"character_id": 100001, "order": [*FIXTURE_PRESET["prompt_order"][0]["order"],
                                                             {"identifier": "d0"}, {"identifier": "d1"}]}]
    result = assemble("builtin-native-slots", st)
    assert pairs(result) == [("HEAD", "system"), ("LORE", "system"), ("D1", "system"), ("OLD", "user"), ("NOW", "user"),
                             ("TAIL", "user"), ("D0", "user")]
    assert codes(result).count("NATIVE_DEPTH_BOUNDARY") == 2


def test_native_other_depths_are_placed_by_role() -> None:
    lore = [{"id": "deep", "content": "DEEP", "position": "at_depth", "depth": 3, "role": "system"}]
    result = assemble("builtin-native-roles", world_info=lore)
    assert pairs(result) == [("TAIL", "system"), ("DEEP", "system"), ("OLD", "user"), ("NOW", "user"), ("HEAD", "user")]
    assert "NATIVE_DEPTH_APPROXIMATED" in codes(result)


def test_native_slots_content_between_history_and_input_is_user_before_input() -> None:
    st = {"prompts": [{"identifier": "sys", "content": "SYS"}, {"identifier": "h", "content": "{{history}}"},
                      {"identifier": "mid", "role": "assistant", "content": "MID"},
                      {"identifier": "i", "content": "{{input}}"}, {"identifier": "end", "content": "END"}]}
    chat = [{"id": "u1", "role": "user", "content": "U1"}, {"id": "a1", "role": "assistant", "content": "A1"},
            {"id": "u2", "role": "user", "content": "U2"}]
    result = assemble("builtin-native-slots", st, chat)
    assert pairs(result) == [
        ("SYS", "system"), ("U1", "user"), ("A1", "assistant"), ("MID", "user"), ("U2", "user"), ("END", "user")]
    assert "NATIVE_DELIVERY_ADJUSTED" in codes(result)


def test_native_slots_with_only_an_input_slot_keeps_prefix_roles() -> None:
    st = {"prompts": [{"identifier": "a", "role": "system", "content": "PRE"}, {"identifier": "i", "content": "{{input}}"},
                      {"identifier": "z", "content": "POST"}]}
    first_turn = [{"id": "now", "role": "user", "content": "NOW"}]  # no history yet: the input is the only slot
    assert pairs(assemble("builtin-native-slots", st, first_turn)) == [("PRE", "system"), ("NOW", "user"), ("POST", "user")]


def test_native_slots_refuse_input_before_history() -> None:
    st = {"prompts": [{"identifier": "i", "content": "{{input}}"}, {"identifier": "h", "content": "{{history}}"}]}
    with pytest.raises(TemplateError) as err:
        assemble("builtin-native-slots", st)
    assert err.value.code == "ASSEMBLY_NATIVE_UNSUPPORTED"


def test_native_modes_refuse_rules_they_cannot_honour() -> None:
    base = builtin_strategy("builtin-native-slots").to_dict()
    for change in ({"depth": 2}, {"lifetime": "snapshot"}, {"enabled": False, "kind": "history"}):
        data = json.loads(json.dumps(base))
        target = next(r for r in data["rules"] if r["kind"] == change.get("kind", "worldbook"))
        target.update({k: v for k, v in change.items() if k != "kind"})
        with pytest.raises(TemplateError) as err:
            assemble(parse_preset(data))
        assert err.value.code in ("ASSEMBLY_NATIVE_UNSUPPORTED", "ASSEMBLY_RULE_UNSUPPORTED")
    data = json.loads(json.dumps(base))
    data.pop("backend")
    data.pop("layout")
    data["placement"] = "native-slots"
    with pytest.raises(TemplateError) as err:
        assemble(parse_preset(data))
    assert err.value.code == "ASSEMBLY_PLACEMENT_UNSUPPORTED"


def test_native_modes_keep_native_system_updates_at_their_boundary() -> None:
    chat = [{"id": "s", "role": "system", "content": "BASE"}, {"id": "u1", "role": "user", "content": "U1"},
            {"id": "s2", "role": "system", "content": "LATER"}, {"id": "u2", "role": "user", "content": "U2"}]
    result = assemble("builtin-native-roles", chat=chat)
    assert [m["content"] for m in result.logical_messages] == ["BASE", "LORE", "TAIL", "U1", "LATER", "U2", "HEAD"]


# -- immutability, copy-on-edit, selection ---------------------------------------------------------------


def test_builtins_are_immutable_and_copied_on_edit() -> None:
    library = StrategyLibrary()
    with pytest.raises(TemplateError) as err:
        library.save(builtin_strategy("builtin-st"))
    assert err.value.code == "STRATEGY_BUILTIN_IMMUTABLE"
    with pytest.raises(TemplateError) as err:
        library.delete("builtin-st")
    assert err.value.code == "STRATEGY_BUILTIN_IMMUTABLE"
    copy = library.copy("builtin-st", "mine", "My ST")
    assert copy.id == "mine" and copy.name == "My ST" and copy.placement == "st"
    edited = copy.to_dict()
    edited["rules"][4]["enabled"] = False
    library.save(edited)
    assert not library.get("mine").rules[4].enabled and builtin_strategy("builtin-st").rules[4].enabled
    assert library.ids()[:3] == list(BUILTIN_IDS) and "mine" in library.ids()


def test_applying_stores_an_independent_snapshot() -> None:
    store = SelectionStore()
    store.library.copy("builtin-st", "mine")
    store.select("s1", "mine")
    edited = store.library.get("mine").to_dict()
    edited["rules"][4]["enabled"] = False
    store.library.save(edited)
    applied = store.effective("s1")
    assert applied is not None and applied.rules[4].enabled  # the session keeps what was applied
    store.select("s1", "mine")  # re-applying adopts the edit
    assert not store.effective("s1").rules[4].enabled  # type: ignore[union-attr]


def test_selection_null_disables_and_default_applies_in_play_mode_only() -> None:
    store = SelectionStore()
    assert store.effective("fresh").id == "builtin-native-slots"  # type: ignore[union-attr]
    assert store.effective("fresh", mode="native") is None
    store.select("off", None)
    assert store.effective("off") is None and store.selection("off").strategy_id is None  # type: ignore[union-attr]
    store.apply_default("child-parent")
    assert store.effective("child", parent="child-parent").id == "builtin-native-slots"  # type: ignore[union-attr]


def test_applied_strategies_cannot_be_deleted_and_session_ids_are_checked() -> None:
    store = SelectionStore()
    store.library.copy("builtin-native-roles", "mine")
    store.select("s1", "mine")
    with pytest.raises(TemplateError) as err:
        store.library.delete("mine")
    assert err.value.code == "STRATEGY_IN_USE"
    store.select("s1", None)
    store.library.delete("mine")
    for bad in ("__proto__", "", "-x", "a" * 201):
        with pytest.raises(TemplateError) as err:
            store.select(bad, "builtin-st")
        assert err.value.code == "STRATEGY_SESSION_INVALID"


def test_preview_assembles_without_changing_the_selection() -> None:
    store = SelectionStore()
    store.select("s1", "builtin-st")
    request = {"messages": FIXTURE_CHAT, "input_ids": ["now"],
               "assets": {"st_preset": FIXTURE_PRESET, "world_info": FIXTURE_LORE}}
    result = store.preview("builtin-native-roles", request)
    assert [m["content"] for m in result.logical_messages] == ["LORE", "TAIL", "OLD", "HEAD"]  # preview: no unsent input
    assert store.selection("s1").strategy_id == "builtin-st"  # type: ignore[union-attr]


# -- CLI -------------------------------------------------------------------------------------------------


def test_cli_assembles_with_a_builtin_and_an_st_preset(tmp_path: Path) -> None:
    (tmp_path / "st.json").write_text(json.dumps(FIXTURE_PRESET))
    (tmp_path / "chat.json").write_text(json.dumps(FIXTURE_CHAT))
    book = {"entries": {"0": {"uid": 0, "key": ["now"], "content": "LORE", "position": 0},
                        "1": {"uid": 1, "key": ["now"], "content": "Eldoria", "position": 7, "outletName": "places"}}}
    (tmp_path / "book.json").write_text(json.dumps(book))
    runner = CliRunner()
    out = {}
    for strategy in BUILTIN_IDS:
        res = runner.invoke(cli, ["assemble", "--strategy", strategy, "--preset", str(tmp_path / "st.json"),
                                  "--chat", str(tmp_path / "chat.json"), "--book", str(tmp_path / "book.json"),
                                  "--system-update", "in-history", "--json"])
        assert res.exit_code == 0, res.output
        out[strategy] = json.loads(res.output)
    logical = [(m["content"], m["role"]) for m in out["builtin-st"]["logical_messages"]]
    # builtin-st fills what the preset lacks as SillyTavern does (its fresh-install new-chat prompt)
    assert logical == [("HEAD", "user"), ("LORE", "system"), ("[Start a new Chat]", "system"), ("OLD", "user"),
                       ("NOW", "user"), ("TAIL", "system")]
    assert "NATIVE_ROLE_ADJUSTED" in [d["code"] for d in out["builtin-native-slots"]["diagnostics"]]


def test_cli_outlets_reach_the_outlet_macro(tmp_path: Path) -> None:
    st = {"prompts": [{"identifier": "main", "content": "Places: {{outlet::places}}"}, {"identifier": "chatHistory",
                                                                                          "marker": True}]}
    (tmp_path / "st.json").write_text(json.dumps(st))
    (tmp_path / "chat.json").write_text(json.dumps(FIXTURE_CHAT))
    book = {"entries": {"1": {"uid": 1, "key": ["now"], "content": "Eldoria", "position": 7, "outletName": "places"}}}
    (tmp_path / "book.json").write_text(json.dumps(book))
    res = CliRunner().invoke(cli, ["assemble", "--strategy", "builtin-st", "--preset", str(tmp_path / "st.json"),
                                   "--chat", str(tmp_path / "chat.json"), "--book", str(tmp_path / "book.json"),
                                   "--messages"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["content"] == "Places: Eldoria"


def test_cli_applies_the_presets_names_behavior_to_the_chat(tmp_path: Path) -> None:
    st = {**FIXTURE_PRESET, "names_behavior": 2}
    (tmp_path / "st.json").write_text(json.dumps(st))
    (tmp_path / "chat.json").write_text(json.dumps(FIXTURE_CHAT))
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Seraphina"}}
    (tmp_path / "card.json").write_text(json.dumps(card))
    res = CliRunner().invoke(cli, ["assemble", "--strategy", "builtin-st", "--preset", str(tmp_path / "st.json"),
                                   "--chat", str(tmp_path / "chat.json"), "--card", str(tmp_path / "card.json"),
                                   "--messages"])
    assert res.exit_code == 0, res.output
    assert [m["content"] for m in json.loads(res.output) if m["role"] == "user"][:3] == ["HEAD", "User: OLD", "User: NOW"]
