"""Bytes to data: encodings, BOM, control characters, JSON/YAML errors at line:column."""

from __future__ import annotations

import pytest

from tavernbox.assets import load_asset, parse_structured
from tavernbox.assets.decoding import decode_bytes, parse_json_text, parse_yaml_text
from tavernbox.errors import TemplateError

PRESET = '{"prompts": [{"identifier": "main", "name": "Main", "content": "%s"}], "prompt_order": []}'


def test_utf8_text_decodes_without_diagnostics() -> None:
    decoded = decode_bytes("héllo".encode())
    assert (decoded.text, decoded.encoding, decoded.diagnostics) == ("héllo", "utf-8", ())


def test_bom_is_removed_with_an_info_diagnostic() -> None:
    decoded = decode_bytes(b"\xef\xbb\xbf{}")
    assert decoded.text == "{}"
    assert decoded.encoding == "utf-8-sig"
    [d] = decoded.diagnostics
    assert (d.code, d.severity, d.path) == ("ASSET_BOM", "info", "$")


def test_windows_1252_falls_back_with_a_warning_naming_the_byte() -> None:
    data = (PRESET % "it\x92s").encode("latin-1")
    decoded = decode_bytes(data)
    assert "it\u2019s" in decoded.text
    [d] = decoded.diagnostics
    assert (d.code, d.severity, d.path) == ("ASSET_ENCODING", "warning", "$")
    assert d.data["byte_offset"] == data.index(b"\x92")
    assert "Windows-1252" in d.message


def test_bytes_undefined_in_windows_1252_are_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        decode_bytes(b'{"a": "\x81"}')
    assert info.value.code == "ASSET_ENCODING"
    assert info.value.path == "$"
    assert "0x81" in info.value.message


def test_non_utf8_preset_loads_with_its_encoding_recorded() -> None:
    asset = load_asset((PRESET % "caf\xe9").encode("cp1252"))
    assert asset.kind == "preset"
    assert asset.encoding == "cp1252"
    assert asset.model.prompts[0].content == "café"
    assert [d.code for d in asset.diagnostics] == ["ASSET_ENCODING"]


def test_raw_control_characters_in_strings_are_accepted_with_line_and_column() -> None:
    text = '{\n  "a": "x\x1ay",\n  "b": "\x1a"\n}'
    value, diags = parse_json_text(text)
    assert value == {"a": "x\x1ay", "b": "\x1a"}
    [d] = diags
    assert d.code == "ASSET_CONTROL_CHAR"
    assert (d.data["line"], d.data["column"]) == (2, 10)
    assert "2 in all" in d.message


def test_json_error_reports_line_and_column() -> None:
    with pytest.raises(TemplateError) as info:
        parse_json_text('{\n  "a": 1,\n  "b": }')
    err = info.value
    assert err.code == "ASSET_JSON"
    assert (err.line, err.column) == (3, 8)
    assert err.snippet() is not None


def test_yaml_uses_core_schema_scalars_like_javascript() -> None:
    value = parse_yaml_text("time: 15:44\nok: no\nday: 2024-04-08\nn: 0x1F\nf: 1.5\nt: true\nz: ~\n")
    assert value == {"time": "15:44", "ok": "no", "day": "2024-04-08", "n": 31, "f": 1.5, "t": True, "z": None}


def test_yaml_error_reports_line_and_column() -> None:
    with pytest.raises(TemplateError) as info:
        parse_yaml_text("a: 1\nb: [1, 2\nc: 3\n")
    assert info.value.code == "ASSET_JSON"
    assert info.value.line is not None and info.value.column is not None


def test_json_looking_text_falls_back_to_json5() -> None:
    value, syntax, [diag] = parse_structured("{a: 1, // note\n 'b': [1, 2,],}")
    assert (value, syntax) == ({"a": 1, "b": [1, 2]}, "json5")
    assert (diag.code, diag.severity) == ("ASSET_JSON", "info")


def test_a_json_file_must_be_strict_json() -> None:
    with pytest.raises(TemplateError) as info:
        parse_structured('{"a": [1, 2, "k": 3]}', suffix=".json")
    assert info.value.code == "ASSET_JSON"
    assert (info.value.line, info.value.column) == (1, 17)


def test_json_looking_text_that_yaml_accepts_loads_with_a_warning() -> None:
    # MVU tries JSON, JSON5, then YAML: a YAML flow sequence may hold a one-pair mapping.
    value, syntax, [diag] = parse_structured('{"a": [1, 2, "k": 3]}', suffix=".yaml")
    assert (value, syntax) == ({"a": [1, 2, {"k": 3}]}, "yaml")
    assert (diag.code, diag.severity, diag.data["column"]) == ("ASSET_JSON", "warning", 17)


def test_json_looking_text_nothing_accepts_reports_the_json_error() -> None:
    with pytest.raises(TemplateError) as info:
        parse_structured('{"a": 1,\n "b": [}', suffix=".txt")
    assert info.value.code == "ASSET_JSON"
    assert "JSON" in info.value.message
    assert info.value.line == 2


def test_plain_text_is_an_unknown_kind_not_a_crash() -> None:
    with pytest.raises(TemplateError) as info:
        parse_structured("Some notes: here\n  - bad: indent: x\n", suffix=".md")
    assert info.value.code == "ASSET_KIND_UNKNOWN"


def test_invalid_json_in_a_json_file_is_asset_json() -> None:
    with pytest.raises(TemplateError) as info:
        parse_structured("not json at all", suffix=".json")
    assert info.value.code == "ASSET_JSON"
    assert (info.value.line, info.value.column) == (1, 1)


def test_yaml_anchors_may_use_any_non_space_characters() -> None:
    value = parse_yaml_text("a:\n  - &分隔符\n    x: 1\nb: *分隔符\nc: [*分隔符, 2]\n")
    assert value == {"a": [{"x": 1}], "b": {"x": 1}, "c": [{"x": 1}, 2]}


def test_yaml_empty_anchor_is_an_error_at_its_position() -> None:
    with pytest.raises(TemplateError) as info:
        parse_yaml_text("a: & \n")
    assert info.value.code == "ASSET_JSON" and info.value.line == 1
