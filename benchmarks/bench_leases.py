"""What holding library revisions as leases costs (issue 15: the revisions a request read are the leases the bridge checks).

Two figures, each a ratio against a floor measured in the same run on the same database:

- ``commit_check_vs_resolve``: the check every request with refs makes before it commits (one
  ``AssetLibrary.heads`` read for all its refs) over resolving the same refs (``get`` of each
  document, what the request paid anyway).
- ``mid_render_reads_per_job_step``: a template that awaits in a loop makes the bridge check its
  leases after every pending-job step; the library reads this costs, per job step (the probe
  cache bounds it by time, ``tavernbox.service.leases.MAX_AGE_S``), and the render's time holding
  library leases over the same render holding as many in-memory leases (the bridge's per-step
  checks cost the same IPC either way; the difference is the library reads). Best of three.

SQLite in a temporary folder by default; ``--database postgresql://...`` measures PostgreSQL (the
database must be empty or disposable: the script writes ``presets/bench-*``).
Run: ``python benchmarks/bench_leases.py [--refs N] [--rounds N] [--database URL] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AWAITS = 900  # under the sandbox's 1,000 pending-job steps per pass
TEMPLATE = ("<% for (let i = 0; i < " + str(AWAITS) + "; i++) { await Promise.resolve(i); } %>"
            "<%= getpreset('main').length %>")


def measure(database: str, refs: int, rounds: int) -> dict[str, Any]:
    from tavernbox.bridge import LeaseSet, Revocable, render_with_sources, sources_from_inputs
    from tavernbox.service.leases import MAX_AGE_S, LibraryLeases
    from tavernbox.store import open_database

    preset = json.loads((ROOT / "corpora" / "sample-preset.json").read_text(encoding="utf-8"))
    storage = open_database(database)
    library = storage.library
    try:
        stored = [library.put("presets", f"bench-{i}", preset) for i in range(refs)]
        items = [{"ref": f"presets/{e.id}", "kind": "presets", "id": e.id, "revision": e.revision,
                  "digest": e.digest, "path": f"$.refs[{i}]"} for i, e in enumerate(stored)]
        started = time.perf_counter()
        for _ in range(rounds):
            for e in stored:
                library.get("presets", e.id)
        resolve_s = (time.perf_counter() - started) / rounds
        started = time.perf_counter()
        for _ in range(rounds):
            LibraryLeases(library, items).check("bench")
        check_s = (time.perf_counter() - started) / rounds

        sources = sources_from_inputs(preset=preset)
        in_memory = LeaseSet()  # the floor: as many leases, answered from memory (the per-step checks' own cost)
        for e in stored:
            in_memory.add(e.id, Revocable().check_current)
        render_with_sources(TEMPLATE, sources, leases=in_memory)  # warm the pool
        plain_s = held_s = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            plain = render_with_sources(TEMPLATE, sources, leases=in_memory)
            plain_s = min(plain_s, time.perf_counter() - started)
            leased = LibraryLeases(library, items)
            started = time.perf_counter()
            held = render_with_sources(TEMPLATE, sources, leases=leased.leases.lease_set())
            held_s = min(held_s, time.perf_counter() - started)
        assert held.text == plain.text
    finally:
        storage.close()
    return {
        "database": storage.backend,
        "refs": refs,
        "resolve_refs_us": round(resolve_s * 1e6, 1),
        "commit_check_us": round(check_s * 1e6, 1),
        "commit_check_vs_resolve": round(check_s / resolve_s, 3),
        "job_steps": held.usage.job_steps,
        "mid_render_library_reads": leased.reads,
        "mid_render_reads_per_job_step": round(leased.reads / max(held.usage.job_steps, 1), 4),
        "probe_cache_ms": MAX_AGE_S * 1000,
        "render_in_memory_leases_ms": round(plain_s * 1000, 1),
        "render_library_leases_ms": round(held_s * 1000, 1),
        "render_library_vs_in_memory_leases": round(held_s / plain_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, default=4, help="refs per request (1-64)")
    parser.add_argument("--rounds", type=int, default=500, help="repetitions of each timed step (1-100000)")
    parser.add_argument("--database", help="a PostgreSQL URL (default: SQLite in a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.refs <= 64 or not 1 <= args.rounds <= 100_000:
        parser.error("--refs is 1 to 64 and --rounds 1 to 100000")
    if args.database:
        figures = measure(args.database, args.refs, args.rounds)
    else:
        with tempfile.TemporaryDirectory(prefix="tavernbox-bench-leases-") as folder:
            figures = measure(str(Path(folder) / "bench.db"), args.refs, args.rounds)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{figures['database']}: {figures['refs']} refs; resolving them {figures['resolve_refs_us']} us, the "
              f"commit check {figures['commit_check_us']} us ({figures['commit_check_vs_resolve']}x)")
        print(f"a render of {figures['job_steps']} job steps holding the leases read the library "
              f"{figures['mid_render_library_reads']} times ({figures['mid_render_reads_per_job_step']} per step, "
              f"cache {figures['probe_cache_ms']} ms); {figures['render_library_leases_ms']} ms vs "
              f"{figures['render_in_memory_leases_ms']} ms with in-memory leases "
              f"({figures['render_library_vs_in_memory_leases']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
