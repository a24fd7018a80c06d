"""Issue 14: ``tavernbox fuzz`` at a useful rate, on every core, with progress and its own cache folder.

The macro target draws its inputs from :class:`~tavernbox.testing.macro_generator.MacroTextGenerator`
(Hypothesis spent 5-50 ms drawing each one), re-renders one input in eight for the determinism
check, and shrinks findings by delta debugging. ``benchmarks/bench_fuzz.py`` measures the rate
(target: 2,000 macro inputs per CPU second on one core); the bound here is 5x looser.
"""

from __future__ import annotations

import io
import os
import random
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from tavernbox.cli import fuzz
from tavernbox.cli.main import main
from tavernbox.macros import expand_macros
from tavernbox.testing.macro_generator import MacroTextGenerator
from macro_support import NO_REUSE


def test_the_generator_is_seeded_and_covers_the_grammar() -> None:
    first = [MacroTextGenerator(random.Random(4)).text() for _ in range(3)]
    again = [MacroTextGenerator(random.Random(4)).text() for _ in range(3)]
    assert first == again
    gen = MacroTextGenerator(random.Random(1))
    texts = "".join(gen.text() for _ in range(400))
    for piece in ("{{if ", "{{else}}", "{{/", "::", "{{.", "{{$", "{{//", "<USER>", "{{#"):
        assert piece in texts, piece


