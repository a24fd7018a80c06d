"""The macro benchmark keeps running (tiny iteration count; no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_macros.py"


def test_bench_macros_runs_and_reports_every_figure() -> None:
    env = dict(os.environ, TAVERNBOX_BENCH_ITERATIONS="2")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["iterations"] == 2
    assert 2500 <= figures["template_bytes"] <= 3500
    assert 18 <= figures["template_macros"] <= 26
    assert 9000 <= figures["parse_10kb_bytes"] <= 11000
    for key in ("tavernbox_cold_s", "jinja_cold_s", "jinja_cached_s", "parse_10kb_cold_s", "expand_10kb_cold_s"):
        assert figures[key] > 0, key
    assert figures["ratio_cold"] > 0


def test_bench_macros_text_report() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--iterations", "1"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "ratio cold" in done.stdout and "cold parse" in done.stdout


def test_bench_macros_rejects_zero_iterations() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--iterations", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "at least 1" in done.stderr


def test_bench_request_runs_and_reports_every_figure() -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_request.py"
    corpora = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
    done = subprocess.run([sys.executable, str(script), "1", "--json"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    if not (corpora / "presets" / "hoxilo-it-takes-two-v5.2.vi.json").exists():
        assert done.stdout.startswith("skipped")
        return
    figures = json.loads(done.stdout)
    assert figures["warm"]["warm_ms"] > 0 and figures["warm"]["warm_new_turn_ms"] > 0
    assert len(figures["fresh"]["first_ms"]) == 3 and figures["fresh"]["import_ms"] > 0
    assert figures["fresh_tokenizer_preloaded"]["tokenizer_cpu_ms"] > 0
    for key in ("first_over_warm", "cli_over_json_load", "help_minus_python_ms"):
        assert key in figures["ratios"]
