"""MVU initial variables: JSON pairs, JSON5, YAML, stat_data wrappers, $meta, kind detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernbox.assets import detect_kind, is_value_with_description, load_asset
from tavernbox.errors import TemplateError

OLD_STYLE = {
    "<user>": {"身份": ["新来的牧师", "随故事进展改变"], "名字": "<user>"},
    "日期": ["03月15日", "今天的日期"],
    "天数": [0, "已经经过的天数"],
}


def test_value_with_description_shape() -> None:
    assert is_value_with_description([1, "d"])
    assert not is_value_with_description(["a", 2])
    assert not is_value_with_description([1, "d", 3])


def test_old_style_json_initvar_is_detected_and_viewed() -> None:
    asset = load_asset(json.dumps(OLD_STYLE, ensure_ascii=False).encode(), name="vars")
    assert asset.kind == "mvu"
    mvu = asset.model
    assert mvu.source_format == "json"
    assert mvu.values() == {"<user>": {"身份": "新来的牧师", "名字": "<user>"}, "日期": "03月15日", "天数": 0}
    assert mvu.descriptions() == {"<user>.身份": "随故事进展改变", "日期": "今天的日期", "天数": "已经经过的天数"}
    assert asset.counts == {"variables": 3, "leaves": 4, "described": 3}
    assert mvu.model_dump(by_alias=True) == {"stat_data": OLD_STYLE}


def test_yaml_initvar_keeps_times_and_words_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "initvar.yaml"
    path.write_text("# yaml-language-server: $schema=x.json\n世界:\n  时间: 15:44\n  晴天: yes\n白娅:\n  依存度: 35\n", encoding="utf-8")
    asset = load_asset(path)
    assert (asset.kind, asset.syntax) == ("mvu", "yaml")
    assert asset.model.stat_data == {"世界": {"时间": "15:44", "晴天": "yes"}, "白娅": {"依存度": 35}}


def test_plain_yaml_needs_initvar_in_the_name_or_an_explicit_kind() -> None:
    text = "系统:\n  当前阶段: 磨合期\n".encode()
    with pytest.raises(TemplateError) as info:
        load_asset(text)
    assert info.value.code == "ASSET_KIND_UNKNOWN"
    assert "kind='mvu'" in info.value.message
    assert load_asset(text, kind="mvu").model.stat_data == {"系统": {"当前阶段": "磨合期"}}


def test_json5_initvar_with_comments() -> None:
    asset = load_asset(b"{\n  // the day\n  day: [1, 'day number'],\n}", kind="mvu")
    assert asset.model.source_format == "json5"
    assert asset.model.values() == {"day": 1}


def test_full_variables_object_with_stat_data_and_meta() -> None:
    raw = {
        "stat_data": {"$meta": {"extensible": True, "strictSet": False}, "hp": [100, "health"], "bag": {"$meta": {"required": ["gold"]}, "gold": 5}},
        "display_data": {},
    }
    asset = load_asset(json.dumps(raw).encode())
    assert asset.kind == "mvu"
    assert asset.diagnostics == ()
    assert asset.model.meta == {"extensible": True, "strictSet": False}
    assert asset.model.values() == {"hp": 100, "bag": {"gold": 5}}
    assert asset.model.model_dump(by_alias=True) == raw


def test_malformed_meta_is_reported_with_path() -> None:
    raw = {"stat_data": {"bag": {"$meta": {"required": "gold", "extensible": "yes", "strictSet": True}}}}
    diags = load_asset(json.dumps(raw).encode()).diagnostics
    found = {(d.code, d.path) for d in diags}
    assert ("ASSET_MVU_META", "$.stat_data.bag.$meta.required") in found
    assert ("ASSET_MVU_META", "$.stat_data.bag.$meta.extensible") in found
    # strictSet belongs on the root only
    assert ("ASSET_MVU_META", "$.stat_data.bag.$meta.strictSet") in found


def test_non_mapping_variables_are_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(b"[1, 2]", kind="mvu")
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$")


def test_json_initvar_with_members_in_an_array_loads_as_yaml_with_a_warning() -> None:
    # Object members inside an array (a real broken initvar): not JSON or JSON5, but YAML flow syntax
    # reads each as a one-pair mapping, as MVU's JSON -> JSON5 -> YAML chain does.
    text = b'{\n  "list": [\n    "a": 1,\n    "b": 2\n  ]\n}'
    asset = load_asset(text, kind="mvu")
    assert asset.syntax == "yaml"
    assert asset.model.stat_data == {"list": [{"a": 1}, {"b": 2}]}
    [d] = asset.diagnostics
    assert (d.code, d.severity, d.data["line"], d.data["column"]) == ("ASSET_JSON", "warning", 3, 8)


def test_unreadable_json_initvar_reports_the_json_position() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(b'{\n  "hp": [100, "health"],\n  "mp": [}\n', kind="mvu")
    assert info.value.code == "ASSET_JSON"
    assert (info.value.line, info.value.column) == (3, 10)


def test_stray_two_string_lists_do_not_make_a_file_mvu() -> None:
    rules = {"rule": ["update the time", "keep it short"], "a": "x", "b": "y", "c": "z", "d": "w"}
    assert detect_kind(rules) is None
    assert detect_kind(rules, name="initvar.yaml") == "mvu"


def test_json_schema_is_not_mvu() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"$schema": "x", "type": "object", "properties": {}}).encode())
    assert info.value.code == "ASSET_KIND_UNKNOWN"
    assert "JSON Schema" in info.value.message
