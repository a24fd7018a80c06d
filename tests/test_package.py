"""The package skeleton: one import name, grammars shipped as data, the CLI lists its commands."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import tavernbox
from tavernbox import Span, TemplateError
from tavernbox.spans import caret_snippet, line_col, utf16_offset


def test_sandbox_is_a_subpackage_of_the_one_import_name() -> None:
    import tavernbox.sandbox

    assert tavernbox.sandbox.__name__ == "tavernbox.sandbox"


def test_grammars_are_package_data() -> None:
    names = {p.name for p in resources.files("tavernbox.grammars").iterdir()}
    assert "macros.lark" in names


def test_template_error_computes_line_and_column_from_offsets() -> None:
    source = "first line\nsecond {{bad}} line"
    start = source.index("{{bad}}")
    err = TemplateError("boom", code="MACRO_UNKNOWN", span=Span(start, start + 7), source=source)
    assert (err.line, err.column) == (2, 8)
    assert str(err) == "MACRO_UNKNOWN at 2:8: boom"
    assert err.snippet() == "2 | second {{bad}} line\n           ^^^^^^^"
    assert err.to_dict() == {"code": "MACRO_UNKNOWN", "message": "boom", "line": 2, "column": 8}


def test_line_col_and_utf16_offsets() -> None:
    assert line_col("a\nbc", 3) == (2, 2)
    assert utf16_offset("😀x", 1) == 2


def test_caret_snippet_windows_long_lines() -> None:
    source = "x" * 1000 + "ERR" + "y" * 1000
    snippet = caret_snippet(source, Span(1000, 1003))
    first, caret = snippet.split("\n")
    assert len(first) < 200 and "ERR" in first
    assert first[caret.index("^")] == "E"


def test_cli_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tavernbox.cli.main", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "Usage:" in out


def test_unknown_public_name_raises_attribute_error() -> None:
    try:
        tavernbox.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_cli_closed_pipe_is_not_an_internal_error(tmp_path) -> None:
    """`tavernbox macros --jsonl < rows | head -c 16`: the reader leaves early; the CLI exits 141, quietly.

    Run in a child process: the boundary redirects the real stdout descriptor, which must never
    touch the test runner's own captured streams. The JSON-lines mode writes and flushes a line per
    row, so a reader that closes after the first bytes is seen by a later write.
    """
    import json

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"template": f"{{{{user}}}} row {i}"}) + "\n" for i in range(20_000)))
    with rows.open("rb") as stdin:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tavernbox.cli.main", "macros", "--jsonl"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        head = proc.stdout.read(16)
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace")
        code = proc.wait(timeout=120)
    assert head.startswith(b'{"text": "User')
    assert code == 141, err
    assert "Traceback" not in err and "INTERNAL_ERROR" not in err and "Exception ignored" not in err
