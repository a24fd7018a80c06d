"""``tavernbox import FILE... [--json] [--kind KIND]``: detect, validate and summarise asset files.

Each file is loaded on its own, so one broken file does not hide the report on the others. Exit status:
0 when every file loaded, 1 when any was rejected (the message names the file and the JSON path or
line:column), 2 on an internal error. No traceback ever reaches the user.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import click
from rich.markup import escape

from ..errors import TemplateError, bound_diagnostics
from .output import guarded, print_diagnostics, stderr, stream_json

__all__ = ["command", "import_one"]

_KIND_LABEL = {"card": "card", "world_book": "world book", "preset": "preset", "mvu": "MVU variables"}


#: Diagnostics printed per file without ``--json``; the rest are summarised by code (``--json`` lists all).
HUMAN_DIAGNOSTIC_CAP = 20


def import_one(path: str, kind: str | None = None) -> dict[str, Any]:
    """Load one file and return its report: ``{"file", "ok", ...summary}`` or ``{"file", "ok": False, "error"}``.

    ``-`` reads the asset from standard input (its bytes, so PNG cards and any encoding work as for a file).
    """
    from ..assets import load_asset

    try:
        if path == "-":
            asset = load_asset(sys.stdin.buffer.read(), kind=kind, name="stdin", summary_only=True)
        else:
            asset = load_asset(path, kind=kind, summary_only=True)
    except TemplateError as exc:
        return {"file": path, "ok": False, "error": exc.to_dict()}
    except Exception as exc:  # the boundary: report, never a traceback
        return {
            "file": path,
            "ok": False,
            "error": {"code": "INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}", "line": None, "column": None},
        }
    return {"file": path, "ok": True, **asset.summary(), "_asset": asset}


def _where(error: dict[str, Any]) -> str:
    if error.get("line") is not None:
        where = f"{error['line']}:{error['column']}"
        return f"{where} ({error['path']})" if error.get("path") else where
    return str(error.get("path") or "")


def _print_human(report: dict[str, Any]) -> None:
    path = report["file"]
    if not report["ok"]:
        err = report["error"]
        where = _where(err)
        label = f"{path}:{where}" if where else path
        stderr.print(f"{escape(label)}: [red]error[/] [bold]{err['code']}[/] {escape(err['message'])}")
        return
    counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report["counts"].items())
    name = f" {report['name']!r}" if report.get("name") else ""
    click.echo(f"{path}: {_KIND_LABEL.get(report['kind'], report['kind'])}{name} ({counts})")
    asset = report["_asset"]
    bounded = bound_diagnostics(asset.diagnostics)  # identical ones counted, as --json reports them
    print_diagnostics(bounded[:HUMAN_DIAGNOSTIC_CAP], label=path)
    left = bounded[HUMAN_DIAGNOSTIC_CAP:]
    if left:
        by_code = Counter(d.code for d in left)
        codes = ", ".join(f"{code} {count:,}" for code, count in by_code.most_common())
        stderr.print(f"{escape(path)}: ... {len(left):,} more diagnostics not shown ({escape(codes)}); "
                     "--json lists them")


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report for all files on stdout.")
@click.option(
    "--kind",
    type=click.Choice(["card", "world_book", "preset", "mvu"]),
    default=None,
    help="Treat every file as this kind instead of detecting it (e.g. an initvar named without 'initvar').",
)
def command(files: tuple[str, ...], as_json: bool, kind: str | None) -> None:
    """Detect each FILE's kind (card, world book, preset, MVU variables), validate it and summarise it.

    FILE ``-`` is standard input. Identical diagnostics (same code, same message shape) are shown three times, the
    last saying how many more were like it; without --json at most 20 a file are printed, then a count by code.
    """

    def body() -> int:
        reports = [import_one(f, kind) for f in files]
        if as_json:
            stream_json({"files": [{k: v for k, v in r.items() if k != "_asset"} for r in reports],
                         "ok": all(r["ok"] for r in reports)})
        else:
            for r in reports:
                _print_human(r)
        return 0 if all(r["ok"] for r in reports) else 1

    sys.exit(guarded(body, as_json=as_json))
