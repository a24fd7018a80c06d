"""Prompt-studio components: validation of the component model and ``settings.yaml`` persistence
(supplements persist, natives never)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from tavernbox import TemplateError
from tavernbox.strategies.components import (
    RESERVED_PREFIX,
    Component,
    dump_settings,
    load_settings,
    native_section,
    parse_component,
    parse_settings,
    save_settings,
)

SUPPLEMENTS = [
    {"id": "style", "kind": "supplement", "role": "system", "position": None, "order": 10, "enabled": True,
     "template": "Write tersely.\nNo lists.", "origin": None},
    {"id": "remind", "kind": "supplement", "role": "user", "position": "anchored", "order": 0, "enabled": False,
     "template": "Remember: {{user_input}} — 日本語 ok", "origin": None},
    {"id": "mine", "kind": "supplement", "role": "system", "position": None, "order": 0.5, "enabled": True,
     "template": "MY PERSONA", "origin": "persona"},
]


def test_supplements_round_trip_through_settings_yaml(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    save_settings(path, SUPPLEMENTS)
    loaded = load_settings(path)
    assert [c.to_dict() for c in loaded] == SUPPLEMENTS
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["version"] == 1 and [c["id"] for c in data["components"]] == ["style", "remind", "mine"]
    assert "日本語" in path.read_text(encoding="utf-8")  # written as text, not escaped


def test_natives_are_never_persisted(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    save_settings(path, [native_section("identity", "SECRET HOST TEXT", -100), *SUPPLEMENTS])
    text = path.read_text(encoding="utf-8")
    assert "identity" not in text and "SECRET HOST TEXT" not in text
    assert [c.id for c in load_settings(path)] == ["style", "remind", "mine"]


def test_a_native_entry_in_settings_yaml_is_refused() -> None:
    with pytest.raises(TemplateError) as err:
        parse_settings("components:\n  - {id: n, kind: native, role: system, template: X}\n")
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == "$.components[0].kind"


def test_a_missing_settings_file_means_no_supplements(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.yaml") == []
    assert parse_settings("") == []


def test_saving_replaces_the_file_atomically(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    save_settings(path, SUPPLEMENTS)
    with pytest.raises(TemplateError):
        save_settings(path, [{"id": " bad "}])  # invalid: nothing written, old file intact
    assert [c.id for c in load_settings(path)] == ["style", "remind", "mine"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.yaml"]  # no temporary left behind


def test_yaml_that_does_not_parse_reports_line_and_column() -> None:
    with pytest.raises(TemplateError) as err:
        parse_settings("components:\n  - id: a\n    role: [unclosed\n")
    assert err.value.code == "COMPONENT_SETTINGS_INVALID" and err.value.line is not None and err.value.column


@pytest.mark.parametrize(
    ("text", "path"),
    [("- just a list\n", "$"), ("version: 2\ncomponents: []\n", "$.version"), ("components: {}\n", "$.components")],
)
def test_settings_of_the_wrong_shape_name_their_path(text: str, path: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse_settings(text)
    assert err.value.code == "COMPONENT_SETTINGS_INVALID" and err.value.path == path


def test_yaml_tags_that_would_build_objects_are_not_executed() -> None:
    with pytest.raises(TemplateError) as err:
        parse_settings("components: !!python/object/apply:os.system ['true']\n")
    assert err.value.code == "COMPONENT_SETTINGS_INVALID"


def test_duplicate_ids_in_settings_are_refused() -> None:
    with pytest.raises(TemplateError) as err:
        parse_settings(dump_settings([SUPPLEMENTS[0]]) + "- {id: style, role: system}\n")
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == "$.components[1].id"


# -- the component model ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"id": ""}, "$.id"),
        ({"id": " padded"}, "$.id"),
        ({"id": RESERVED_PREFIX + "x"}, "$.id"),
        ({"id": "a", "kind": "override"}, "$.kind"),
        ({"id": "a", "role": "tool"}, "$.role"),
        ({"id": "a", "role": "system", "position": "tail"}, "$.position"),
        ({"id": "a", "role": "user"}, "$.position"),
        ({"id": "a", "role": "assistant", "position": "middle"}, "$.position"),
        ({"id": "a", "order": math.inf}, "$.order"),
        ({"id": "a", "order": True}, "$.order"),
        ({"id": "a", "order": "1"}, "$.order"),
        ({"id": "a", "enabled": "yes"}, "$.enabled"),
        ({"id": "a", "template": 3}, "$.template"),
        ({"id": "a", "origin": ""}, "$.origin"),
        ({"id": "a", "kind": "native", "role": "user", "position": "tail"}, "$.role"),
        ({"id": "a", "kind": "native", "origin": "b"}, "$.origin"),
        ({"id": "a", "script": "rm -rf"}, "$.script"),
        ("not an object", "$"),
    ],
)
def test_invalid_components_fail_with_their_json_path(raw: Any, path: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse_component(raw)
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == path


def test_defaults_make_an_enabled_system_supplement() -> None:
    assert parse_component({"id": "a"}) == Component("a", "supplement", "system", None, 0, True, "", None)
