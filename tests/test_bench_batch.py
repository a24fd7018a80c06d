"""The benchmarks of issue 28 and issue 11's answer run and report their figures (the figures themselves are read
from a full run, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.needs_shared("corpora/presets/hoxilo-it-takes-two-v5.2.vi.json")
def test_bench_batch_reports_the_jsonl_ratio_and_the_warm_call() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "bench_batch.py"), "1", "--json", "--requests", "4"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["requests"] == 4 and figures["jsonl_target_x"] == 1.3 and figures["warm_target_ms"] == 15.0
    assert figures["jsonl_ms"] > 0 and figures["cold_start_ms"] > 0 and figures["warm_sum_ms"] > 0
    assert figures["jsonl_over_floor"] > 0 and figures["warm_ms"] > 0


def test_bench_diagnostics_reports_both_ratios() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "bench_diagnostics.py"), "1", "--json", "--entries", "2000"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["entries"] == 2000 and figures["target"] == 1.5
    for mode in ("plain", "json"):
        assert figures["figures"][mode]["time_ratio"] > 0 and figures["figures"][mode]["memory_ratio"] > 0
        assert figures["figures"][mode]["mistaken_output_bytes"] < 10_000  # bounded, whatever the book's size
