"""``tavernbox lint``: formats, exit status, positions in the prompt and in the file, SARIF validity,
the real corpus, and the limits that bound hostile input."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from tavernbox.cli.lint import command
from tavernbox.lint import LINT_CODES, lint_files
from tavernbox.lint import worldinfo as wi_lint
from tavernbox.lint.locate import JsonLocator
from tavernbox.lint.report import to_sarif
from test_assets_cards import png_card

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
CORPUS = ROOT.parent / "shared" / "corpora"
MANIFEST = CORPUS / "MANIFEST.tsv"


def write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return str(path)


def validate_sarif(doc: dict[str, Any]) -> None:
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8")), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_error_exits_1_and_rich_report_names_path_line_column(tmp_path: Path) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["/a(/"], "content": "line one\nHi {{usr}}"}}}
    result = CliRunner().invoke(command, [write(tmp_path, "lore.json", book)])
    assert result.exit_code == 1
    assert "$.entries.0.content:2:4" in result.output
    assert "MACRO_UNKNOWN" in result.output and "did you mean {{user}}?" in result.output
    assert "WI_REGEX_INVALID" in result.output
    assert "1 file linted: 1 error" in result.output


def test_warnings_only_exit_0(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [write(tmp_path, "t.txt", "Hello {{usr}}")])
    assert result.exit_code == 0, result.output
    assert "MACRO_UNKNOWN" in result.output


def test_min_severity_hides_but_still_fails_on_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "t.txt", "<USER> {{if {{char}}}}x")
    result = CliRunner().invoke(command, [path, "--format", "json", "--min-severity", "error"])
    assert result.exit_code == 1
    codes = [f["code"] for f in json.loads(result.output)["findings"]]
    assert codes == ["MACRO_UNCLOSED_SCOPE"]


def test_json_findings_have_the_documented_fields(tmp_path: Path) -> None:
    preset = {"prompts": [{"identifier": "main", "content": "Be {{char}}.\n{{roll:1d6}}"},
                          {"identifier": "chatHistory", "marker": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main"}, {"identifier": "chatHistory"}]}]}
    result = CliRunner().invoke(command, [write(tmp_path, "p.json", preset), "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["counts"] == {"error": 0, "warning": 0, "info": 1}
    (finding,) = out["findings"]
    assert set(finding) == {"code", "severity", "file", "path", "line", "column", "message", "suggestion",
                            "file_line", "file_column"}
    assert (finding["code"], finding["path"], finding["line"], finding["column"]) == (
        "MACRO_LEGACY_SYNTAX", "$.prompts[0].content", 2, 1)
    assert finding["suggestion"]


def test_file_position_maps_through_json_escapes(tmp_path: Path) -> None:
    # one line of JSON whose prompt holds escapes (\n, \", \u00e9, a surrogate pair) before the finding
    card = {"spec": "chara_card_v2", "data": {"name": "A", "description": 'x\n"q" \u00e9 \U0001F600 {{usr}}'}}
    text = json.dumps(card, ensure_ascii=True)
    path = write(tmp_path, "c.json", text)
    (finding,) = [f for f in lint_files([path]).findings if f.code == "MACRO_UNKNOWN"]
    assert (finding.line, finding.column) == (2, 9)  # inside the prompt: after the \n, in characters
    assert finding.file_line == 1
    assert text[finding.file_column - 1 :].startswith("{{usr}}")


def test_template_file_positions_are_the_files_own(tmp_path: Path) -> None:
    path = write(tmp_path, "t.md", "# notes\n\n<% if (a { %>x<% } %>\n")
    (finding,) = lint_files([path]).findings
    assert finding.code == "TEMPLATE_SYNTAX"
    assert (finding.line, finding.column) == (finding.file_line, finding.file_column) == (3, 10)
    assert finding.path is None


def test_png_card_is_linted(tmp_path: Path) -> None:
    card = {"spec": "chara_card_v2", "data": {"name": "P", "description": "{{usr}}"}}
    findings = lint_files([write(tmp_path, "p.png", png_card({"chara": card}))]).findings
    assert [(f.code, f.path) for f in findings] == [("MACRO_UNKNOWN", "$.data.description")]


def test_missing_file_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [str(tmp_path / "nope.json"), "--format", "json"])
    assert result.exit_code == 1
    (finding,) = json.loads(result.output)["findings"]
    assert finding["code"] == "FILE_UNREADABLE" and "INPUT_INVALID" in finding["message"]


def test_bad_settings_file_is_a_clean_error(tmp_path: Path) -> None:
    settings = write(tmp_path, "s.json", {"world_info_recursive": "maybe"})
    result = CliRunner().invoke(command, [write(tmp_path, "t.txt", "x"), "--settings", settings])
    assert result.exit_code == 1
    assert "INPUT_INVALID" in result.output and "Traceback" not in result.output


def test_sarif_is_valid_and_carries_regions_and_paths(tmp_path: Path) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["/a(/"], "content": "Hi {{usr}}"}}}
    files = [write(tmp_path, "lore book.json", book), write(tmp_path, "t.txt", "<% x( %>")]
    result = CliRunner().invoke(command, [*files, "--format", "sarif"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    validate_sarif(doc)
    run = doc["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == set(LINT_CODES)
    by_rule = {r["ruleId"]: r for r in run["results"]}
    unknown = by_rule["MACRO_UNKNOWN"]
    assert unknown["level"] == "warning"
    location = unknown["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"].endswith("lore%20book.json")
    assert location["physicalLocation"]["region"] == {"startLine": 1, "startColumn": json.dumps(book).index("{{usr}}") + 1}
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "$.entries.0.content"
    assert by_rule["TEMPLATE_SYNTAX"]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1


def corpus_files() -> list[Path]:
    if not MANIFEST.exists():
        return []
    with MANIFEST.open(encoding="utf-8", newline="") as fh:
        return [CORPUS / row["category"] / row["file"] for row in csv.DictReader(fh, delimiter="\t")]


@pytest.mark.needs_shared("corpora/MANIFEST.tsv")
def test_the_74_corpus_files_lint_without_a_crash_and_give_valid_sarif() -> None:
    files = corpus_files()
    assert len(files) == 74
    report = lint_files(files)
    assert report.files == [str(f) for f in files]
    assert all(f.code in LINT_CODES for f in report.findings)
    assert all(f.severity == LINT_CODES[f.code].severity for f in report.findings if f.code != "FILE_UNREADABLE")
    # the one JSON Schema in the corpus is not an asset; everything else is read
    assert [Path(f.file).name for f in report.findings if f.code == "FILE_UNREADABLE"] == ["stagedog-example-schema.json"]
    counts = report.counts()
    assert sum(counts.values()) == len(report.findings) > 0
    validate_sarif(to_sarif(report))
    json.dumps(report.to_dict())


# ---- limits: each one tripped ---------------------------------------------------------------

def test_json_locator_depth_limit_leaves_deep_strings_unlocated() -> None:
    deep = "[" * 600 + '"x"' + "]" * 600
    assert JsonLocator(deep).strings == {}
    shallow = "[" * 10 + '"x"' + "]" * 10
    assert JsonLocator(shallow).strings == {"$" + "[0]" * 10: (10, 13)}


def _cycle_book() -> dict[str, Any]:
    return {"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "castle"},
                        "1": {"uid": 1, "key": ["castle"], "content": "dragon"},
                        "2": {"uid": 2, "key": ["/kn[i]ght/"], "content": "the tower"},
                        "3": {"uid": 3, "key": ["tower"], "content": "a knight"},
                        "4": {"uid": 4, "key": ["x"], "content": "tower"}}}


def test_recursion_graph_entry_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "lore.json", _cycle_book())
    assert "WI_RECURSION_CYCLE" in [f.code for f in lint_files([path]).findings]
    monkeypatch.setattr(wi_lint, "_MAX_GRAPH_ENTRIES", 4)
    assert "WI_RECURSION_CYCLE" not in [f.code for f in lint_files([path]).findings]


def test_recursion_graph_regex_search_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = _cycle_book()
    for uid in ("0", "1"):
        book["entries"][uid]["preventRecursion"] = True  # leave only the knight/tower cycle, via a regex key
    path = write(tmp_path, "lore.json", book)
    cycles = [f for f in lint_files([path]).findings if f.code == "WI_RECURSION_CYCLE"]
    assert len(cycles) == 1 and cycles[0].message.startswith("2 entries") and cycles[0].path == "$.entries.2"
    monkeypatch.setattr(wi_lint, "_MAX_REGEX_SEARCHES", 0)
    assert "WI_RECURSION_CYCLE" not in [f.code for f in lint_files([path]).findings]


def test_initvar_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tavernbox.lint import mvu

    book = {"entries": {"0": {"uid": 0, "key": ["a"], "comment": "[InitVar]", "content": "gold: 5\n"},
                        "1": {"uid": 1, "key": ["b"], "content": "{{getvar::gold}}"}}}
    path = write(tmp_path, "lore.json", book)
    assert "VARIABLE_NEVER_SET" not in [f.code for f in lint_files([path]).findings]
    monkeypatch.setattr(mvu, "_MAX_INITVAR_CHARS", 4)
    assert "VARIABLE_NEVER_SET" in [f.code for f in lint_files([path]).findings]


def test_template_that_escapes_its_function_is_stopped_by_the_compile_budget(tmp_path: Path) -> None:
    # closes the generated function and loops at top level: the QuickJS budget interrupts it
    path = write(tmp_path, "t.txt", "<% } } finally {} } }); while (true) {} (async function () { { try { with ({}) { %>")
    findings = lint_files([path]).findings
    assert "TEMPLATE_SYNTAX" not in [f.code for f in findings]


def test_hostile_macro_nesting_is_reported_not_crashed(tmp_path: Path) -> None:
    text = "{{noop::" * 62 + "{{if a}}" * 95 + "x" + "{{/if}}" * 95 + "}}" * 62 + "{{if a}}" * 300
    findings = lint_files([write(tmp_path, "t.txt", text)]).findings
    assert {"MACRO_ARITY", "MACRO_UNCLOSED_SCOPE"} <= {f.code for f in findings}


def test_macros_are_substituted_before_the_javascript_check(tmp_path: Path) -> None:
    # SillyTavern expands macros before ST-Prompt-Template compiles the prompt's template
    ok = "<% let hp = {{getvar::hp}} + 1;\nEvStat.<user>.mood = 'calm'; %>"
    assert "TEMPLATE_SYNTAX" not in [f.code for f in lint_files([write(tmp_path, "ok.txt", ok)]).findings]
    bad = "<% let hp = {{getvar::hp}} +;\n%>"
    (finding,) = [f for f in lint_files([write(tmp_path, "bad.txt", bad)]).findings if f.code == "TEMPLATE_SYNTAX"]
    assert (finding.line, finding.column) == (1, 29)


def test_too_many_tags_is_too_large_not_a_syntax_error(tmp_path: Path) -> None:
    codes = [f.code for f in lint_files([write(tmp_path, "t.txt", "<%= 1 %>" * 4097)]).findings]
    assert codes == ["TEMPLATE_TOO_LARGE"]


def test_preset_checks_follow_sillytaverns_prompt_collection(tmp_path: Path) -> None:
    prompts = [{"identifier": "main", "content": "First main."}, {"identifier": "main", "content": ""},
               {"identifier": "chatHistory", "marker": True}]
    # an order naming a default prompt the preset lacks is not dangling (SillyTavern adds the prompt)
    order = [{"identifier": "main"}, {"identifier": "enhanceDefinitions", "enabled": False},
             {"identifier": "chatHistory"}]
    preset = {"prompts": prompts, "prompt_order": [{"character_id": 100001, "order": order}]}
    card = {"spec": "chara_card_v2", "data": {"name": "A", "system_prompt": "Card main."}}
    findings = lint_files([write(tmp_path, "p.json", preset), write(tmp_path, "c.json", card)]).findings
    codes = [(f.code, f.path) for f in findings]
    assert ("PRESET_DUPLICATE_IDENTIFIER", "$.prompts[1].identifier") in codes
    assert "PRESET_ORDER_UNKNOWN_PROMPT" not in [c for c, _ in codes]
    # the repeated identifier resolves to its first prompt: that one has text, so the card replaces it
    assert ("PRESET_OVERRIDE_REPLACED", "$.prompts[0].content") in codes
    # only a character-100000 bucket without chatHistory: SillyTavern's default order applies, which sends the chat
    legacy = {"prompts": prompts[:1], "prompt_order": [{"character_id": 100000, "order": [{"identifier": "main"}]}]}
    assert "PRESET_MARKER_MISSING" not in [f.code for f in lint_files([write(tmp_path, "l.json", legacy)]).findings]
