"""``tavernbox fuzz``: inputs per second of the macro and EJS targets, and where the time goes.

Target (issue 14): >= 2,000 macro inputs per second on one core. Figures are per *CPU* second of
the campaign process (``time.process_time``), so that other load on a shared machine does not
count against the fuzzer; a 1M-iteration Python loop is timed beside them to put them in
proportion to the machine. Rows:

* ``hypothesis only``: every input drawn through Hypothesis (the campaign before issue 14);
* ``fast``: the campaign as ``tavernbox fuzz`` runs it (inputs from ``MacroTextGenerator``, a
  fiftieth of the time in Hypothesis batches, the context read once);
* ``generate`` / ``check``: the two halves of one fast input, measured apart.

EJS (issue 29: >= 400 inputs per second on one job). A render runs in a sandbox worker, so the
figures are per *wall* second (what ``tavernbox fuzz`` prints) and per CPU second of the campaign
process and the pool's workers together, for two campaigns of the same seed and length:

* ``ejs hypothesis only``: every case drawn through Hypothesis and rendered alone (the campaign
  before issue 29);
* ``ejs fast``: the campaign as ``tavernbox fuzz --target ejs`` runs it (cases from
  ``EjsCaseGenerator``, checked in batches over every worker, a fiftieth of the time in
  Hypothesis batches).

Both report their findings and the profile of the templates they checked (sizes, and how many
of each construct a template holds), so that a faster campaign is seen not to check easier
inputs.

Run: ``python benchmarks/bench_fuzz.py [--seconds S] [--inputs N] [--target macros|ejs|both] [--json]``.
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
EJS_TARGET_PER_S = 400


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


def _workers_cpu_s() -> float:
    """CPU seconds used so far by the default pool's workers (Linux /proc; 0 elsewhere)."""
    from tavernbox.sandbox import default_pool

    pool = default_pool()
    with pool._cond:
        pids = [w.pid for w in pool._idle]
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", encoding="ascii") as handle:
                total += int(handle.read().split()[0]) / 1e9
        except (OSError, ValueError):
            continue
    return total


def _recording(target: fuzz.FuzzTarget, seen: list[str]) -> fuzz.FuzzTarget:
    """``target`` noting the text of every example it checks."""
    check, many = target.check, target.check_many

    def noted(example: Any) -> Any:
        seen.append(target.text_of(example))
        return check(example)

    def noted_many(examples: list[Any]) -> Any:
        seen.extend(target.text_of(e) for e in examples)
        assert many is not None
        return many(examples)

    return dataclasses.replace(target, check=noted, check_many=None if many is None else noted_many)


def _ejs_rate(target: fuzz.FuzzTarget, seconds: float, seed: int) -> dict[str, Any]:
    from tavernbox.testing.ejs_generator import profile

    seen: list[str] = []
    recorded = _recording(target, seen)
    cpu = time.process_time() + _workers_cpu_s()
    result = fuzz.run_campaign(recorded, seconds=seconds, seed=seed)
    cpu = time.process_time() + _workers_cpu_s() - cpu
    return {"inputs": result.examples, "wall_s": result.seconds, "cpu_s": cpu,
            "per_wall_s": result.examples / result.seconds, "per_cpu_s": result.examples / cpu if cpu else 0.0,
            "findings": sorted(f.problem.signature for f in result.findings), "profile": profile(seen)}


def measure_ejs(seconds: float, seed: int = 1) -> dict[str, Any]:
    """The EJS campaign before (Hypothesis only, one render at a time) and now, same seed and length."""
    from tavernbox.sandbox import default_pool

    target = fuzz.ejs_target()
    slow = dataclasses.replace(target, fast=None, fast_fragment=None, check_many=None)
    default_pool().prestart()
    fuzz.run_campaign(target, seconds=min(1.0, seconds), seed=99)  # imports, caches, workers warm
    fuzz.run_campaign(slow, seconds=min(1.0, seconds), seed=99)
    out: dict[str, Any] = {"target_per_s": EJS_TARGET_PER_S, "seed": seed}
    out["hypothesis_only"] = _ejs_rate(slow, seconds, seed)
    out["fast"] = _ejs_rate(target, seconds, seed)
    out["target_met"] = out["fast"]["per_wall_s"] >= EJS_TARGET_PER_S
    return out


def print_ejs(figures: dict[str, Any]) -> None:
    for label in ("hypothesis_only", "fast"):
        row = figures[label]
        prof = row["profile"]
        print(f"ejs {label:16s} {row['inputs']:7d} inputs  {row['per_wall_s']:6.0f} /wall s  "
              f"{row['per_cpu_s']:6.0f} /CPU s (campaign + workers)  findings: {row['findings'] or 'none'}")
        chars = prof["chars"]
        print(f"    template chars: mean {chars['mean']:.0f}, median {chars['median']:.0f}, p90 {chars['p90']}, "
              f"max {chars['max']}")
        print("    per template (share with one): " + ", ".join(
            f"{name} {c['per_template']:.2f} ({c['share']:.0%})" for name, c in prof["constructs"].items()))
    verdict = "met" if figures["target_met"] else "NOT met"
    print(f"ejs target {EJS_TARGET_PER_S} inputs per wall second on one job: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--inputs", type=int, default=5_000, help="inputs for the generate/check split")
    parser.add_argument("--target", choices=("macros", "ejs", "both"), default="both")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.target == "ejs":
        ejs = measure_ejs(args.seconds)
        print(json.dumps(ejs, indent=1)) if args.json else print_ejs(ejs)
        return 0

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
    if args.target == "both":
        figures["ejs"] = measure_ejs(args.seconds)

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
    if "ejs" in figures:
        print_ejs(figures["ejs"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
