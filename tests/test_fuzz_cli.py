"""tavernbox fuzz: campaign mechanics (shrinking, saving, corpus mutation) and short clean runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from tavernbox.cli import fuzz
from tavernbox.cli.main import main


def _buggy_target() -> fuzz.FuzzTarget:
    """A stand-in engine that crashes on any text containing "!" after a "{"."""

    def check(text: str) -> fuzz.Problem | None:
        opened = text.find("{")
        if opened != -1 and "!" in text[opened:]:
            return fuzz.Problem("crash", "crash:ValueError:fake.py:1", "ValueError: bang")
        if len(text) > 30 and text.count("#") > 3:
            return fuzz.Problem("invariant", "invariant:fake", "too many #")
        return None

    return fuzz.FuzzTarget("macros", st.text(alphabet="ab{!# ", max_size=40), check, text_of=lambda t: t)


def test_campaign_finds_and_shrinks_each_distinct_bug(tmp_path: Path) -> None:
    target = _buggy_target()
    result = fuzz.run_campaign(target, seconds=1.5, seed=3)
    signatures = {f.problem.signature for f in result.findings}
    assert "crash:ValueError:fake.py:1" in signatures
    crash = next(f for f in result.findings if f.problem.kind == "crash")
    assert crash.example == "{!"  # shrunk to the minimal failing text
    assert len(signatures) == len(result.findings)  # each bug reported once
    path = fuzz.save_finding(crash, target, tmp_path)
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report == {
        "target": "macros", "kind": "crash", "signature": "crash:ValueError:fake.py:1",
        "message": "ValueError: bang", "input": "{!",
    }
    assert (tmp_path / (path.stem + ".input")).read_text(encoding="utf-8") == "{!"


def test_campaign_is_reproducible_for_a_seed() -> None:
    target = _buggy_target()
    # long enough for the first batch to finish even on a loaded machine
    first = fuzz.run_campaign(target, seconds=2.0, seed=11)
    second = fuzz.run_campaign(target, seconds=2.0, seed=11)
    assert [f.example for f in first.findings][:1] == [f.example for f in second.findings][:1]


def test_corpus_files_are_mutated(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text("hello {{user}} MARKER", encoding="utf-8")
    (corpus / "sub" / "b.txt").write_text("second file MARKER", encoding="utf-8")
    (corpus / "binary.bin").write_bytes(b"\xff\xfe\x00")
    texts = fuzz.load_corpus(corpus)
    assert texts == ["hello {{user}} MARKER", "second file MARKER"]

    seen: list[str] = []

    def check(text: str) -> fuzz.Problem | None:
        seen.append(text)
        return None

    target = fuzz.FuzzTarget("macros", st.just("generated"), check, text_of=lambda t: t)
    fuzz.run_campaign(target, seconds=0.5, seed=1, corpus=texts)
    mutated = [t for t in seen if "MARKER" in t or "hello" in t or "second" in t]
    assert mutated, "corpus texts were never drawn"
    assert any(t not in texts for t in mutated), "corpus texts were never mutated"


def test_missing_corpus_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fuzz", "--seconds", "0.2", "--corpus", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "INPUT_INVALID" in result.output


def test_unavailable_target_reports_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tavernbox.testing.ejs_strategies", None)  # import fails
    result = CliRunner().invoke(main, ["fuzz", "--target", "ejs", "--seconds", "0.2"])
    assert result.exit_code == 2
    assert "FUZZ_TARGET_UNAVAILABLE" in result.output


def test_findings_exit_1_and_are_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fuzz.TARGETS, "macros", _buggy_target)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["fuzz", "--target", "macros", "--seconds", "1", "--out", str(out),
                                       "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 1, result.output
    assert "findings; saved to" in result.output
    assert sorted(p.suffix for p in out.iterdir()).count(".json") >= 1


@pytest.mark.parametrize("target", ["macros", "ejs"])
def test_short_campaign_against_the_real_engine_is_clean(target: str, tmp_path: Path) -> None:
    out = tmp_path / "findings"
    result = CliRunner().invoke(main, ["fuzz", "--target", target, "--seconds", "2", "--seed", "1", "--out", str(out),
                                       "--cache-dir", str(tmp_path / "cache")])
    saved = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.json")} if out.exists() else {}
    assert result.exit_code == 0, (result.output, saved)
    assert ", 0 findings" in result.output
