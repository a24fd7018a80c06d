"""The world-info benchmark keeps running and reports every figure (tiny sizes; no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_worldinfo.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_bench_worldinfo_json_has_every_figure_and_agrees_with_the_naive_scan() -> None:
    done = _run("--entries", "300", "--messages", "6", "--repeat", "1", "--check", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["entries"] == 300 and figures["target_ms"] == 50
    for key in ("cold_normalise_ms", "cold_activate_ms", "cold_trace_ms", "cold_total_ms", "cold_exported_total_ms", "warm_ms",
                "warm_with_trace_ms", "initial_pass_ms", "naive_initial_pass_ms"):
        assert figures[key] > 0, key
    assert figures["activated"] > 0 and figures["passes"] >= 1
    assert set(figures["linearity"]) == {"2x entries", "2x messages"}


def test_bench_worldinfo_text_report_states_the_target() -> None:
    done = _run("--entries", "200", "--messages", "4", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    assert "target: full activation <= 50 ms" in done.stdout
    assert "cold (one CLI run" in done.stdout and "warm (books loaded" in done.stdout
    assert "naive per-entry scan" in done.stdout


def test_bench_worldinfo_rejects_zero_repeats() -> None:
    done = _run("--repeat", "0")
    assert done.returncode == 2 and "at least 1" in done.stderr


def test_bench_worldinfo_measures_the_raw_book_with_its_parse() -> None:
    """Issue 29's figure: the raw book's ``json.loads`` plus the activation, against the parse alone."""
    done = _run("--entries", "200", "--messages", "4", "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)["raw_with_loads"]
    assert loaded["loads_ms"] > 0 and loaded["activate_ms"] > 0
    assert loaded["ratio"] == loaded["with_loads_ms"] / loaded["loads_ms"] > 1
    done = _run("--entries", "200", "--messages", "4", "--repeat", "1")
    assert "json.loads of the raw book, then the public call" in done.stdout and "goal 2.2x" in done.stdout
