"""Many requests in one process (issue 11's answer): ``tavernbox.assemble_requests`` and ``assemble --jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tavernbox
from tavernbox import TemplateError, assemble_request, assemble_requests
from tavernbox.cli.main import main

CORPORA = Path(__file__).resolve().parents[1] / "corpora"


def _sample(**options: Any) -> dict[str, Any]:
    request = json.loads((CORPORA / "sample-request.json").read_text(encoding="utf-8"))
    if options:
        request["options"] = {**request.get("options", {}), **options}
    return request


def test_assemble_requests_answers_each_in_order_and_goes_on_past_a_bad_one() -> None:
    assert "assemble_requests" in tavernbox.__all__
    requests = [_sample(), {"preset": "nope.json", "chat": "sample-chat.jsonl"}, _sample(target="claude")]
    answers = list(assemble_requests(iter(requests), base_dir=CORPORA))
    assert len(answers) == 3
    first, bad, claude = answers
    assert isinstance(bad, TemplateError) and bad.code == "REQUEST_INVALID" and bad.path == "$.preset"
    assert not isinstance(first, TemplateError) and not isinstance(claude, TemplateError)
    assert first.messages == assemble_request(_sample(), base_dir=CORPORA).messages
    assert set(claude.body) == {"system", "messages"}


def test_the_requests_are_read_lazily() -> None:
    seen: list[int] = []

    def requests() -> Any:
        for i in range(3):
            seen.append(i)
            yield _sample()

    answers = assemble_requests(requests(), base_dir=CORPORA)
    next(answers)
    assert seen == [0]


def _lines(*rows: Any) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def test_jsonl_one_answer_a_line_with_errors_in_place(tmp_path: Path) -> None:
    batch = tmp_path / "batch.jsonl"
    batch.write_text(_lines(_sample(), "{not json", [1], _sample(target="google")), encoding="utf-8")
    # relative asset paths resolve against the file's folder: here, the corpora copied beside it
    for name in ("sample-preset.json", "sample-card.json", "sample-book.json", "sample-chat.jsonl"):
        (tmp_path / name).write_bytes((CORPORA / name).read_bytes())
    result = CliRunner().invoke(main, ["assemble", "--jsonl", str(batch)])
    assert result.exit_code == 1  # a line failed; the others were answered
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == 4
    assert answers[0]["messages"] == assemble_request(_sample(), base_dir=CORPORA).messages
    assert "warnings" in answers[0] and "body" not in answers[0]
    assert answers[1]["error"]["code"] == "INPUT_INVALID" and answers[1]["error"]["line"] == 2
    assert answers[2]["error"]["code"] == "REQUEST_INVALID"
    assert "contents" in answers[3]["body"]


def test_jsonl_from_stdin_with_flags_filling_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CORPORA)
    result = CliRunner().invoke(main, ["assemble", "--jsonl", "-", "--user", "Zed"], input=_lines(_sample(), _sample()))
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == 2 and all("Zed" in a["messages"][0]["content"] for a in answers)
    whole = CliRunner().invoke(main, ["assemble", "--jsonl", "-", "--json"], input=_lines(_sample()))
    assert {"messages", "provenance", "record"} <= set(json.loads(whole.stdout))


def test_jsonl_refuses_what_it_cannot_combine_with() -> None:
    result = CliRunner().invoke(main, ["assemble", "--jsonl", "-", "--messages"], input="")
    assert result.exit_code == 2 and json.loads(result.stdout)["error"]["code"] == "USAGE_INVALID"
