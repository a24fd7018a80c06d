"""Many requests in one process (issue 11's answer, issue 24): ``tavernbox assemble --jsonl`` against its floor.

The scenario is ``bench_request.py``'s: the largest real assets of ``../shared/corpora`` (the 1.2 MB preset, the 1.7 MB
card, the 850 KB book) and a 200-message chat that gains a message on every request (100 requests, each computed
fresh). Figures, each against a floor measured in the same run:

- ``jsonl``: the whole ``tavernbox assemble --jsonl FILE`` process for the 100 requests, against one cold start (the
  ``tavernbox assemble --request`` process for the first request) plus 100 warm calls of
  :func:`tavernbox.assemble_request` in this process (<= 1.3x);
- ``warm``: the median wall time of a warm ``assemble_request`` of those assets, one request repeated (<= 15 ms).

Processes are timed by wall clock, best of REPEAT, interleaved. Run:
``python benchmarks/bench_batch.py [REPEAT] [--json]`` (default 3).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_request import BOOK, CARD, PRESET, chat, request  # noqa: E402

REQUESTS = 100
JSONL_TARGET_X = 1.3
WARM_TARGET_MS = 15.0


def _requests() -> list[dict[str, Any]]:
    return [request(chat(extra=i)) for i in range(REQUESTS)]


def _process_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def _warm(requests: list[dict[str, Any]]) -> tuple[float, float]:
    """The 100 requests as warm calls in this process, each once as ``--jsonl`` sees them (ms), after three other
    requests warmed it; and the median warm call of one request repeated (ms), ``bench_request.py``'s ``warm``."""
    from tavernbox import assemble_request

    for i in range(3):
        assemble_request(request(chat(extra=REQUESTS + 10 + i)))
    total = 0.0
    for req in requests:
        start = time.perf_counter()
        assemble_request(req)
        total += (time.perf_counter() - start) * 1000
    each = []
    for _ in range(15):
        start = time.perf_counter()
        assemble_request(requests[0])
        each.append((time.perf_counter() - start) * 1000)
    return total, statistics.median(each)


def run(repeat: int) -> dict[str, Any]:
    requests = _requests()
    tavernbox = str(Path(sys.executable).with_name("tavernbox"))
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch.jsonl"
        batch.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
        first = Path(tmp) / "first.json"
        first.write_text(json.dumps(requests[0]), encoding="utf-8")
        _process_ms([tavernbox, "assemble", "--request", str(first), "--messages"])  # bytecode written, files cached
        jsonl, cold = [], []
        for _ in range(repeat):
            jsonl.append(_process_ms([tavernbox, "assemble", "--jsonl", str(batch)]))
            cold.append(_process_ms([tavernbox, "assemble", "--request", str(first), "--messages"]))
    warm_sum, warm_median = _warm(requests)
    floor = min(cold) + warm_sum
    return {"requests": REQUESTS, "repeat": repeat,
            "jsonl_ms": round(min(jsonl), 1), "cold_start_ms": round(min(cold), 1),
            "warm_sum_ms": round(warm_sum, 1), "floor_ms": round(floor, 1),
            "jsonl_over_floor": round(min(jsonl) / floor, 2), "jsonl_target_x": JSONL_TARGET_X,
            "warm_ms": round(warm_median, 2), "warm_target_ms": WARM_TARGET_MS,
            "met": min(jsonl) / floor <= JSONL_TARGET_X and warm_median <= WARM_TARGET_MS}


def main() -> None:
    args = sys.argv[1:]
    for path in (PRESET, CARD, BOOK):
        if not path.exists():
            print(f"skipped: {path} is not there (the corpora live in ../shared beside the repository)")
            return
    repeat = int(next((a for a in args if a.isdigit()), "3"))
    figures = run(repeat)
    if "--json" in args:
        print(json.dumps(figures, indent=2))
        return
    print(f"--jsonl, {REQUESTS} requests: {figures['jsonl_ms']:.0f} ms; one cold start {figures['cold_start_ms']:.0f} ms "
          f"+ {REQUESTS} warm calls {figures['warm_sum_ms']:.0f} ms = {figures['floor_ms']:.0f} ms; "
          f"ratio {figures['jsonl_over_floor']}x (target <= {JSONL_TARGET_X}x)")
    print(f"warm assemble_request: {figures['warm_ms']:.1f} ms median (target <= {WARM_TARGET_MS} ms)")
    print("met" if figures["met"] else "NOT met")


if __name__ == "__main__":
    main()
