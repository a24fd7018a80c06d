"""``tavernbox macros``: text, --json, --jsonl batches with bad rows, --card, and no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tavernbox.cli.main import main

CONTEXT = {
    "user": "Ann",
    "char": "Bob",
    "character": {"first_mes": "Hi!", "alternate_greetings": ["Alt1"]},
    "chat_id_hash": 123456,
    "variables": {"local": {"x": "5"}, "global": {}},
    "seed": 1,
    "now": "2026-11-30T10:00:00Z",
}


def _files(tmp_path: Path, text: str = "Hello {{user}}, {{getvar::x}} {{nope}}") -> tuple[str, str]:
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps(CONTEXT), encoding="utf-8")
    src = tmp_path / "t.txt"
    src.write_text(text, encoding="utf-8")
    return str(ctx), str(src)


def test_text_mode_prints_the_expansion_and_diagnostics_on_stderr(tmp_path: Path) -> None:
    ctx, src = _files(tmp_path)
    result = CliRunner().invoke(main, ["macros", "--context", ctx, src])
    assert result.exit_code == 0
    assert result.stdout == "Hello Ann, 5 {{nope}}\n"  # the output ends with a newline (issue 28)
    assert "MACRO_UNKNOWN" in result.stderr and "t.txt:1:31" in result.stderr


def test_stdin_is_read_when_no_file_is_given(tmp_path: Path) -> None:
    ctx, _ = _files(tmp_path)
    result = CliRunner().invoke(main, ["macros", "--context", ctx], input="{{char}}!")
    assert result.stdout == "Bob!\n"


def test_json_mode_prints_the_whole_result(tmp_path: Path) -> None:
    ctx, src = _files(tmp_path, "{{setvar::y::1}}{{roll::2d6}}")
    first = json.loads(CliRunner().invoke(main, ["macros", "--context", ctx, "--json", "--seed", "4", src]).stdout)
    again = json.loads(CliRunner().invoke(main, ["macros", "--context", ctx, "--json", "--seed", "4", src]).stdout)
    assert first == again
    assert first["variables"]["local"] == {"x": "5", "y": "1"}
    assert first["draws"][0]["kind"] == "roll" and len(first["draws"][0]["rolls"]) == 2


def test_jsonl_mode_answers_every_row_in_order_and_survives_bad_rows(tmp_path: Path) -> None:
    ctx, _ = _files(tmp_path)
    rows = "\n".join(
        [
            json.dumps({"template": "{{.n++}}{{getvar::n}}", "vars": {"n": 1}}),
            "not json",
            json.dumps({"template": "{{setglobalvar::g::{{user}}}}{{x}}"}),
            json.dumps({"template": 5}),
            json.dumps({"template": "ok", "vars": []}),
            json.dumps({"template": "{{newline::10000}}" * 900}),
        ]
    )
    result = CliRunner().invoke(main, ["macros", "--context", ctx, "--jsonl"], input=rows + "\n")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 6
    assert lines[0] == {"text": "22", "vars": {"n": 2}, "globals": {}, "diagnostics": []}
    assert lines[1]["error"]["code"] == "INPUT_INVALID" and lines[1]["error"]["row"] == 2
    assert lines[2]["globals"] == {"g": "Ann"} and lines[2]["vars"] == {"x": "5"}
    assert lines[2]["diagnostics"][0]["code"] == "MACRO_UNKNOWN"
    assert lines[3]["error"]["code"] == "INPUT_INVALID"
    assert lines[4]["error"]["path"] == "$.vars"
    assert lines[5]["error"]["code"] == "MACRO_OUTPUT_LIMIT"
    assert "Traceback" not in result.output


def test_card_fills_the_character_fields_and_name(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(
        json.dumps({"spec": "chara_card_v2", "data": {"name": "Seraphina", "description": "A guardian of {{user}}."}}),
        encoding="utf-8",
    )
    src = tmp_path / "t.txt"
    src.write_text("{{char}}: {{description}}", encoding="utf-8")
    result = CliRunner().invoke(main, ["macros", "--card", str(card), src.as_posix()])
    assert result.stdout == "Seraphina: A guardian of User.\n"


def test_bad_inputs_fail_cleanly_with_a_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    src = tmp_path / "t.txt"
    src.write_text("x", encoding="utf-8")
    for args in (["--context", str(bad), str(src)], ["--context", str(tmp_path / "missing.json"), str(src)]):
        result = CliRunner().invoke(main, ["macros", *args])
        assert result.exit_code == 1
        assert "Traceback" not in result.output
        assert "ASSET_JSON" in result.stderr or "INPUT_INVALID" in result.stderr
    huge = tmp_path / "huge.txt"
    huge.write_text("a" * (2 * 1024 * 1024 + 1), encoding="utf-8")
    result = CliRunner().invoke(main, ["macros", str(huge)])
    assert result.exit_code == 1 and "MACRO_INPUT_LIMIT" in result.stderr


def test_json_trace_adds_the_range_of_each_macro(tmp_path: Path) -> None:
    ctx, src = _files(tmp_path)
    plain = json.loads(CliRunner().invoke(main, ["macros", "--context", ctx, "--json", src]).stdout)
    assert "segments" not in plain
    out = json.loads(CliRunner().invoke(main, ["macros", "--context", ctx, "--json", "--trace", src]).stdout)
    assert out["text"] == plain["text"] == "Hello Ann, 5 {{nope}}"
    found = [(out["text"][s["start"] : s["end"]], s["kind"], s["macro"]) for s in out["segments"]]
    assert found == [("Ann", "macro", "user"), ("5", "variable", "getvar"), ("{{nope}}", "macro", "nope")]
