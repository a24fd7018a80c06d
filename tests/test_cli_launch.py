"""The console script's own ``--help`` (no click import) is click's help, at every width click uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
import pytest

from tavernbox.cli.launch import help_text, help_width
from tavernbox.cli.main import main


def _click_help(width: int) -> str:
    ctx = click.Context(main, info_name="tavernbox", terminal_width=width, **main.context_settings)
    return main.get_help(ctx)


@pytest.mark.parametrize("width", range(50, 79))
def test_the_fast_help_is_clicks_help(width: int) -> None:
    assert help_text("tavernbox", width) == _click_help(width)


@pytest.mark.parametrize("columns", ["", "10", "52", "79", "80", "81", "200", "0", "-3", "wide"])
def test_the_width_is_the_one_click_chooses(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    else:
        monkeypatch.delenv("COLUMNS", raising=False)
    assert help_width() == max(min(shutil.get_terminal_size().columns, 80) - 2, 50) == click.HelpFormatter().width


def test_a_long_summary_is_shortened_as_click_shortens_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.cli as cli

    long = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
    monkeypatch.setitem(cli.SUMMARIES, "macros", long)
    monkeypatch.setitem(cli.SUMMARIES, "lint", "Exactly. Then more words that are never shown at any width at all")
    for width in (50, 64, 78):
        fast = help_text("tavernbox", width)
        assert "One two three" in fast and "..." in fast
        ctx = click.Context(main, info_name="tavernbox", terminal_width=width, **main.context_settings)
        formatter = ctx.make_formatter()
        names = sorted(cli.available_commands())
        limit = formatter.width - 6 - max(len(n) for n in names)
        for name in names:
            shown = click.Command(name, help=cli.SUMMARIES[name]).get_short_help_str(limit)
            assert f"  {name}" in fast and shown in fast, (width, name, shown)


def _script(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = ("import sys; sys.argv = ['tavernbox', *sys.argv[1:]]\n"
            "from tavernbox.cli.launch import run\n"
            "try:\n    run()\nexcept SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
            "print(code, 'click' in sys.modules, file=sys.stderr)")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_the_console_script_prints_help_without_importing_click() -> None:
    for flag in ("--help", "-h"):
        done = _script([flag], {"COLUMNS": "64"})
        assert done.stderr.split()[-2:] == ["0", "False"]
        assert done.stdout == _click_help(62) + "\n"


def test_everything_else_goes_through_click() -> None:
    done = _script(["--version"])
    assert "tavernbox, version" in done.stdout and done.stderr.split()[-1] == "True"
    done = _script(["--no-such-option"])
    assert done.stderr.split()[-2:] == ["2", "True"] and "No such option" in done.stderr
    done = _script(["macros", "--help"])
    assert "Usage: tavernbox macros" in done.stdout
