"""The staged SillyTavern path against the code it replaced: warm ``assemble_request`` CPU time, same run.

Issue 24 moved the request path into named stages (``tavernbox.sillytavern``) with text passes that run
nowhere when none is given; the cost must not change. This script times warm assemblies of three
requests (the bundled sample, the largest corpus preset + card + book with a 200-message chat, and a
5,000-message chat) in this checkout and in a baseline tree, in interleaved fresh processes (so a burst
of load hits both alike), and prints the ratio of CPU time per request (this / baseline).

The baseline is an importable tree of an older commit::

    d=$(mktemp -d); git archive 9931503 engine sandbox grammars | tar -x -C $d
    mv $d/engine $d/tavernbox; mv $d/sandbox $d/tavernbox/sandbox; mv $d/grammars $d/tavernbox/grammars
    python benchmarks/bench_stages.py --baseline $d [--rounds 5] [--calls 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"

_PROBE = r"""
import json, sys, time
from pathlib import Path
from tavernbox import assemble_request
root, corpora, calls = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
def chat(n):
    return {"messages": [{"role": "user" if (n - i) % 2 else "assistant", "content": f"message {i} " + "word " * 30}
                         for i in range(n)]}
requests = {"sample": (json.loads((root / "corpora" / "sample-request.json").read_text()), root / "corpora")}
if (corpora / "presets").exists():
    requests["largest"] = ({"preset": str(corpora / "presets" / "hoxilo-it-takes-two-v5.2.vi.json"),
                            "card": str(corpora / "cards" / "de-quoc-la-ma-than-thanh.vi.v3.json"),
                            "books": [str(corpora / "worldbooks" / "prolix-zzz-lorebook-vector.json")],
                            "chat": chat(200)}, None)
requests["long_chat"] = ({"preset": str(root / "corpora" / "sample-preset.json"),
                          "card": str(root / "corpora" / "sample-card.json"), "chat": chat(5000)}, None)
out = {}
for name, (request, base) in requests.items():
    assemble_request(request, base_dir=base)  # warm: assets cached, tokenizer built
    start = time.process_time()
    for _ in range(calls):
        assemble_request(request, base_dir=base)
    out[name] = (time.process_time() - start) * 1000 / calls
print(json.dumps(out))
"""


def _probe(tree: Path | None, calls: int) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    done = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), str(CORPORA), str(calls)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an importable tree of the older code")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    mine: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for _ in range(args.rounds):  # interleaved
        base.append(_probe(args.baseline, args.calls))
        mine.append(_probe(None, args.calls))
    report: dict[str, Any] = {}
    for name in mine[0]:
        a, b = min(m[name] for m in mine), min(m[name] for m in base)
        report[name] = {"cpu_ms_per_request": round(a, 3), "baseline_cpu_ms": round(b, 3), "ratio": round(a / b, 3),
                        "median_ratio": round(statistics.median(m[name] for m in mine)
                                              / statistics.median(m[name] for m in base), 3)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, row in report.items():
        print(f"{name:10} {row['cpu_ms_per_request']:9.3f} ms  baseline {row['baseline_cpu_ms']:9.3f} ms  "
              f"ratio {row['ratio']:.3f} (medians {row['median_ratio']:.3f})")


if __name__ == "__main__":
    main()
