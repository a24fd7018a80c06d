"""The service load benchmark keeps running (a small, bounded load; no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_service.py"


def test_bench_service_runs_and_reports_every_figure() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--requests", "10", "--json"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    figures = json.loads(done.stdout)
    assert figures["clean"]["assemble_errors"] == 0 and figures["hostile_10pct"]["assemble_errors"] == 0
    assert figures["hostile_10pct"]["hostile_requests"] == 1
    assert figures["hostile_10pct"]["hostile_refused_by_budget"] == 1
    for key in ("floor_in_process_ms", "p99_ratio_hostile_vs_clean", "service_vs_floor"):
        assert figures[key] > 0, key
    for phase in ("clean", "hostile_10pct"):
        assert figures[phase]["rps"] > 0 and 0 < figures[phase]["p50_ms"] <= figures[phase]["p99_ms"]


def test_bench_service_refuses_an_unbounded_load() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--requests", "100000"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "10 to 1000" in done.stderr
