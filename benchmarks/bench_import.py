"""Import benchmark against issue 14's target for large world books.

Target: importing a world book of N trivial entries (100,000 entries is about 4.6 MB) takes time
linear in N, and peak memory of at most 20x the file size plus 100 MB.

Each measurement runs ``load_asset`` plus the import report in a fresh Python process (so its peak
resident set, ``VmHWM``, is that import's alone: see :mod:`tavernbox.testing.memory`), for N = 50,000, 100,000 and 200,000. The floor
measured in the same run is ``json.loads`` of the same file in its own fresh process: the time ratio
import/floor says how much the importer costs above parsing, the 200k/100k ratio says whether the
growth is linear (about 2), and memory is printed against its target.

Run: ``/work/venv/bin/python benchmarks/bench_import.py [--sizes 50000,100000,200000] [--json]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SIZES = (50_000, 100_000, 200_000)
MEMORY_FACTOR = 20
MEMORY_BASE_MB = 100

#: The child: generate nothing, time one phase, report wall/CPU seconds and the peak RSS in MiB.
_CHILD = r"""
import json, sys, time
from tavernbox.testing.memory import peak_rss_kib
mode, path = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), time.process_time()
if mode == "floor":
    with open(path, "rb") as fh:
        json.loads(fh.read())
else:
    from tavernbox.cli.importer import import_one
    report = import_one(path)
    assert report["ok"], report
    json.dumps({k: v for k, v in report.items() if k != "_asset"})
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": peak_rss_kib() / 1024}))
"""


def trivial_book(n: int) -> bytes:
    """A world book of ``n`` trivial entries in SillyTavern's shape (no uid: one info diagnostic each)."""
    entries = {str(i): {"key": [f"k{i}"], "content": "x", "comment": ""} for i in range(n)}
    return json.dumps({"entries": entries}, separators=(",", ":")).encode()


def measure(mode: str, path: Path) -> dict[str, float]:
    """Run one phase in a fresh interpreter and return its figures."""
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    """Measure every size; return one row per size."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"book-{n}.json"
            path.write_bytes(trivial_book(n))
            size_mb = path.stat().st_size / (1024 * 1024)
            floor = measure("floor", path)
            imp = measure("import", path)
            rows.append({
                "entries": n,
                "file_mb": round(size_mb, 2),
                "import_cpu_s": round(imp["cpu"], 3),
                "floor_cpu_s": round(floor["cpu"], 3),
                "cpu_ratio_to_json_loads": round(imp["cpu"] / max(floor["cpu"], 1e-9), 1),
                "peak_rss_mb": round(imp["rss_mb"], 1),
                "memory_target_mb": round(MEMORY_FACTOR * size_mb + MEMORY_BASE_MB, 1),
            })
    return rows


def main(argv: list[str]) -> None:
    sizes = SIZES
    if "--sizes" in argv:
        sizes = tuple(int(x) for x in argv[argv.index("--sizes") + 1].split(","))
    rows = run(sizes)
    if "--json" in argv:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        print(f"{row['entries']:>7,} entries {row['file_mb']:6.2f} MB: import {row['import_cpu_s']:7.3f} s CPU "
              f"({row['cpu_ratio_to_json_loads']}x json.loads), peak {row['peak_rss_mb']:.0f} MB "
              f"(target <= {row['memory_target_mb']:.0f} MB)")
    for a, b in zip(rows, rows[1:]):
        print(f"growth {b['entries']:,}/{a['entries']:,}: time x{b['import_cpu_s'] / max(a['import_cpu_s'], 1e-9):.2f} "
              f"for x{b['entries'] / a['entries']:.0f} entries")


if __name__ == "__main__":
    main(sys.argv[1:])
