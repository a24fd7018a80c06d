"""``tavernbox lint FILE... [--format rich|json|sarif] [--settings FILE]``: static checks of assets.

Lints presets, cards, world books, prompt-template resources, MVU files and single templates as
one asset set (cross-file checks: variables read and set, ``getwi``/``getpreset`` targets, card
overrides). The report goes to stdout: rich text by default, JSON (``--format json``) or SARIF
2.1.0 (``--format sarif``). Exit status: 1 when any error-level finding exists, 0 otherwise
(2 for a failure of tavernbox itself). Every code is documented in ``docs/LINT.md``.
"""

from __future__ import annotations

import sys

import click

from .output import echo_json, guarded, read_json_arg

__all__ = ["command"]


@click.command("lint")
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["rich", "json", "sarif"]), default="rich", show_default=True,
              help="Report format: readable text, JSON findings, or SARIF 2.1.0 for editors and code hosts.")
@click.option("--settings", "settings_file", help="SillyTavern world-info settings (JSON) for the book checks.")
@click.option("--min-severity", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Leave out findings below this severity (the exit status still counts errors only) [default: "
                   "warning for the readable report, info for json and sarif; --min-severity info shows the rest].")
def command(files: tuple[str, ...], fmt: str, settings_file: str | None, min_severity: str | None) -> None:
    """Check presets, cards, world books, templates and MVU files without rendering them."""

    def body() -> int:
        from rich.console import Console

        from ..lint import lint_files
        from ..lint.model import SEVERITY_RANK
        from ..lint.report import print_report, to_json, to_sarif
        from ..worldinfo.settings import WorldInfoSettings

        settings = None
        if settings_file is not None:
            settings = WorldInfoSettings.from_mapping(read_json_arg(settings_file, "settings"), path="$")
        report = lint_files(files, settings=settings)
        shown_from = min_severity or ("warning" if fmt == "rich" else "info")
        floor = SEVERITY_RANK[shown_from]
        failed = report.has_errors
        every = len(report.findings)
        report.findings = [f for f in report.findings if SEVERITY_RANK[f.severity] >= floor]
        hidden = every - len(report.findings)
        if fmt == "json":
            echo_json(to_json(report))
        elif fmt == "sarif":
            echo_json(to_sarif(report))
        else:
            print_report(report, Console(highlight=False, soft_wrap=True))
            if hidden:
                click.echo(f"{hidden} finding(s) below {shown_from} not shown (--min-severity info shows them)")
        return 1 if failed else 0

    sys.exit(guarded(body, as_json=fmt in ("json", "sarif")))
