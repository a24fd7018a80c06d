"""The macro engine's shortcuts are switched by name (``tavernbox.shortcuts.Shortcuts``), per call.

``PLAIN`` runs the reference path (no plans, every argument and body re-parsed, the
whole-document parser) and gives what the default path gives; a switch passed to one call
changes nothing for another call running at the same time in another thread.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.macros import PLAIN, MacroContext, Shortcuts, compile_macros, expand_macros
from tavernbox.macros import parser as parser_module
from tavernbox.shortcuts import DEFAULT

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "conformance" / "st-macros.jsonl"
CTX: dict[str, Any] = {"user": "Ash", "char": "Mira", "now": "2026-11-30T10:15:00Z", "seed": 2}


def _outcome(text: str, ctx: MacroContext, shortcuts: Shortcuts) -> Any:
    try:
        r = expand_macros(text, ctx, shortcuts=shortcuts)
    except TemplateError as exc:
        return ("error", exc.code, exc.message)
    return (r.text, r.variables, r.diagnostics, r.draws)


def test_the_presets() -> None:
    assert DEFAULT == Shortcuts(plans=True, reuse_parse=True, regions=True)
    assert PLAIN == Shortcuts(plans=False, reuse_parse=False, regions=False, wi_incremental=False,
                              wi_fast_pending=False, wi_settled_regex=False, wi_quick_digest=False,
                              wi_anchored_regex=False, wi_bulk_admit=False, wi_word_candidates=False,
                              wi_key_windows=False, wi_literal_windows=False, pt_bytecode=False)
    with pytest.raises(AttributeError):
        PLAIN.plans = True  # type: ignore[misc]  # a value, not a switchboard


@pytest.mark.skipif(not DATA.exists(), reason="shared/conformance is not beside the clone")
def test_the_plain_path_gives_what_the_default_path_gives_on_every_conformance_row() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        ctx = MacroContext.from_dict(
            {**CTX, "variables": {"local": row.get("vars") or {}, "global": row.get("globals") or {}}}
        )
        plain = _outcome(row["template"], ctx, PLAIN)
        for _ in range(3):  # the default path from its caches and plans
            assert _outcome(row["template"], ctx, DEFAULT) == plain, row["id"]


def test_plain_takes_no_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    regions: list[int] = []
    real = parser_module._region_prefix

    def counting(*args: Any) -> Any:
        regions.append(1)
        return real(*args)

    monkeypatch.setattr(parser_module, "_region_prefix", counting)
    text = "{{setvar::a::1}}{{getvar::a}} {{if {{getvar::a}}}}yes {{user}}{{/if}} {{reverse::ab}}"
    template = compile_macros(text)
    for _ in range(4):
        assert template.expand(CTX, shortcuts=PLAIN).text == "1 yes Ash ba"
    assert not template._levels  # no plan, no pairing kept
    assert not template._parse_cache
    regions.clear()
    assert expand_macros(text, CTX, shortcuts=PLAIN).text == "1 yes Ash ba"
    assert not regions  # the whole-document parser only
    assert expand_macros(text + " ", CTX).text == "1 yes Ash ba "
    assert regions


def test_a_switch_passed_to_one_call_leaves_a_concurrent_call_alone() -> None:
    text = "{{setvar::a::1}}{{getvar::a}} {{if {{getvar::a}}}}yes {{user}}{{/if}} {{roll::1d6}}"
    template = compile_macros(text)
    want = template.expand(CTX)
    start = threading.Barrier(2)
    seen: dict[str, list[Any]] = {"plain": [], "default": []}

    def render(label: str, shortcuts: Shortcuts) -> None:
        start.wait()
        for _ in range(200):
            r = template.expand(CTX, shortcuts=shortcuts)
            seen[label].append((r.text, json.dumps(r.variables), r.draws))

    threads = [threading.Thread(target=render, args=(label, s)) for label, s in (("plain", PLAIN), ("default", DEFAULT))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen["plain"]) == set(seen["default"]) == {(want.text, json.dumps(want.variables), want.draws)}
    assert template._top is not None  # the default renders ran from the plan meanwhile
