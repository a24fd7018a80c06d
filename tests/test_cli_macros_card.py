"""``tavernbox macros --card`` reads cards through the asset importer (JSON and PNG alike)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from test_assets_cards import png_card

from tavernbox.cli.macros import command

ROOT = Path(__file__).resolve().parents[1]


def test_card_option_accepts_a_png_card(tmp_path: Path) -> None:
    card = json.loads((ROOT / "corpora" / "sample-card.json").read_text(encoding="utf-8"))
    png = tmp_path / "mira.png"
    png.write_bytes(png_card({"chara": card}))
    result = CliRunner().invoke(command, ["--card", str(png)], input="{{char}} / {{personality}}")
    assert result.exit_code == 0, result.output
    assert result.output == "Mira / calm, observant, stubborn about safety\n"


def test_card_option_reports_a_broken_card_with_its_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    result = CliRunner().invoke(command, ["--card", str(bad)], input="x")
    assert result.exit_code == 1
    assert "ASSET_JSON" in result.output
    assert "Traceback" not in result.output


def test_readme_example_expands_the_sample_prompt() -> None:
    result = CliRunner().invoke(
        command,
        [
            "--card",
            str(ROOT / "corpora" / "sample-card.json"),
            "--context",
            str(ROOT / "corpora" / "sample-context.json"),
            str(ROOT / "corpora" / "sample-prompt.txt"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "You are Mira, talking with Ash." in result.output
    assert "It is Monday, November 30, 2026, 9:15 PM. The storm has 3 hours left." in result.output
    assert "After this reply it will have 2 left." in result.output
    assert "{{" not in result.output
