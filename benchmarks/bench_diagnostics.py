"""Diagnostics are bounded (issue 28): a mistake repeated in every entry costs about what the clean book costs.

The book: 100,000 entries in the card-spec list form whose entries use ``key`` (not ``keys``) and lack ``enabled``,
so every entry raises two identical warnings; the floor is the same book written without the mistake, measured in the
same run. Each is imported by ``tavernbox import`` and ``tavernbox import --json`` in a fresh process (best of REPEAT
wall times, interleaved; the peak RSS of the child from the kernel's accounting). Target: the mistaken book within
1.5x the clean book's time and memory, and its ``--json`` report of a bounded size.

Run: ``python benchmarks/bench_diagnostics.py [REPEAT] [--json] [--entries N]`` (default 3, 100,000).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5


def _books(folder: Path, entries: int) -> dict[str, Path]:
    mistaken = {"name": "Big", "entries": [{"key": [f"k{i}"], "content": f"c{i}"} for i in range(entries)]}
    clean = {"name": "Big", "entries": [{"keys": [f"k{i}"], "content": f"c{i}", "enabled": True}
                                        for i in range(entries)]}
    out = {}
    for name, book in (("clean", clean), ("mistaken", mistaken)):
        out[name] = folder / f"{name}.json"
        out[name].write_text(json.dumps(book), encoding="utf-8")
    return out


def _run(args: list[str]) -> tuple[float, int]:
    """Wall seconds and the size of what it printed (stdout and stderr), for one fresh process."""
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{args} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return wall, len(done.stdout) + len(done.stderr)


def _peak_of(args: list[str]) -> int:
    """The peak RSS (KiB) of one child, read in a wrapper process so earlier children do not mask it."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True).stdout.strip())


def main() -> None:
    argv = sys.argv[1:]
    as_json = "--json" in argv
    entries = int(argv[argv.index("--entries") + 1]) if "--entries" in argv else 100_000
    numbers = [a for a in argv if a.isdigit() and (argv.index(a) == 0 or argv[argv.index(a) - 1] != "--entries")]
    repeat = int(numbers[0]) if numbers else 3
    tavernbox = [str(Path(sys.executable).with_name("tavernbox"))]
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        books = _books(Path(tmp), entries)
        for mode, extra in (("plain", []), ("json", ["--json"])):
            best = {name: float("inf") for name in books}
            size = {name: 0 for name in books}
            for _ in range(repeat):
                for name, path in books.items():
                    wall, out = _run([*tavernbox, "import", *extra, str(path)])
                    best[name] = min(best[name], wall)
                    size[name] = out
            peak = {name: _peak_of([*tavernbox, "import", *extra, str(path)]) for name, path in books.items()}
            figures[mode] = {"clean_s": round(best["clean"], 3), "mistaken_s": round(best["mistaken"], 3),
                             "time_ratio": round(best["mistaken"] / best["clean"], 2),
                             "clean_peak_mb": round(peak["clean"] / 1024, 1),
                             "mistaken_peak_mb": round(peak["mistaken"] / 1024, 1),
                             "memory_ratio": round(peak["mistaken"] / peak["clean"], 2),
                             "mistaken_output_bytes": size["mistaken"]}
    result = {"entries": entries, "repeat": repeat, "target": TARGET, "figures": figures,
              "met": all(f["time_ratio"] <= TARGET and f["memory_ratio"] <= TARGET for f in figures.values())}
    if as_json:
        print(json.dumps(result, indent=2))
        return
    for mode, f in figures.items():
        print(f"import {mode:5}: {f['mistaken_s']:.2f} s / {f['clean_s']:.2f} s = {f['time_ratio']}x time, "
              f"{f['mistaken_peak_mb']} / {f['clean_peak_mb']} MB = {f['memory_ratio']}x memory "
              f"(target <= {TARGET}x), output {f['mistaken_output_bytes']:,} bytes")
    print("met" if result["met"] else "NOT met")


if __name__ == "__main__":
    main()
