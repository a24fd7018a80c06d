"""SillyTavern 1.18's own activation results on 640 generated scenarios (shared/conformance).

Every scenario runs in the data's fixed context (one global book, no card or persona text,
generation type ``normal``, contents not macro-expanded, whitespace-word tokens). Agreement must be
at least 99 %, and every disagreeing scenario must be listed in
``tests/data/worldinfo_conformance_deviations.json`` with the ``docs/DEVIATIONS.md`` entry that
explains it, so a new disagreement fails the suite even while the figure stays above the bar.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tavernbox.worldinfo import activate_world_info

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "conformance" / "st-worldinfo.jsonl"
DEVIATIONS_FILE = Path(__file__).parent / "data" / "worldinfo_conformance_deviations.json"
DEVIATIONS_DOC = ROOT / "docs" / "DEVIATIONS.md"

pytestmark = pytest.mark.needs_shared("conformance/st-worldinfo.jsonl")


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _result(row: dict[str, Any]) -> dict[str, Any]:
    settings = {**row["settings"], "max_context": row["max_context"]}
    activation = activate_world_info({"name": "conformance", "entries": row["entries"]}, row["chat"], settings)
    return {
        "before": activation.before,
        "after": activation.after,
        "at_depth": [
            {"depth": g.depth, "role": g.role, "entries": [item.content for item in g.entries]}
            for g in activation.by_position.at_depth
        ],
        "uids": sorted(activation.uids),
    }


def _deviation_headings() -> set[str]:
    text = DEVIATIONS_DOC.read_text(encoding="utf-8") if DEVIATIONS_DOC.exists() else ""
    section = text.split("## World info", 1)[1] if "## World info" in text else ""
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    return {m.strip() for m in re.findall(r"^### (.+)$", section, flags=re.M)}


def test_conformance_with_sillytavern_world_info() -> None:
    rows = _rows()
    assert len(rows) == 640
    explained: dict[str, str] = json.loads(DEVIATIONS_FILE.read_text(encoding="utf-8"))["deviations"]
    headings = _deviation_headings()
    for scenario, heading in explained.items():
        assert heading in headings, f"{scenario} points at a missing DEVIATIONS.md entry {heading!r}"
    disagreeing = [row["id"] for row in rows if _result(row) != row["expected"]]
    agreement = 1 - len(disagreeing) / len(rows)
    print(f"\nworld-info conformance: {len(rows) - len(disagreeing)}/{len(rows)} = {agreement:.2%}")
    unexplained = [scenario for scenario in disagreeing if scenario not in explained]
    assert not unexplained, f"disagreements without an explained deviation: {unexplained[:10]}"
    assert agreement >= 0.99


def test_conformance_runs_are_reproducible() -> None:
    row = _rows()[1]
    assert _result(row) == _result(row)
