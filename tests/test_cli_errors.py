"""Every command reports its errors in one place (issue 28).

Plain output: ``where: error CODE message`` on stderr and nothing on stdout, so ``tavernbox ... > out.json`` never
writes an error into the file. ``--json`` (``--format json`` for ``lint`` and ``cache-report``): the error's JSON
object on stdout, where the caller reads answers. Exit status 1 for an error in the input, 2 for a command line the
command does not take (``USAGE_INVALID``), in both modes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tavernbox.cli.main import main
from tavernbox.errors import CODES

ROOT = Path(__file__).resolve().parents[1]
BOOK = str(ROOT / "corpora" / "sample-book.json")

#: command -> (its arguments with a missing input file, the flags of its JSON mode, the expected code, where)
FAILURES = {
    "assemble": (["--request", "{missing}"], ["--json"], "REQUEST_INVALID", "{missing}"),
    "replay": (["{missing}"], ["--json"], "INPUT_INVALID", "{missing}"),
    "render": (["{missing}"], ["--json"], "INPUT_INVALID", "{missing}"),
    "macros": (["--context", "{missing}"], ["--json"], "INPUT_INVALID", "macros"),
    "import": (["{missing}"], ["--json"], "INPUT_INVALID", "{missing}"),
    "activate": (["--book", "{missing}", "--chat", "{missing}"], ["--json"], "INPUT_INVALID", ""),
    "lint": (["--settings", "{missing}", BOOK], ["--format", "json"], "INPUT_INVALID", ""),
    "cache-report": (["--request", "{missing}"], ["--format", "json"], "REQUEST_INVALID", "{missing}"),
    "inspect": (["{missing}"], ["--json"], "INPUT_INVALID", "{missing}"),
}


def _fill(values: list[str], missing: str) -> list[str]:
    return [v.replace("{missing}", missing) for v in values]


@pytest.mark.parametrize("command", sorted(FAILURES))
def test_plain_output_puts_the_error_on_stderr_alone(command: str, tmp_path: Path) -> None:
    args, _, code, where = FAILURES[command]
    missing = str(tmp_path / "missing.json")
    result = CliRunner().invoke(main, [command, *_fill(args, missing)])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    prefix = f"{where.replace('{missing}', missing)}: " if where else ""
    assert first.startswith(f"{prefix}error {code} "), first
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", sorted(FAILURES))
def test_json_output_puts_the_error_object_on_stdout(command: str, tmp_path: Path) -> None:
    args, json_flags, code, _ = FAILURES[command]
    missing = str(tmp_path / "missing.json")
    result = CliRunner().invoke(main, [command, *_fill(args, missing), *json_flags])
    assert result.exit_code == 1, result.output
    answer = json.loads(result.stdout)
    error = answer["files"][0]["error"] if command == "import" else answer["error"]  # import reports per file
    assert error["code"] == code and missing in error["message"]
    assert "error" not in result.stderr


@pytest.mark.parametrize("command", sorted(FAILURES))
def test_a_usage_error_exits_2_in_both_modes(command: str) -> None:
    json_flags = FAILURES[command][1]
    plain = CliRunner().invoke(main, [command, "--no-such-option"], prog_name="tavernbox")
    assert plain.exit_code == 2 and plain.stdout == ""
    assert f"tavernbox {command}: error USAGE_INVALID No such option" in plain.stderr
    assert f"Usage: tavernbox {command}" in plain.stderr  # the command's usage line comes first
    as_json = CliRunner().invoke(main, [command, "--no-such-option", *json_flags], prog_name="tavernbox")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout) == {"error": {"code": "USAGE_INVALID", "message": "No such option '--no-such-option'.",
                                                    "where": f"tavernbox {command}"}}


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["no-such-command"], prog_name="tavernbox")
    assert result.exit_code == 2 and result.stdout == ""
    assert "tavernbox: error USAGE_INVALID No such command 'no-such-command'." in result.stderr


def test_the_usage_code_is_catalogued() -> None:
    assert "USAGE_INVALID" in CODES


def test_assemble_messages_redirected_to_a_file_gets_no_error(tmp_path: Path) -> None:
    """The issue's case: ``assemble ... --messages > out.json`` must not write the error into the file."""
    result = CliRunner().invoke(main, ["assemble", "--preset", str(tmp_path / "nope.json"), "--chat",
                                       str(ROOT / "corpora" / "sample-chat.jsonl"), "--messages"])
    assert result.exit_code == 1 and result.stdout == "" and "error REQUEST_INVALID" in result.stderr
