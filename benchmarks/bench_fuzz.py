"""``tavernbox fuzz --target macros``: inputs per second, and where the time goes.

Target (issue 14): >= 2,000 macro inputs per second on one core. Figures are per *CPU* second of
the campaign process (``time.process_time``), so that other load on a shared machine does not
count against the fuzzer; a 1M-iteration Python loop is timed beside them to put them in
proportion to the machine. Rows:

* ``hypothesis only``: every input drawn through Hypothesis (the campaign before issue 14);
* ``fast``: the campaign as ``tavernbox fuzz`` runs it (inputs from ``MacroTextGenerator``, a
  fiftieth of the time in Hypothesis batches, the context read once);
* ``generate`` / ``check``: the two halves of one fast input, measured apart.

Run: ``python benchmarks/bench_fuzz.py [--seconds S] [--inputs N] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from typing import Any

from tavernbox.cli import fuzz
from tavernbox.testing.macro_generator import MacroTextGenerator

TARGET_PER_S = 2_000


def _loop_ms() -> float:
    start = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i
    return (time.process_time() - start) * 1000


def _campaign_rate(target: fuzz.FuzzTarget, seconds: float) -> dict[str, float]:
    fuzz.run_campaign(target, seconds=min(1.0, seconds), seed=99)  # imports, tables, caches
    cpu = time.process_time()
    result = fuzz.run_campaign(target, seconds=seconds, seed=1)
    cpu = time.process_time() - cpu
    return {"inputs": result.examples, "wall_s": result.seconds, "cpu_s": cpu,
            "per_cpu_s": result.examples / cpu if cpu else 0.0, "findings": len(result.findings)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--inputs", type=int, default=5_000, help="inputs for the generate/check split")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    target = fuzz.macro_target()
    slow = dataclasses.replace(target, fast=None, fast_fragment=None)
    figures: dict[str, Any] = {"loop_1m_ms": _loop_ms(), "target_per_s": TARGET_PER_S}
    figures["hypothesis_only"] = _campaign_rate(slow, args.seconds)
    figures["fast"] = _campaign_rate(target, args.seconds)

    gen = MacroTextGenerator(random.Random(5))
    start = time.process_time()
    texts = [gen.text() for _ in range(max(1, args.inputs))]
    figures["generate_us"] = (time.process_time() - start) / len(texts) * 1e6
    figures["mean_chars"] = sum(map(len, texts)) / len(texts)
    start = time.process_time()
    for text in texts:
        target.check(text)
    figures["check_us"] = (time.process_time() - start) / len(texts) * 1e6
    figures["target_met"] = figures["fast"]["per_cpu_s"] >= TARGET_PER_S

    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"machine: a 1M-iteration Python loop takes {figures['loop_1m_ms']:.0f} ms CPU here")
    for label in ("hypothesis_only", "fast"):
        row = figures[label]
        print(f"{label:16s} {row['inputs']:8d} inputs  {row['per_cpu_s']:8.0f} /CPU s  "
              f"({row['inputs'] / row['wall_s']:.0f} /wall s, {row['findings']} findings)")
    print(f"one fast input: generate {figures['generate_us']:.0f} us ({figures['mean_chars']:.0f} chars), "
          f"check {figures['check_us']:.0f} us (render, invariants, 1 in {fuzz.DETERMINISM_EVERY} re-rendered)")
    verdict = "met" if figures["target_met"] else "NOT met"
    print(f"target {TARGET_PER_S} inputs per CPU second on one core: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
