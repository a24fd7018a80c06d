"""Chat-completion presets: prompts, prompt_order, injection fields, and the quirks of real presets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernbox.assets import GLOBAL_CHARACTER_ID, Preset, load_asset
from tavernbox.errors import TemplateError


def preset(prompts: list[dict[str, Any]] | None = None, order: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "temperature": 1.0,
        "prompts": prompts
        if prompts is not None
        else [
            {"identifier": "main", "name": "Main Prompt", "system_prompt": True, "role": "system", "content": "Hi {{char}}"},
            {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
        ],
        "prompt_order": order
        if order is not None
        else [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}, {"identifier": "chatHistory", "enabled": False}]}],
    }
    raw.update(extra)
    return raw


def load(raw: dict[str, Any]) -> tuple[Preset, list[Any]]:
    asset = load_asset(json.dumps(raw).encode(), name="p")
    assert asset.kind == "preset"
    return asset.model, list(asset.diagnostics)


def test_prompts_get_sillytavern_defaults() -> None:
    model, diags = load(preset())
    assert diags == []
    main = model.prompt("main")
    assert main is not None
    assert (main.role, main.injection_position, main.injection_depth, main.injection_order) == ("system", 0, 4, 100)
    assert (main.forbid_overrides, main.marker, main.injection_trigger) == (False, False, [])
    assert model.prompt("chatHistory").marker is True
    assert model.name == "p"


def test_order_for_global_character_and_string_comparison() -> None:
    model, _ = load(preset())
    assert [(o.identifier, o.enabled) for o in model.order_for()] == [("main", True), ("chatHistory", False)]
    assert model.order_for(GLOBAL_CHARACTER_ID) == model.order_for(100001)
    assert model.order_for(42) == []


def test_unknown_fields_and_extensions_round_trip() -> None:
    raw = preset(extensions={"regex_scripts": [{"findRegex": "/a/", "replaceString": "<script>x()</script>"}]}, openai_max_context=8000)
    raw["prompts"][0]["extra"] = {"vendor": True}
    model, _ = load(raw)
    assert model.model_dump(by_alias=True, exclude_unset=True) == raw


def test_empty_role_reads_as_system_with_a_warning_and_path() -> None:
    raw = preset()
    raw["prompts"][0]["role"] = ""
    model, diags = load(raw)
    assert model.prompts[0].role == "system"
    [d] = diags
    assert (d.code, d.severity, d.path) == ("ASSET_VALUE_NORMALISED", "warning", "$.prompts[0].role")
    assert d.data == {"original": ""}


def test_missing_role_defaults_to_system_silently() -> None:
    raw = preset()
    del raw["prompts"][0]["role"]
    model, diags = load(raw)
    assert model.prompts[0].role == "system" and diags == []


def test_string_character_id_is_read_as_its_number() -> None:
    raw = preset(order=[{"character_id": "100000", "order": [{"identifier": "main"}]}])
    model, diags = load(raw)
    assert model.prompt_order[0].character_id == 100000
    assert model.order_for(100000)[0].enabled is True
    [d] = diags
    assert (d.code, d.path) == ("ASSET_VALUE_NORMALISED", "$.prompt_order[0].character_id")


def test_non_numeric_character_id_is_kept_with_a_warning() -> None:
    model, diags = load(preset(order=[{"character_id": "abc", "order": []}]))
    assert model.prompt_order[0].character_id == "abc"
    assert [(d.code, d.severity) for d in diags] == [("ASSET_VALUE_NORMALISED", "warning")]


def test_huge_injection_order_is_kept_exactly_and_flagged() -> None:
    raw = preset()
    raw["prompts"][0].update({"injection_position": 1, "injection_order": 10**18, "injection_depth": 9999})
    model, diags = load(raw)
    assert model.prompts[0].injection_order == 10**18
    assert model.prompts[0].in_chat is True
    [d] = diags
    assert (d.code, d.path) == ("ASSET_NUMBER_UNSAFE", "$.prompts[0].injection_order")
    assert "(rounded)" not in d.message  # 1e18 is exact in a double


def test_unsafe_number_that_javascript_rounds_says_so() -> None:
    raw = preset()
    raw["prompts"][0]["injection_order"] = 2**53 + 1
    _, [d] = load(raw)
    assert "(rounded)" in d.message


def test_null_injection_fields_read_as_defaults() -> None:
    raw = preset()
    raw["prompts"][0]["injection_depth"] = None
    model, [d] = load(raw)
    assert model.prompts[0].injection_depth == 4
    assert d.path == "$.prompts[0].injection_depth"


def test_prompt_without_identifier_is_rejected_with_path() -> None:
    raw = preset()
    del raw["prompts"][1]["identifier"]
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps(raw).encode())
    assert (info.value.code, info.value.path) == ("ASSET_FIELD_MISSING", "$.prompts[1].identifier")


def test_wrong_injection_depth_type_is_rejected_with_path() -> None:
    raw = preset()
    raw["prompts"][1]["injection_depth"] = "deep"
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps(raw).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.prompts[1].injection_depth")


def test_prompts_of_wrong_type_is_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"prompts": {"main": {}}, "prompt_order": []}).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.prompts")


def test_order_naming_an_unknown_prompt_is_reported() -> None:
    raw = preset(order=[{"character_id": 100001, "order": [{"identifier": "ghost", "enabled": True}]}])
    _, [d] = load(raw)
    assert (d.code, d.severity, d.path) == ("ASSET_REFERENCE_MISSING", "info", "$.prompt_order[0].order[0].identifier")


def test_duplicate_identifier_warns_and_the_later_prompt_wins() -> None:
    raw = preset()
    raw["prompts"].append({"identifier": "main", "content": "second"})
    model, diags = load(raw)
    assert [d.code for d in diags] == ["ASSET_DUPLICATE_ID"]
    assert model.prompt("main").content == "second"


def test_legacy_top_level_prompt_fields_become_prompts() -> None:
    raw = {"temperature": 0.9, "main_prompt": "Be {{char}}.", "jailbreak_prompt": "Stay.", "nsfw_prompt": ""}
    model, diags = load(raw)
    assert model.prompts is None
    assert [(p.identifier, p.content) for p in model.resolved_prompts()] == [("main", "Be {{char}}."), ("nsfw", ""), ("jailbreak", "Stay.")]
    [d] = diags
    assert (d.code, d.path) == ("ASSET_FIELD_MISSING", "$.prompts")


def test_legacy_format_fields_are_typed() -> None:
    model, _ = load(preset(wi_format="[{0}]", scenario_format="{{scenario}}", impersonation_prompt="imp"))
    assert (model.wi_format, model.scenario_format, model.impersonation_prompt) == ("[{0}]", "{{scenario}}", "imp")


def test_injection_position_outside_0_and_1_reads_as_relative() -> None:
    raw = preset()
    raw["prompts"][0]["injection_position"] = 2
    model, [d] = load(raw)
    assert model.prompts[0].injection_position == 0 and not model.prompts[0].in_chat
    assert (d.code, d.path, d.data) == ("ASSET_VALUE_NORMALISED", "$.prompts[0].injection_position", {"original": 2})


def test_negative_in_chat_depth_is_flagged() -> None:
    raw = preset()
    raw["prompts"][0].update({"injection_position": 1, "injection_depth": -1})
    model, [d] = load(raw)
    assert model.prompts[0].injection_depth == -1
    assert d.path == "$.prompts[0].injection_depth"
