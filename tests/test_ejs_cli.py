"""``tavernbox render``: single file, --vars JSON/YAML, --json, and the --jsonl batch contract."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tavernbox.cli.main import main


def run(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["render", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_render_file_with_yaml_and_json_vars(tmp_path: Path) -> None:
    template = tmp_path / "t.ejs"
    template.write_text("Hi <%= variables.name %>!\n<% for (const i of variables.items) { -%>\n- <%= i %>\n<% } -%>\n")
    (tmp_path / "v.yaml").write_text('name: "<Bob>"\nitems: [1, 2]\n')
    (tmp_path / "v.json").write_text('{"name": "Ann", "items": []}')
    code, out, _ = run([str(template), "--vars", str(tmp_path / "v.yaml")])
    assert (code, out) == (0, "Hi &lt;Bob&gt;!\n- 1\n- 2\n")
    code, out, _ = run([str(template), "--vars", str(tmp_path / "v.json"), "--json"])
    payload = json.loads(out)
    assert code == 0 and payload["text"] == "Hi Ann!\n" and payload["error"] is None
    assert payload["usage"]["output_bytes"] == len("Hi Ann!\n")


def test_render_error_is_reported_with_template_position(tmp_path: Path) -> None:
    template = tmp_path / "bad.ejs"
    template.write_text("a\n<%= nope %>\n")
    code, out, err = run([str(template)])
    assert code == 1 and out == ""
    assert f"{template}:2:5" in err and "TEMPLATE_EXECUTION_FAILED" in err and "Traceback" not in err
    code, out, _ = run([str(template), "--json"])
    assert code == 1
    assert json.loads(out)["error"] == {
        "code": "TEMPLATE_EXECUTION_FAILED", "message": "ReferenceError: nope is not defined", "line": 2, "column": 5,
    }


def test_bad_inputs_never_show_a_traceback(tmp_path: Path) -> None:
    code, _, err = run([str(tmp_path / "missing.ejs")])
    assert code == 1 and "INPUT_INVALID" in err and "Traceback" not in err
    template = tmp_path / "t.ejs"
    template.write_text("x")
    (tmp_path / "v.json").write_text("{nope")
    code, _, err = run([str(template), "--vars", str(tmp_path / "v.json")])
    assert code == 1 and "INPUT_INVALID" in err and "Traceback" not in err
    code, _, err = run([])
    assert code == 2 and "TEMPLATE_FILE" in err


def test_jsonl_batch_contract() -> None:
    lines = [
        {"template": "<%= 1 + 1 %>", "variables": {}},
        "not json",
        {"template": "x\n<% if ( %>"},
        {"template": "<%= variables.a %>", "variables": {"a": "<\ud800"}},
        {"nope": 1},
        {"template": "<%= \"unclosed"},
    ]
    stdin = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    code, out, _ = run(["--jsonl"], stdin)
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(answers) == len(lines)
    assert answers[0] == {"text": "2", "error": None}
    assert answers[1]["text"] is None and answers[1]["error"]["code"] == "INPUT_INVALID"
    assert answers[2]["error"]["code"] == "TEMPLATE_SYNTAX" and answers[2]["error"]["line"] == 2
    # the lone-surrogate rule (tavernbox.strict_json): refused with its JSON path, the batch goes on
    assert answers[3]["text"] is None and answers[3]["error"]["code"] == "TEXT_SURROGATE"
    assert answers[3]["error"]["path"] == "$.variables.a"
    assert answers[4]["error"]["code"] == "INPUT_INVALID"
    assert answers[5]["error"] == {
        "code": "TEMPLATE_SYNTAX", "message": 'Could not find matching close tag for "<%=".', "line": 1, "column": 1,
    }
    for answer in answers:
        assert set(answer) == {"text", "error"}
        if answer["error"] is not None:
            assert set(answer["error"]) - {"path"} == {"code", "message", "line", "column"}


def test_jsonl_takes_no_file(tmp_path: Path) -> None:
    code, out, _ = run(["--jsonl", str(tmp_path / "t.ejs")], "")
    error = json.loads(out)["error"]  # a batch reads JSON on stdout: the usage error comes there too
    assert code == 2 and error["code"] == "USAGE_INVALID" and "--jsonl" in error["message"]
