"""benchmarks/bench_assemble.py keeps running and reports every figure (one repeat; no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_assemble.py"


def test_bench_assemble_reports_the_target_ratios_and_both_scenarios() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["target_ms"] == 20.0 and figures["repeat"] == 1
    loom = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "presets" / "prolix-lucid-loom-v3.2.json"
    assert set(figures["scenarios"]) == ({"synthetic", "sillytavern"} if loom.exists() else {"synthetic"})
    for scenario in figures["scenarios"].values():
        for key in ("200", "400", "800", "200_min", "800_min", "ratio_400_200", "ratio_800_400"):
            assert scenario[key] > 0, key
    text = subprocess.run([sys.executable, str(SCRIPT), "1"], capture_output=True, text=True, timeout=300)
    assert text.returncode == 0 and "target" in text.stdout and "ratio 400/200" in text.stdout
