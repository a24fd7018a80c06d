"""Conformance: every row of SillyTavern 1.18's own macro outputs (shared/conformance/st-macros.jsonl).

Each row is rendered in the fixed context of the data's README; the text and the variables
after the render (compared as ``String(value)``) must equal SillyTavern's. Agreement must be at
least 99.5%, and every disagreeing row must be listed, by its stable id, in
``tests/golden/macros_conformance_deviations.json`` with a pointer to an entry of
``docs/DEVIATIONS.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox.macros import MacroContext, expand_macros
from tavernbox.macros.variables import js_string

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "conformance" / "st-macros.jsonl"
DEVIATIONS = ROOT / "tests" / "golden" / "macros_conformance_deviations.json"
DOC = ROOT / "docs" / "DEVIATIONS.md"

#: The fixed context of shared/conformance/README.md.
CONTEXT: dict[str, Any] = {
    "user": "User",
    "char": "Character",
    "persona": "PERSONA",
    "character": {
        "description": "DESC",
        "personality": "PERS",
        "scenario": "SCEN",
        "mes_example": "<START>\nEX",
        "system_prompt": "SYS",
        "post_history_instructions": "JB",
        "character_version": "1.0",
        "creator_notes": "NOTES",
        "first_mes": "Hi!",
        "alternate_greetings": ["Alt1", "Alt2"],
    },
    "chat": [],
    "chat_id_hash": 123456,
}

pytestmark = pytest.mark.needs_shared("conformance/st-macros.jsonl")


def _strings(values: dict[str, Any] | None) -> dict[str, str]:
    return {k: js_string(v) for k, v in (values or {}).items()}


def _disagreements() -> tuple[int, dict[str, str]]:
    base = MacroContext.from_dict(CONTEXT)
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    bad: dict[str, str] = {}
    for row in rows:
        ctx = MacroContext.from_dict(
            {**CONTEXT, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        assert ctx.character == base.character
        result = expand_macros(row["template"], ctx)
        reasons = []
        if result.text != row["expected"]:
            reasons.append(f"text {result.text!r} != {row['expected']!r}")
        if _strings(result.variables["local"]) != _strings(row.get("vars_after")):
            reasons.append("local variables differ")
        if _strings(result.variables["global"]) != _strings(row.get("globals_after")):
            reasons.append("global variables differ")
        if reasons:
            bad[row["id"]] = "; ".join(reasons)
    return len(rows), bad


def test_sillytavern_conformance_rows_agree() -> None:
    total, bad = _disagreements()
    agreement = (total - len(bad)) / total
    print(f"\nmacro conformance: {total - len(bad)}/{total} rows agree ({agreement:.2%})")
    listed = json.loads(DEVIATIONS.read_text(encoding="utf-8"))["rows"]
    unexplained = {k: v for k, v in bad.items() if k not in listed}
    assert not unexplained, f"rows that differ without an explained deviation: {unexplained}"
    assert agreement >= 0.995


def test_every_listed_deviation_points_at_a_documented_entry() -> None:
    listed = json.loads(DEVIATIONS.read_text(encoding="utf-8"))["rows"]
    doc = DOC.read_text(encoding="utf-8")
    macros_section = doc.split("## Macros", 1)[1] if "## Macros" in doc else ""
    for row_id, entry in listed.items():
        assert entry.get("reason"), row_id
        heading = entry.get("deviation", "")
        assert heading and heading in macros_section, (row_id, heading)
