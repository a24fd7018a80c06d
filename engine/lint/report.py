"""Lint report formats: a readable rich report, JSON, and SARIF 2.1.0.

SARIF is what editors and code hosts read to show findings inline: each result carries the rule
(the lint code, with its catalogue text), a level, the file's region when it is known (a finding
inside a JSON string is mapped through the string's escapes to the file's line and column,
counted in Unicode code points: ``columnKind: unicodeCodePoints``), the JSON path as a logical
location, and the prompt-relative line:column and the suggestion as properties.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape

from .. import __version__
from .codes import LINT_CODES
from .model import LintReport

__all__ = ["SARIF_SCHEMA_URI", "print_report", "to_json", "to_sarif"]

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def to_json(report: LintReport) -> dict[str, Any]:
    """``--format json``: ``{"files", "counts", "findings": [{code, severity, file, path, line, ...}]}``."""
    return report.to_dict()


def _uri(file: str) -> str:
    path = Path(file)
    if path.is_absolute():
        return path.as_uri()
    return quote(path.as_posix(), safe="/")


def to_sarif(report: LintReport) -> dict[str, Any]:
    """``--format sarif``: one SARIF 2.1.0 log with one run (validated against the schema in tests)."""
    codes = sorted(LINT_CODES)
    rule_index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code,
            "name": "".join(part.capitalize() for part in code.split("_")),
            "shortDescription": {"text": LINT_CODES[code].meaning},
            "help": {"text": f"{LINT_CODES[code].meaning} (docs/LINT.md)"},
            "defaultConfiguration": {"level": _LEVEL[LINT_CODES[code].severity]},
            "properties": {"family": LINT_CODES[code].family},
        }
        for code in codes
    ]
    artifacts = {file: i for i, file in enumerate(report.files)}
    results = []
    for f in report.findings:
        artifact: dict[str, Any] = {"uri": _uri(f.file)}
        if f.file in artifacts:
            artifact["index"] = artifacts[f.file]
        physical: dict[str, Any] = {"artifactLocation": artifact}
        if f.file_line is not None:
            physical["region"] = {"startLine": f.file_line, "startColumn": f.file_column or 1}
        location: dict[str, Any] = {"physicalLocation": physical}
        if f.path:
            location["logicalLocations"] = [{"fullyQualifiedName": f.path, "kind": "member"}]
        text = f.message if not f.suggestion else f"{f.message} ({f.suggestion})"
        properties: dict[str, Any] = {"severity": f.severity}
        if f.path:
            properties["jsonPath"] = f.path
        if f.line is not None:
            properties["promptLine"], properties["promptColumn"] = f.line, f.column
        if f.suggestion:
            properties["suggestion"] = f.suggestion
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": _LEVEL[f.severity],
            "message": {"text": text},
            "locations": [location],
            "properties": properties,
        }
        if f.code in rule_index:
            result["ruleIndex"] = rule_index[f.code]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "tavernbox lint", "version": __version__, "rules": rules}},
                "artifacts": [{"location": {"uri": _uri(file)}} for file in report.files],
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def print_report(report: LintReport, console: Console) -> None:
    """The readable report: one block per file, one line per finding, then the totals.

    Identical findings of a file (same code, same message shape) are shown three times, the third saying how many
    more were like it (the json and sarif formats list every one)."""
    from collections import Counter

    from ..errors import SHOWN_PER_SHAPE, message_shape

    def kind(f: Any) -> tuple[str, str, str]:
        return (f.file, f.code, message_shape(f.message))

    totals = Counter(kind(f) for f in report.findings)
    shown: Counter[tuple[str, str, str]] = Counter()
    current = None
    for f in report.findings:
        key = kind(f)
        shown[key] += 1
        if shown[key] > SHOWN_PER_SHAPE:
            continue
        more = totals[key] - SHOWN_PER_SHAPE if shown[key] == SHOWN_PER_SHAPE else 0
        if f.file != current:
            current = f.file
            console.print(f"\n[bold underline]{escape(f.file)}[/]")
        where = f.path or ""
        if f.line is not None:
            where = f"{where}:{f.line}:{f.column}" if where else f"{f.line}:{f.column}"
        colour = _COLOUR[f.severity]
        tail = f" (and {more:,} more like it)" if more > 0 else ""
        console.print(f"  {escape(where)}  [{colour}]{f.severity}[/] [bold]{f.code}[/] {escape(f.message)}{tail}")
        if f.suggestion:
            console.print(f"      [dim]hint: {escape(f.suggestion)}[/]")
    counts = report.counts()
    summary = ", ".join(f"{n} {sev}{'s' if n != 1 else ''}" for sev, n in counts.items())
    console.print(f"\n{len(report.files)} file{'s' if len(report.files) != 1 else ''} linted: {summary}")