def test_the_macro_target_checks_at_least_400_inputs_per_cpu_second(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fast path alone (the Hypothesis batches' share is measured by bench_fuzz.py)
    monkeypatch.setattr(fuzz, "HYPOTHESIS_SHARE", 0.0)
    target = fuzz.macro_target()
    fuzz.run_campaign(target, seconds=0.5)  # tables built, imports done
    cpu = time.process_time()
    result = fuzz.run_campaign(target, seconds=3, seed=2)
    cpu = time.process_time() - cpu
    assert result.findings == []
    assert result.examples / cpu >= 400  # target 2,000 (benchmarks/bench_fuzz.py)


def test_shrink_text_removes_everything_the_failure_does_not_need() -> None:
    def fails(text: str) -> bool:
        return "{{" in text and "!" in text[text.index("{{"):]

    text = "abc {{user}} def {{x!y}} ghi " * 4
    assert fuzz.shrink_text(text, fails, time.monotonic() + 10) == "{{!"


def _buggy_target() -> fuzz.FuzzTarget:
    def check(text: str) -> fuzz.Problem | None:
        if "{{else}}" in text and "{{/if}}" in text:
            return fuzz.Problem("crash", "crash:Fake:else", "boom")
        return None

    return fuzz.FuzzTarget("macros", st.just("x"), check, text_of=lambda t: t,
                           fast=lambda rng: MacroTextGenerator(rng).text)


def test_hypothesis_batches_take_a_small_share_of_a_fast_campaign() -> None:
    target = fuzz.macro_target()
    fuzz.run_campaign(target, seconds=0.5)
    cpu = time.process_time()
    result = fuzz.run_campaign(target, seconds=3, seed=4)
    cpu = time.process_time() - cpu
    assert result.examples / cpu >= 250  # 5% of the time in batches ~50x slower per input


def test_fast_findings_are_shrunk_and_reported_once() -> None:
    result = fuzz.run_campaign(_buggy_target(), seconds=1.0, seed=1)
    assert [f.problem.signature for f in result.findings] == ["crash:Fake:else"]
    example = result.findings[0].example
    assert "{{else}}" in example and "{{/if}}" in example
    assert len(example) <= len("{{else}}{{/if}}") + 2  # the rest removed


def test_jobs_run_in_parallel_processes_and_merge_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fuzz.TARGETS, "macros", _buggy_target)
    seen: list[tuple[int, int]] = []
    result = fuzz.run_parallel("macros", 2, seconds=1.0, seed=3, corpus=[], cache_dir=None,
                               on_progress=lambda n, f, t: seen.append((n, f)))
    assert [f.problem.signature for f in result.findings] == ["crash:Fake:else"]  # found by both, kept once
    assert result.examples > 0
    assert seen and seen[-1][0] > 0


def test_the_progress_line_shows_inputs_rate_and_findings_on_a_terminal_only() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    line = fuzz.ProgressLine("macros", 10, tty)
    line.update(4_000, 1, 2.0, final=True)
    line.close()
    shown = tty.getvalue()
    assert "fuzz macros: 4,000 inputs, 2,000/s, 1 finding, 2/10 s" in shown
    assert shown.endswith("\r\x1b[K")  # cleared before the summary
    piped = io.StringIO()  # not a terminal: nothing at all
    quiet = fuzz.ProgressLine("macros", 10, piped)
    quiet.update(4_000, 1, 2.0, final=True)
    quiet.close()
    assert piped.getvalue() == ""


def test_hypothesis_data_goes_to_the_cache_dir_never_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    cache = tmp_path / "cache"
    result = CliRunner().invoke(main, ["fuzz", "--target", "macros", "--seconds", "1.5", "--seed", "2",
                                       "--out", str(tmp_path / "out"), "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    assert "/s" in result.output and ", 0 findings" in result.output
    assert not (work / ".hypothesis").exists()
    assert cache.is_dir()


def test_hypothesis_storage_points_at_the_cache_dir_during_a_campaign(tmp_path: Path) -> None:
    from hypothesis.configuration import storage_directory
    from hypothesis.database import DirectoryBasedExampleDatabase

    before = storage_directory("examples", intent_to_write=False).path
    with fuzz.hypothesis_home(tmp_path / "c") as database:
        assert Path(storage_directory("examples", intent_to_write=False).path) == tmp_path / "c" / "examples"
        assert isinstance(database, DirectoryBasedExampleDatabase)
        assert Path(database.path) == tmp_path / "c" / "examples"
    assert storage_directory("examples", intent_to_write=False).path == before  # restored


def test_the_default_cache_dir_is_the_user_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name != "nt" and not os.uname().sysname == "Darwin":
        assert fuzz.default_cache_dir() == tmp_path / "xdg" / "tavernbox" / "fuzz"


def test_jobs_option_runs_every_worker(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fuzz", "--target", "macros", "--seconds", "1.5", "--jobs", "2",
                                       "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "2 jobs" in result.output
    assert (tmp_path / "cache" / "worker-0").is_dir() and (tmp_path / "cache" / "worker-1").is_dir()


def test_engine_agrees_with_itself_on_generated_texts() -> None:
    gen = MacroTextGenerator(random.Random(9))
    for _ in range(50):
        text = gen.text()
        assert expand_macros(text, {}, seed=1).text == expand_macros(text, {}, seed=1, shortcuts=NO_REUSE).text


def test_bench_fuzz_reports_its_figures() -> None:
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fuzz.py"
    done = subprocess.run([sys.executable, str(script), "--seconds", "1", "--inputs", "300", "--json"], capture_output=True, text=True,
                          check=True, timeout=300)
    figures = json.loads(done.stdout)
    assert figures["fast"]["per_cpu_s"] > figures["hypothesis_only"]["per_cpu_s"]
    assert figures["generate_us"] > 0 and figures["check_us"] > 0
    ejs = figures["ejs"]  # both EJS campaigns, with the profile of what each checked
    for row in (ejs["hypothesis_only"], ejs["fast"]):
        assert row["inputs"] > 0 and row["profile"]["templates"] > 0 and row["findings"] == []
        assert set(row["profile"]["constructs"]) >= {"escaped output <%=", "for", "failing tag"}


def test_the_macro_target_still_catches_a_mutated_context_in_either_form(monkeypatch: pytest.MonkeyPatch) -> None:
    # the context is read once (a MacroContext) for most inputs and passed as a dict for one in
    # DETERMINISM_EVERY: an engine that mutates what it is given is caught on both paths
    import tavernbox.macros as macros

    real = macros.expand_macros

    def mutating(text: str, context: object, **kwargs: object) -> object:
        result = real(text, context, **kwargs)  # type: ignore[arg-type]
        character = context["character"] if isinstance(context, dict) else context.character  # type: ignore[attr-defined]
        character["description"] = "changed"
        return result

    monkeypatch.setattr(macros, "expand_macros", mutating)
    target = fuzz.macro_target()
    kinds = set()
    for i in range(fuzz.DETERMINISM_EVERY * 2):
        problem = target.check(f"{{{{user}}}} {i}")
        assert problem is not None and problem.signature == "invariant:context-mutated"
        kinds.add(problem.message)
    assert kinds == {"the context dict was mutated", "the context was mutated"}
    monkeypatch.setattr(macros, "expand_macros", real)
    assert fuzz.macro_target().check("{{user}}") is None


def test_the_determinism_re_render_catches_a_different_result_and_a_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    # one input in DETERMINISM_EVERY is rendered twice (first from the context dict, then from the
    # context read once): a result that changes between the two is a finding, and so is a second
    # render that mutates the context it was given
    import tavernbox.macros as macros

    real = macros.expand_macros
    calls = [0]

    def drifting(text: str, context: object, **kwargs: object) -> object:
        calls[0] += 1
        return real(f"{text}{calls[0]}", context, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(macros, "expand_macros", drifting)
    target = fuzz.macro_target()
    found = [target.check(f"{{{{user}}}} {i}") for i in range(fuzz.DETERMINISM_EVERY)]
    assert [p.signature if p else None for p in found] == [None] * (fuzz.DETERMINISM_EVERY - 1) + [
        "invariant:nondeterministic"]
    assert target.recheck is not None and target.recheck("{{user}}") is not None  # the shrinker's check too

    seen: set[str] = set()

    def mutating_second(text: str, context: object, **kwargs: object) -> object:
        result = real(text, context, **kwargs)  # type: ignore[arg-type]
        if text in seen and not isinstance(context, dict):  # the re-render, from the read context
            context.character["description"] = "changed"  # type: ignore[attr-defined]
        seen.add(text)
        return result

    monkeypatch.setattr(macros, "expand_macros", mutating_second)
    target = fuzz.macro_target()
    problems = [target.check(f"{{{{user}}}} {i}") for i in range(fuzz.DETERMINISM_EVERY)]
    assert problems[:-1] == [None] * (fuzz.DETERMINISM_EVERY - 1)
    assert problems[-1] is not None and problems[-1].signature == "invariant:context-mutated"


def test_a_campaign_collects_young_garbage_less_often_and_restores_the_collector() -> None:
    import gc

    seen: list[tuple[int, ...]] = []

    def check(text: str) -> fuzz.Problem | None:
        seen.append(gc.get_threshold())
        return None

    target = fuzz.FuzzTarget("macros", st.just("x"), check, text_of=lambda t: t,
                             fast=lambda rng: MacroTextGenerator(rng).text)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    fuzz.run_campaign(target, seconds=0.2, seed=1)
    assert seen and all(t[0] >= fuzz._CAMPAIGN_GC_THRESHOLD for t in seen)  # inside the campaign
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen  # restored after it
