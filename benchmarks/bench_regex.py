"""Regex scripts against issue 25's speed targets, each a ratio or a bound measured in the same run.

- ``scripts``: the largest preset's 118 regex scripts (``nemo-engine-v10.json``: 4 of them prompt-only,
  the ones SillyTavern runs when it builds a prompt) over a 200-message chat holding what they target
  (HTML panels, thinking blocks, notes, trackers), against the same warm assembly with the preset's
  scripts not allowed. Target: <= 1.5x.
- ``catastrophic``: a global script ``/(a+)+b/`` over a chat of ``a`` runs, with a 0.2 s budget: the CPU
  time from the request's start until it stops with ``REGEX_TIME_LIMIT``, past the budget. Target:
  <= 50 ms past it. The next request (the same chat without that script) must then assemble.

Times are process CPU time (the budget is CPU time too), medians of ``REPEAT`` runs, the two sides of
the ratio interleaved so a burst of load hits both. Needs ``../shared/corpora``.
Run: ``/work/venvs/i25/bin/python benchmarks/bench_regex.py [REPEAT] [--json]`` (default 15).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tavernbox import assemble_request
from tavernbox.errors import TemplateError

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
PRESET = CORPORA / "presets" / "nemo-engine-v10.json"
CARD = CORPORA / "cards" / "st-default-seraphina.v2.json"
RATIO_TARGET = 1.5
OVERSHOOT_TARGET_MS = 50.0
BUDGET = 0.2


def chat(n: int = 200) -> list[dict[str, Any]]:
    html = "<!-- HTML_START --><div class='panel'>HP {i}</div><!-- HTML_END -->"
    out = []
    for i in range(n):
        if i % 2:
            out.append({"role": "user", "content": f"Message {i}: I look around the square and ask about the bell."})
        else:
            out.append({"role": "assistant", "content": (
                f"<think>Turn {i}: plan the scene.</think>The bell tolls as the crowd parts. " * 3
                + html.format(i=i) + f" <vexnote>note {i}</vexnote> <st-tracker-mini>t{i}</st-tracker-mini>")})
    return out


def request(allowed: bool, messages: list[dict[str, Any]], scripts: Any = None) -> dict[str, Any]:
    return {"preset": str(PRESET), "card": str(CARD), "chat": {"messages": messages}, "user": {"name": "Ash"},
            "budget": {"max_context": 1_000_000, "max_tokens": 300},
            "extensions": {"regex": {"preset_scripts": allowed, "scripts": scripts or [],
                                     "time_limit": BUDGET}}}


def cpu(fn: Any) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def scripts_ratio(repeat: int) -> dict[str, Any]:
    messages = chat()
    on, off = request(True, messages), request(False, messages)
    assert assemble_request(on).messages != assemble_request(off).messages  # warm both; the scripts do work
    t_on, t_off = [], []
    for _ in range(repeat):
        t_off.append(cpu(lambda: assemble_request(off)))
        t_on.append(cpu(lambda: assemble_request(on)))
    m_on, m_off = statistics.median(t_on), statistics.median(t_off)
    return {"scripts_on_ms": m_on * 1000, "scripts_off_ms": m_off * 1000, "ratio": m_on / m_off,
            "target": RATIO_TARGET}


def catastrophic(repeat: int) -> dict[str, Any]:
    slow = [{"scriptName": "catastrophic", "findRegex": "/(a+)+b/", "replaceString": "", "placement": [1, 2],
             "promptOnly": True}]
    messages = [{"role": "user" if i % 2 else "assistant", "content": "a" * 40 + str(i) + "!b"} for i in range(20)]
    over = []
    for _ in range(max(3, repeat // 3)):
        start = time.process_time()
        try:
            assemble_request(request(False, messages, slow))
            raise AssertionError("the catastrophic script was not stopped")
        except TemplateError as exc:
            assert exc.code == "REGEX_TIME_LIMIT", exc.code
        over.append(time.process_time() - start - BUDGET)
        assemble_request(request(False, messages))  # the next request is unaffected
    worst = max(over)
    return {"budget_ms": BUDGET * 1000, "worst_overshoot_ms": worst * 1000, "median_overshoot_ms":
            statistics.median(over) * 1000, "target_ms": OVERSHOOT_TARGET_MS}


def main(argv: list[str]) -> int:
    repeat = int(next((a for a in argv if a.isdigit()), "15"))
    if not PRESET.exists():
        print(f"the shared corpus is missing: {PRESET}", file=sys.stderr)
        return 2
    result = {"scripts": scripts_ratio(repeat), "catastrophic": catastrophic(repeat)}
    ok = result["scripts"]["ratio"] <= RATIO_TARGET and \
        result["catastrophic"]["worst_overshoot_ms"] <= OVERSHOOT_TARGET_MS
    if "--json" in argv:
        print(json.dumps({**result, "ok": ok}, indent=2))
    else:
        s, c = result["scripts"], result["catastrophic"]
        print(f"118 scripts over 200 messages: {s['scripts_on_ms']:.1f} ms vs {s['scripts_off_ms']:.1f} ms with the "
              f"preset's scripts off: {s['ratio']:.2f}x (target <= {RATIO_TARGET}x)")
        print(f"catastrophic pattern, {c['budget_ms']:.0f} ms budget: stopped {c['worst_overshoot_ms']:.1f} ms past it "
              f"at worst (median {c['median_overshoot_ms']:.1f} ms; target <= {OVERSHOOT_TARGET_MS:.0f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
