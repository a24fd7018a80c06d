"""Many requests in one process (issue 11's answer, issue 24): ``tavernbox assemble --jsonl`` against its floor.

The scenario is ``bench_request.py``'s: the largest real assets of ``../shared/corpora`` (the 1.2 MB preset, the 1.7 MB
card, the 850 KB book) and a 200-message chat that gains a message on every request (100 requests, each computed
fresh). Figures, each against a floor measured in the same run:

- ``jsonl``: the whole ``tavernbox assemble --jsonl FILE`` process for the 100 requests, against one cold start (the
  ``tavernbox assemble --request`` process for the first request) plus 100 warm calls of
  :func:`tavernbox.assemble_request` in a fresh process warmed by three other requests (<= 1.3x);
- ``warm``: the median wall time of a warm ``assemble_request`` of those assets, one request repeated in that process
  (<= 15 ms).

Processes are timed by wall clock, best of REPEAT, interleaved. Run:
``python benchmarks/bench_batch.py [REPEAT] [--json] [--requests N]`` (default 3, 100).
"""

from __future__ import annotations

import json
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


def _requests(count: int) -> list[dict[str, Any]]:
    return [request(chat(extra=i)) for i in range(count)]


def _process_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


# a fresh process, as the --jsonl one: three other requests warm it, then the 100 are timed one by one (each once,
# as --jsonl sees them), then one request repeated (the warm call)
_PROBE = """
import json, statistics, sys, time
sys.path.insert(0, {bench_dir!r})
from tavernbox import assemble_request
from bench_request import chat, request
for i in range(3):
    assemble_request(request(chat(extra={requests} + 10 + i)))
lines = open({batch!r}, encoding="utf-8").read().splitlines()
total = 0.0
for line in lines:
    req = json.loads(line)
    start = time.perf_counter(); assemble_request(req); total += (time.perf_counter() - start) * 1000
each = []
first = json.loads(lines[0])
for _ in range(15):
    start = time.perf_counter(); assemble_request(first); each.append((time.perf_counter() - start) * 1000)
print(json.dumps({{"warm_sum_ms": total, "warm_ms": statistics.median(each)}}))
"""


def _warm(batch: Path, count: int) -> dict[str, float]:
    """The requests as warm calls in a fresh process, and the median warm call of one request (ms)."""
    probe = _PROBE.format(bench_dir=str(Path(__file__).resolve().parent), requests=count, batch=str(batch))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run(repeat: int, count: int = REQUESTS) -> dict[str, Any]:
    requests = _requests(count)
    tavernbox = str(Path(sys.executable).with_name("tavernbox"))
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch.jsonl"
        batch.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
        first = Path(tmp) / "first.json"
        first.write_text(json.dumps(requests[0]), encoding="utf-8")
        _process_ms([tavernbox, "assemble", "--request", str(first), "--messages"])  # bytecode written, files cached
        jsonl, cold, warm_sum, warm_each = [], [], [], []
        for _ in range(repeat):  # interleaved, so a burst of load hits every side alike
            jsonl.append(_process_ms([tavernbox, "assemble", "--jsonl", str(batch)]))
            cold.append(_process_ms([tavernbox, "assemble", "--request", str(first), "--messages"]))
            warm = _warm(batch, count)
            warm_sum.append(warm["warm_sum_ms"])
            warm_each.append(warm["warm_ms"])
    warm_total, warm_median = min(warm_sum), min(warm_each)
    floor = min(cold) + warm_total
    return {"requests": count, "repeat": repeat,
            "jsonl_ms": round(min(jsonl), 1), "cold_start_ms": round(min(cold), 1),
            "warm_sum_ms": round(warm_total, 1), "floor_ms": round(floor, 1),
            "jsonl_over_floor": round(min(jsonl) / floor, 2), "jsonl_target_x": JSONL_TARGET_X,
            "warm_ms": round(warm_median, 2), "warm_target_ms": WARM_TARGET_MS,
            "met": min(jsonl) / floor <= JSONL_TARGET_X and warm_median <= WARM_TARGET_MS}


def main() -> None:
    args = sys.argv[1:]
    for path in (PRESET, CARD, BOOK):
        if not path.exists():
            print(f"skipped: {path} is not there (the corpora live in ../shared beside the repository)")
            return
    count = int(args[args.index("--requests") + 1]) if "--requests" in args else REQUESTS
    repeat = int(next((a for i, a in enumerate(args) if a.isdigit() and (i == 0 or args[i - 1] != "--requests")), "3"))
    figures = run(repeat, count)
    if "--json" in args:
        print(json.dumps(figures, indent=2))
        return
    print(f"--jsonl, {count} requests: {figures['jsonl_ms']:.0f} ms; one cold start {figures['cold_start_ms']:.0f} ms "
          f"+ {count} warm calls {figures['warm_sum_ms']:.0f} ms = {figures['floor_ms']:.0f} ms; "
          f"ratio {figures['jsonl_over_floor']}x (target <= {JSONL_TARGET_X}x)")
    print(f"warm assemble_request: {figures['warm_ms']:.1f} ms median (target <= {WARM_TARGET_MS} ms)")
    print("met" if figures["met"] else "NOT met")


if __name__ == "__main__":
    main()
