"""``tavernbox import``: summaries, --json, exit codes, and rejections that name the file and path."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tavernbox.cli.importer import command

BOOK = {"entries": {"0": {"uid": 0, "key": ["a"], "content": "A", "constant": True}}}
CARD = {"spec": "chara_card_v2", "data": {"name": "Mira", "first_mes": "Hi", "alternate_greetings": ["Yo"]}}


def write(tmp_path: Path, name: str, value: object) -> str:
    path = tmp_path / name
    path.write_bytes(value if isinstance(value, bytes) else json.dumps(value).encode())
    return str(path)


def test_summary_lines_and_exit_zero_when_all_load(tmp_path: Path) -> None:
    files = [write(tmp_path, "lore.json", BOOK), write(tmp_path, "mira.json", CARD)]
    result = CliRunner().invoke(command, files)
    assert result.exit_code == 0, result.output
    assert "world book 'lore' (entries 1, constant 1" in result.output
    assert "card 'Mira' (greetings 2, alternate greetings 1" in result.output


def test_json_report(tmp_path: Path) -> None:
    files = [write(tmp_path, "lore.json", BOOK), write(tmp_path, "bad.json", b'{"entries": {"0": {"uid": 0, "key": 5}}}')]
    result = CliRunner().invoke(command, [*files, "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    ok, bad = report["files"]
    assert (ok["ok"], ok["kind"], ok["counts"]["entries"]) == (True, "world_book", 1)
    assert bad["ok"] is False
    assert (bad["error"]["code"], bad["error"]["path"]) == ("ASSET_INVALID", "$.entries.0.key")


def test_rejection_names_file_and_json_path_without_traceback(tmp_path: Path) -> None:
    good = write(tmp_path, "lore.json", BOOK)
    bad = write(tmp_path, "card.json", {"spec": "chara_card_v2", "data": {"name": "X", "character_book": {"entries": [{"keys": 3}]}}})
    result = CliRunner().invoke(command, [good, bad])
    assert result.exit_code == 1
    assert f"{bad}:$.data.character_book.entries[0].keys" in result.output
    assert "ASSET_INVALID" in result.output
    assert "Traceback" not in result.output
    assert "world book 'lore'" in result.output  # the good file is still reported


def test_json_syntax_error_is_reported_at_line_and_column(tmp_path: Path) -> None:
    bad = write(tmp_path, "p.json", b'{\n  "prompts": [\n    {"identifier": }\n  ]\n}')
    result = CliRunner().invoke(command, [bad])
    assert result.exit_code == 1
    assert f"{bad}:3:20" in result.output and "ASSET_JSON" in result.output


def test_diagnostics_are_printed_for_loaded_files(tmp_path: Path) -> None:
    preset = {"prompts": [{"identifier": "main", "role": ""}], "prompt_order": []}
    result = CliRunner().invoke(command, [write(tmp_path, "p.json", preset)])
    assert result.exit_code == 0
    assert "$.prompts[0].role" in result.output and "ASSET_VALUE_NORMALISED" in result.output


def test_unknown_kind_and_missing_file(tmp_path: Path) -> None:
    notes = write(tmp_path, "notes.md", b"# Title\n\nJust: some: notes\n")
    result = CliRunner().invoke(command, [notes, str(tmp_path / "absent.json")])
    assert result.exit_code == 1
    assert "ASSET_KIND_UNKNOWN" in result.output
    assert "INPUT_INVALID" in result.output and "absent.json" in result.output


def test_kind_option_forces_mvu(tmp_path: Path) -> None:
    vars_file = write(tmp_path, "state.yaml", "世界:\n  时间: 15:44\n".encode())
    assert CliRunner().invoke(command, [vars_file]).exit_code == 1
    result = CliRunner().invoke(command, ["--kind", "mvu", vars_file, "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["files"][0]["counts"] == {"variables": 1, "leaves": 1, "described": 0}


def test_console_script_lists_import() -> None:
    from tavernbox.cli.main import main

    result = CliRunner().invoke(main, ["import", "--help"])
    assert result.exit_code == 0 and "--json" in result.output
