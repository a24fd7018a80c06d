"""Golden cases: the macro facts of the research digest (section 3.2), one runner over JSON data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox.macros import expand_macros
from tavernbox.macros.variables import js_string



def cases(shared: Any = None) -> list[dict[str, Any]]:
    """The recorded facts of ``golden/macros_facts.json``."""
    facts: list[dict[str, Any]] = json.loads(
        (Path(__file__).parent / "golden" / "macros_facts.json").read_text(encoding="utf-8"))["cases"]
    return facts

BASE: dict[str, Any] = {
    "user": "User",
    "char": "Character",
    "persona": "PERSONA",
    "character": {
        "description": "DESC",
        "personality": "PERS",
        "scenario": "SCEN",
        "mes_example": "<START>\nEX",
        "first_mes": "Hi!",
        "alternate_greetings": ["Alt1", "Alt2"],
    },
    "chat_id_hash": 123456,
    "now": "2026-11-30T10:00:00Z",
}


@pytest.mark.cases("case", cases, ids=lambda c: c["id"])
def test_fact(case: dict[str, Any]) -> None:
    context = dict(BASE)
    context["variables"] = {"local": case.get("vars", {}), "global": case.get("globals", {})}
    if "original" in case:
        context["original"] = case["original"]
    if "chat" in case:
        context["chat"] = case["chat"]
    result = expand_macros(case["template"], context, dynamic=case.get("dynamic"))
    assert result.text == case["expected"]
    if "vars_after" in case:
        assert {k: js_string(v) for k, v in result.variables["local"].items()} == case["vars_after"]
