"""Differential test: tavernbox's Handlebars against the real handlebars 4.7.10 (the version
SillyTavern 1.18.0 bundles), run by tests/oracle/handlebars.js.

Both sides compile as SillyTavern compiles a story string ({noEscape: true}) in SillyTavern's
environment (its ``trim`` helper and its catch-all ``helperMissing``, mirrored on both sides). A
case agrees when both give the same text, or both fail the same way (at compile time, or while
rendering). The seeded part renders 1,000 fixed cases and 500 from a fresh seed on every run
(printed when one disagrees); the Hypothesis part draws 200 more through the same generator.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from handlebars_support import disagreement, oracle_render_many, require_oracle
from hypothesis import HealthCheck, Phase, given, settings

from tavernbox.testing.handlebars_templates import seeded_cases, story_string_cases

FIXED_SEED = 27
FIXED_CASES = 1000
FRESH_CASES = 500
FEATURES = ("{{#if", "{{else if", "{{else}}", "{{^}}", "{{#unless", "{{#each", "{{#with", "{{^", " as |", "{{!--",
            "{{!", "{{~", "~}}", "{{{", "{{&", "(lookup", "lookup ", "includeZero=", "../", "@index", "@key",
            "@root", "[a b]", "\\{{", "{{> ", "random::a::b", "trim", "\n  {{#")


def _check(cases: list[tuple[str, Any]], label: str) -> Counter[str]:
    answers = oracle_render_many(cases)
    outcomes: Counter[str] = Counter()
    failures = []
    for (template, data), theirs in zip(cases, answers):
        why = disagreement(template, data, theirs)
        if why is not None:
            failures.append(f"{label}\ntemplate={template!r}\ndata={data!r}\n{why}")
        outcomes["text" if "text" in theirs else theirs["error"]["kind"]] += 1
    assert not failures, f"{len(failures)} of {len(cases)} disagree; the first:\n" + failures[0]
    return outcomes


def test_a_thousand_seeded_story_strings_match_handlebars() -> None:
    cases = list(seeded_cases(FIXED_SEED, FIXED_CASES))
    outcomes = _check(cases, f"seed {FIXED_SEED}")
    print(f"\nhandlebars differential: {len(cases)} seeded templates, 100% equal: {dict(outcomes)}")
    # most cases must render (the generator aims at story strings, not at errors) ...
    assert outcomes["text"] >= len(cases) // 2
    # ... both kinds of failure are exercised ...
    assert outcomes["syntax"] and outcomes["runtime"]
    # ... and every construct the issue lists is drawn
    seen = {feature: sum(feature in template for template, _ in cases) for feature in FEATURES}
    assert all(seen.values()), seen


def test_story_strings_from_a_fresh_seed_match_handlebars() -> None:
    seed = random.SystemRandom().randrange(2**32)
    _check(list(seeded_cases(seed, FRESH_CASES)), f"fresh seed {seed} (rerun with seeded_cases({seed}, ...))")


def test_hypothesis_story_strings_match_handlebars() -> None:
    require_oracle()
    drawn: list[tuple[str, Any]] = []

    @settings(max_examples=200, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(story_string_cases())
    def collect(case: tuple[str, Any]) -> None:
        drawn.append(case)

    collect()
    _check(drawn, "hypothesis")
    assert len(drawn) >= 100


def _corpus_texts(corpora: Path) -> list[str]:
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if "{{" in value:
                texts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(corpora.rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8-sig")))
        except (UnicodeDecodeError, ValueError):
            continue
    return texts


def test_every_corpus_text_with_mustaches_matches_handlebars() -> None:
    # real card fields, prompts and world-book entries: SillyTavern macros that are not Handlebars
    # ({{setvar::x::1}} inside text, {{// comments}}) must fail or render exactly as Handlebars does
    corpora = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
    if not corpora.is_dir():
        pytest.skip("the shared corpora are not beside the repository")
    data = {"description": "D", "personality": "", "scenario": "S", "char": "C", "user": "U"}
    texts = _corpus_texts(corpora)
    outcomes = _check([(text, data) for text in texts], "corpus")
    assert len(texts) >= 500 and outcomes["text"] >= 100
