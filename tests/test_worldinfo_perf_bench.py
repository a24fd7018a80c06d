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
