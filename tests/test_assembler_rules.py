"""Presets in format ``dsh-tavern-request-assembly`` v1: validation (section 1.2), import and export."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _assembler_support import preset, rule

from tavernbox import TemplateError
from tavernbox.assembler import dump_preset, load_preset, parse_preset
from tavernbox.assembler.rules import MAX_RULES


def bad(data: Any) -> TemplateError:
    with pytest.raises(TemplateError) as err:
        parse_preset(data)
    assert err.value.code == "ASSEMBLY_PRESET_INVALID"
    return err.value


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ([], "$"),
        ({**preset([]), "format": "other"}, "$.format"),
        ({**preset([]), "version": 2}, "$.version"),
        ({**preset([]), "version": True}, "$.version"),
        ({**preset([]), "name": "  "}, "$.name"),
        ({**preset([]), "name": "x" * 201}, "$.name"),
        ({**preset([]), "backend": "quantum"}, "$.backend"),
        ({**preset([]), "rules": {}}, "$.rules"),
        (preset([rule("custom", "a")] * 2), "$.rules[1].id"),
        (preset([{"id": "bad id", "kind": "custom"}]), "$.rules[0].id"),
        (preset([{"id": "x" * 81, "kind": "custom"}]), "$.rules[0].id"),
        (preset([{"id": "a", "kind": ".custom"}]), "$.rules[0].kind"),
        (preset([{"id": "a", "kind": "k" * 161}]), "$.rules[0].kind"),
        (preset([rule("custom", "a", role="narrator")]), "$.rules[0].role"),
        (preset([rule("custom", "a", lifetime="forever")]), "$.rules[0].lifetime"),
        (preset([rule("custom", "a", depth=-1)]), "$.rules[0].depth"),
        (preset([rule("custom", "a", depth=10_001)]), "$.rules[0].depth"),
        (preset([rule("custom", "a", depth=1.5)]), "$.rules[0].depth"),
        (preset([rule("custom", "a", depth=True)]), "$.rules[0].depth"),
        (preset([rule("custom", "a", text=3)]), "$.rules[0].text"),
        (preset([rule("custom", "a", text="x" * 524_289)]), "$.rules[0].text"),
        (preset([rule("custom", "a", delivery="later")]), "$.rules[0].delivery"),
        (preset([rule("custom", "a", inputMode="code")]), "$.rules[0].inputMode"),
        (preset([7]), "$.rules[0]"),
    ],
)
def test_invalid_presets_name_the_json_path(data: Any, path: str) -> None:
    assert bad(data).path == path


def test_at_most_128_rules() -> None:
    rules = [rule("custom", f"r{i}") for i in range(MAX_RULES)]
    assert len(parse_preset(preset(rules)).rules) == MAX_RULES
    assert bad(preset([*rules, rule("custom", "one-more")])).path == "$.rules"


def test_rule_defaults() -> None:
    p = parse_preset(preset([{"id": "h", "kind": "history"}, {"id": "c", "kind": "custom"}]))
    h, c = p.rules
    assert (h.enabled, h.role, h.lifetime, h.depth, h.text, h.name) == (True, "preserve", "request", None, "", "")
    assert c.role == "user"  # authored text needs an explicit role; default user


def test_legacy_preserve_on_custom_text_means_system() -> None:
    p = parse_preset(preset([rule("custom", "c", role="preserve"), rule("dsh.text", "d", role="preserve")]))
    assert [r.role for r in p.rules] == ["system", "system"]


def test_only_literal_false_disables_and_names_are_cut() -> None:
    p = parse_preset(preset([rule("custom", "a", enabled=0, name="n" * 300), rule("custom", "b", enabled=False, name=5)]))
    assert p.rules[0].enabled and not p.rules[1].enabled
    assert len(p.rules[0].name) == 200 and p.rules[1].name == ""


def test_placement_is_derived_from_layout() -> None:
    assert parse_preset({**preset([]), "placement": "weird"}).placement == "modules"
    assert parse_preset({**preset([]), "layout": {"source": "preset-slots"}}).placement == "st"
    assert parse_preset({**preset([]), "backend": "native", "layout": {"source": "manual"}}).placement == "native-roles"


def test_export_then_import_round_trips() -> None:
    data = {
        **preset([rule("native-system"), rule("custom", "c", text="héllo\n", depth=3, name="N", inputMode="text")]),
        "id": "p1",
        "placement": "st",
        "script": "alert(1)",  # executable content is never kept
    }
    p = parse_preset(data)
    text = dump_preset(p)
    assert "script" not in json.loads(text)
    assert load_preset(text) == p
    assert "héllo" in text  # non-ASCII kept


def test_bad_json_has_line_and_column() -> None:
    with pytest.raises(TemplateError) as err:
        load_preset('{\n  "format": ,\n}')
    assert err.value.code == "ASSEMBLY_PRESET_INVALID" and (err.value.line, err.value.column) == (2, 13)
