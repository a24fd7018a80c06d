"""Text-completion templates: validation, master exports, and names looked up in a template folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernbox.assets.text_templates import (
    TemplateFolder,
    load_text_template,
    read_master_export,
    template_folder,
    validate,
)
from tavernbox.errors import TemplateError

GOLDEN = Path(__file__).parent / "golden" / "st_text_completion" / "requests.jsonl"

INSTRUCT = {"name": "Tags", "input_sequence": "<in>", "output_sequence": "<out>", "stop_sequence": "</s>",
            "wrap": False, "names_behavior": "none"}
CONTEXT = {"name": "Plain", "story_string": "{{description}}", "example_separator": "---"}
SYSPROMPT = {"name": "Terse", "content": "Be terse.", "post_history": ""}


def _folder(tmp_path: Path) -> TemplateFolder:
    for kind, obj in (("instruct", INSTRUCT), ("context", CONTEXT), ("sysprompt", SYSPROMPT)):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / f"file-{obj['name']}.json").write_text(json.dumps(obj), encoding="utf-8")
    return TemplateFolder(tmp_path)


def test_missing_fields_take_sillytaverns_starting_values() -> None:
    template = validate("instruct", INSTRUCT, "inline")
    assert template.fields["wrap"] is False and template.fields["macro"] is True
    assert template.fields["enabled"] is True and template.fields["sequences_as_stop_strings"] is True
    assert validate("context", CONTEXT, "x").fields["chat_start"] == "***"


@pytest.mark.parametrize(
    ("kind", "raw", "code", "path"),
    [
        ("instruct", {"wrap": "yes"}, "ASSET_INVALID", "$.wrap"),
        ("instruct", {"names_behavior": "sometimes"}, "ASSET_INVALID", "$.names_behavior"),
        ("context", {"example_separator": "x"}, "ASSET_FIELD_MISSING", "$.story_string"),
        ("context", {"story_string": "", "story_string_depth": True}, "ASSET_INVALID", "$.story_string_depth"),
        ("context", {"story_string": "", "story_string_position": 3}, "ASSET_INVALID", "$.story_string_position"),
        ("sysprompt", [], "ASSET_INVALID", "$"),
    ],
)
def test_bad_fields_are_errors_at_their_json_path(kind: str, raw: object, code: str, path: str) -> None:
    with pytest.raises(TemplateError) as info:
        validate(kind, raw, "inline")
    assert (info.value.code, info.value.path) == (code, path)


def test_unknown_fields_are_kept_and_reported() -> None:
    template = validate("sysprompt", {"content": "x", "new_field": 1}, "inline")
    assert template.fields["new_field"] == 1
    assert [d.code for d in template.diagnostics] == ["INPUT_UNKNOWN_KEY"]


def test_names_are_found_by_file_name_or_by_name_field(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert load_text_template("instruct", "Tags", folder).fields["input_sequence"] == "<in>"
    assert load_text_template("context", "file-Plain", folder).fields["example_separator"] == "---"
    with pytest.raises(TemplateError, match="no sysprompt template named 'Chatty'.*file-Terse"):
        load_text_template("sysprompt", "Chatty", folder)


def test_a_name_without_a_folder_says_where_templates_come_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVERNBOX_ST_TEMPLATES", raising=False)
    assert template_folder() is None
    with pytest.raises(TemplateError, match="TAVERNBOX_ST_TEMPLATES") as info:
        load_text_template("instruct", "ChatML", None)
    assert info.value.code == "INPUT_INVALID"


def test_the_environment_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _folder(tmp_path)
    monkeypatch.setenv("TAVERNBOX_ST_TEMPLATES", str(tmp_path))
    folder = template_folder()
    assert folder is not None and folder.names("context") == ["file-Plain"]


def test_a_master_export_gives_each_part(tmp_path: Path) -> None:
    export = {"instruct": INSTRUCT, "context": CONTEXT, "sysprompt": SYSPROMPT, "preset": {"temp": 1}}
    path = tmp_path / "master.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    assert load_text_template("context", str(path)).fields["story_string"] == "{{description}}"
    parts = read_master_export(export)
    assert sorted(parts) == ["context", "instruct", "sysprompt"]
    with pytest.raises(TemplateError) as info:
        read_master_export({"instruct": INSTRUCT, "context": {"example_separator": 1}})
    assert info.value.path == "$.context.story_string"


def test_every_recorded_template_validates() -> None:
    # the templates SillyTavern applied in the recordings (every shipped instruct template and its context)
    records = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    assert len(records) >= 40
    for record in records:
        snapshot = record["snapshot"]
        validate("context", snapshot["context"], record["id"])
        validate("sysprompt", snapshot["sysprompt"], record["id"])
        validate("instruct", snapshot["instruct"], record["id"])
