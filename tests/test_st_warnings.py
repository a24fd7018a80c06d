"""``assemble`` says what the user's material went through (issue 28): the assets' own diagnostics and the macros
left as written, each naming the asset and the prompt, card field or world-info entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tavernbox import assemble_request
from tavernbox.cli.main import main

PRESET: dict[str, Any] = {
    "prompts": [{"identifier": "main", "name": "Main Prompt", "system_prompt": True, "role": "system",
                 "content": "Be {{char}}. {{nosuchmacro}}"},
                {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": True, "marker": True},
                {"identifier": "charDescription", "name": "Char Description", "system_prompt": True, "marker": True},
                {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
    "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": i, "enabled": True} for i in ("main", "worldInfoBefore", "charDescription", "chatHistory")]}],
}
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "description": "Mira keeps the lamp. {{nosuchcardmacro}}"}}
BOOK = {"name": "Lore", "entries": {"0": {"uid": 0, "key": ["lamp"], "content": "The lamp {{nosuchwimacro}} burns.",
                                          "comment": "The lamp", "constant": True, "enabled": True}}}
#: the card-spec list form without ``enabled``: SillyTavern's import disables such entries
LIST_BOOK = {"name": "Old lore", "entries": [{"key": ["storm"], "content": "Storms come at night."}]}
CHAT = {"messages": [{"role": "user", "content": "Is the lamp lit?"}]}


def _write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def test_asset_diagnostics_of_the_assets_used_are_warnings_naming_asset_file_and_path(tmp_path: Path) -> None:
    old = _write(tmp_path, "old-lore.json", LIST_BOOK)
    result = assemble_request({"preset": PRESET, "card": CARD, "books": [BOOK, old], "chat": CHAT})
    missing = [w for w in result.warnings if w.code == "ASSET_FIELD_MISSING" and w.path == "$.entries[0].enabled"]
    assert len(missing) == 1
    [w] = missing
    assert w.message.startswith("$.books[1] (old-lore.json): the entry has no 'enabled'")
    assert w.data["asset"] == "$.books[1]" and w.data["file"] == old


def test_a_windows_1252_preset_is_said(tmp_path: Path) -> None:
    preset = dict(PRESET, prompts=[{**PRESET["prompts"][0], "content": "Caf\u00e9 \u2019quotes\u2019"},
                                   *PRESET["prompts"][1:]])
    path = tmp_path / "cp.json"
    path.write_bytes(json.dumps(preset, ensure_ascii=False).encode("cp1252"))
    result = assemble_request({"preset": str(path), "chat": CHAT})
    [w] = [w for w in result.warnings if w.code == "ASSET_ENCODING"]
    assert w.message.startswith("$.preset (cp.json): the file is not UTF-8") and w.data["asset"] == "$.preset"
    assert "Caf\u00e9" in result.messages[0]["content"]  # read as Windows-1252, and said so


def test_macro_warnings_name_the_prompt_the_card_field_and_the_entry() -> None:
    result = assemble_request({"preset": PRESET, "card": CARD, "books": [BOOK], "chat": CHAT})
    unknown = {w.data["name"]: w for w in result.warnings if w.code == "MACRO_UNKNOWN"}
    assert set(unknown) == {"nosuchmacro", "nosuchcardmacro", "nosuchwimacro"}
    assert unknown["nosuchmacro"].message.startswith("the preset 'preset', prompt 'main' (Main Prompt): unknown macro")
    assert unknown["nosuchmacro"].data["prompt"] == "main"
    assert unknown["nosuchcardmacro"].message.startswith("the description of 'Mira': unknown macro")
    entry = unknown["nosuchwimacro"]
    assert entry.message.startswith("world-info entry 0 (The lamp) of the book 'Lore': unknown macro")
    assert (entry.data["book"], entry.data["uid"]) == ("Lore", 0)


def test_the_cli_prints_them_on_stderr_and_keeps_them_in_json(tmp_path: Path) -> None:
    args = ["assemble", "--preset", _write(tmp_path, "p.json", PRESET), "--card", _write(tmp_path, "c.json", CARD),
            "--book", _write(tmp_path, "old.json", LIST_BOOK), "--chat", _write(tmp_path, "chat.json", CHAT)]
    plain = CliRunner().invoke(main, args)
    assert plain.exit_code == 0, plain.output
    assert "warning ASSET_FIELD_MISSING $.books[0] (old.json): the entry has no 'enabled'" in plain.stderr
    assert "warning MACRO_UNKNOWN the preset 'p', prompt 'main' (Main Prompt): unknown macro" in plain.stderr
    as_json = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    assert {"ASSET_FIELD_MISSING", "MACRO_UNKNOWN"} <= {w["code"] for w in as_json["warnings"]}


def test_an_asset_finding_is_said_once(tmp_path: Path) -> None:
    """The preset source reads the preset again; its own copy of an asset finding is not said a second time."""
    prompts = [dict(PRESET["prompts"][0], injection_order=10**18), *PRESET["prompts"][1:]]
    path = _write(tmp_path, "big-order.json", dict(PRESET, prompts=prompts))
    result = assemble_request({"preset": path, "chat": CHAT})
    unsafe = [w for w in result.warnings if w.code == "ASSET_NUMBER_UNSAFE"]
    assert len(unsafe) == 1 and unsafe[0].message.startswith("$.preset (big-order.json): ")
