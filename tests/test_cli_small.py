"""The smaller things a new user hit (issue 28): lint's default severity, a file that is not a card, the newline
after ``macros``, ``activate --user``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tavernbox.assets import load_asset
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError

ROOT = Path(__file__).resolve().parents[1]


def _book_with_an_info_and_a_warning(tmp_path: Path) -> str:
    # two entries that activate each other (WI_RECURSION_CYCLE, info) and one without keys (a warning)
    path = tmp_path / "book.json"
    path.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "castle"},
                                            "1": {"uid": 1, "key": ["castle"], "content": "dragon"},
                                            "2": {"uid": 2, "key": [], "content": "never"}}}), encoding="utf-8")
    return str(path)


def test_lint_shows_warnings_and_errors_by_default_and_the_rest_on_request(tmp_path: Path) -> None:
    book = _book_with_an_info_and_a_warning(tmp_path)
    every = json.loads(CliRunner().invoke(main, ["lint", "--format", "json", book]).stdout)
    severities = {f["severity"] for f in every["findings"]}
    assert "info" in severities and "warning" in severities  # the machine formats stay complete
    plain = CliRunner().invoke(main, ["lint", book])
    all_of_them = CliRunner().invoke(main, ["lint", "--min-severity", "info", book])
    assert "warning WI_" in plain.output and "info WI_RECURSION_CYCLE" not in plain.output
    assert "1 finding(s) below warning not shown (--min-severity info shows them)" in plain.output
    assert "info WI_RECURSION_CYCLE" in all_of_them.output and "not shown" not in all_of_them.output


@pytest.mark.parametrize(("data", "what"), [(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x81\x8d", "a JPEG image"),
                                            (b"GIF89a\x01\x00", "a GIF image"),
                                            (b"\x00\x01\x02\x81\x8d\x8f binary", "binary data")])
def test_a_file_that_is_not_a_card_says_what_it_is(tmp_path: Path, data: bytes, what: str) -> None:
    for kind, code in ((None, "ASSET_KIND_UNKNOWN"), ("card", "ASSET_INVALID")):
        with pytest.raises(TemplateError) as info:
            load_asset(data, kind=kind)
        assert info.value.code == code and f"the file is {what}, not a PNG or JSON card" in info.value.message
    path = tmp_path / "card.jpg"
    path.write_bytes(data)
    result = CliRunner().invoke(main, ["assemble", "--preset", str(ROOT / "corpora" / "sample-preset.json"),
                                       "--card", str(path), "--chat", str(ROOT / "corpora" / "sample-chat.jsonl")])
    assert result.exit_code == 1 and f"the file is {what}, not a PNG or JSON card" in result.stderr
    assert "ENCODING" not in result.stderr


def test_a_utf16_text_with_its_bom_is_not_taken_for_binary() -> None:
    text = json.dumps({"spec": "chara_card_v2", "data": {"name": "Mira"}})
    try:
        load_asset(b"\xff\xfe" + text.encode("utf-16-le"), kind="card")
    except TemplateError as exc:  # text in an encoding the reader may refuse, but text: not "binary data"
        assert "binary data" not in exc.message


def test_macros_ends_its_output_with_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Hello {{user}}", encoding="utf-8")
    out = CliRunner().invoke(main, ["macros", str(path)], input="").stdout
    assert out == "Hello User\n"
    path.write_text("Line\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["macros", str(path)]).stdout == "Line\n"  # never a second one


def test_activate_takes_the_users_name(tmp_path: Path) -> None:
    book = tmp_path / "b.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["{{user}}"], "content": "About {{user}}.",
                                                  "enabled": True}}}), encoding="utf-8")
    chat = tmp_path / "c.json"
    chat.write_text(json.dumps(["Hello, I am Ash"]), encoding="utf-8")
    named = json.loads(CliRunner().invoke(main, ["activate", "--book", str(book), "--chat", str(chat), "--user", "Ash",
                                                 "--json"]).stdout)
    unnamed = json.loads(CliRunner().invoke(main, ["activate", "--book", str(book), "--chat", str(chat),
                                                   "--json"]).stdout)
    assert "About Ash." in json.dumps(named) and "About Ash." not in json.dumps(unnamed)


def test_an_unclosed_if_is_reported_as_unclosed(tmp_path: Path) -> None:
    from tavernbox import expand_macros
    from tavernbox.lint import lint_files

    result = expand_macros("a {{if 1}}the rest", {})
    assert result.text == "a {{if 1}}the rest"
    [d] = result.diagnostics
    assert d.code == "MACRO_UNCLOSED_SCOPE" and d.message == "{{if}} is not closed: its {{/if}} is missing; left as written"
    assert [x.code for x in expand_macros("{{if}} {{roll}}", {}).diagnostics] == ["MACRO_ARITY", "MACRO_ARITY"]
    template = tmp_path / "t.txt"
    template.write_text("a {{if 1}}the rest", encoding="utf-8")
    assert "MACRO_UNCLOSED_SCOPE" in [f.code for f in lint_files([str(template)]).findings]


def test_lint_counts_identical_findings_in_the_readable_report(tmp_path: Path) -> None:
    book = tmp_path / "many.json"
    book.write_text(json.dumps({"entries": {str(i): {"uid": i, "key": [], "content": f"c{i}"} for i in range(50)}}),
                    encoding="utf-8")
    plain = CliRunner().invoke(main, ["lint", str(book)])
    lines = [line for line in plain.output.splitlines() if "WI_ENTRY_UNREACHABLE" in line]
    assert len(lines) == 3 and lines[-1].endswith("(and 47 more like it)")
    assert "50 warnings" in plain.output  # the totals count every one
    every = json.loads(CliRunner().invoke(main, ["lint", "--format", "json", str(book)]).stdout)
    assert sum(f["code"] == "WI_ENTRY_UNREACHABLE" for f in every["findings"]) == 50
