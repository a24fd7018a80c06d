"""A template stuck in C-level string work: how late its error arrives, and the render after it (issue 29).

Some built-ins loop in C without polling QuickJS's interrupt (a quadratic ``indexOf`` or
``includes`` on megabyte strings, ``indexOf`` over an array of long equal-length strings), so
only the pool's CPU watch stops them: it kills the worker once it has used the template's time
budget plus ``CPU_GRACE_S`` of CPU, and the worker is replaced. Rows, each a ratio or difference
against a trivial render measured in the same round:

* ``error``: wall time of the hostile render's ``TEMPLATE_TIME_LIMIT`` minus a trivial render's
  (goal: <= 300 ms, every run);
* ``next``: the render right after the kill, against the render right after a trivial render
  (goal: as fast, ratio ~1);
* ``in a row``: the three hostile templates back to back (each kill followed by the next
  hostile render), each error minus a trivial render.

The worker's CPU time of the stopped render is ``time_ms + CPU_GRACE_S`` (125 ms by default), and
on a loaded machine the wall time that CPU takes grows with the load. So each round also times
the floor: a process started ahead that burns exactly that much CPU on request (``floor``, the
same pipe round trip); ``error - floor`` is what the pool adds to what the machine's load costs
(``load`` is the 1-minute load average when the run started and ended). ``--no-spare`` runs the plain pool (``WorkerPool(spare=False)``),
where a killed worker's replacement boots while the next render waits.

Run: ``python benchmarks/bench_sandbox_kill.py [--rounds N] [--size N] [--no-spare] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from tavernbox.ejs.render import compile_source
from tavernbox.sandbox import Limits, SandboxError, WorkerPool, run_program
from tavernbox.sandbox.pool import CPU_GRACE_S

HOSTILE = {
    "indexOf": "<%= 'a'.repeat(1<<21).indexOf('a'.repeat(1<<20)+'b') %>",
    "includes": "<%= 'a'.repeat(1<<21).includes('a'.repeat(1<<20)+'b') %>",
    "array indexOf": "<% const s = 'a'.repeat(1<<20); %><%= Array(400000).fill(s).indexOf(s.slice(1)+'b') %>",
}
TRIVIAL = "hello <%= 1 + 1 %>"
GOAL_ERROR_MS = 300.0


#: A process that, for each line it reads, burns that many seconds of its own CPU and answers.
BURNER = """import sys, time
for line in sys.stdin:
    end = time.process_time() + float(line)
    while time.process_time() < end:
        pass
    sys.stdout.write("done\\n"); sys.stdout.flush()
"""


class Floor:
    """The wall time a process started ahead needs to use the stopped render's CPU, over a pipe."""

    def __init__(self, cpu_s: float) -> None:
        self.cpu_s = cpu_s
        self.proc = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def __call__(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        start = time.perf_counter()
        self.proc.stdin.write(f"{self.cpu_s}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()
        return (time.perf_counter() - start) * 1000.0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _programs() -> tuple[str, dict[str, str]]:
    return compile_source(TRIVIAL).program, {name: compile_source(src).program for name, src in HOSTILE.items()}


def _timed(pool: WorkerPool, program: str) -> tuple[float, str | None]:
    """Wall milliseconds of one render and its error code (None: it rendered)."""
    start = time.perf_counter()
    try:
        run_program(program, "{}", pool=pool, template_api=True)
        code = None
    except SandboxError as exc:
        code = exc.code
    return (time.perf_counter() - start) * 1000.0, code


def measure(rounds: int, size: int, spare: bool) -> dict[str, Any]:
    pool = WorkerPool(size=size) if spare else WorkerPool(size=size, spare=False)
    has_spare = getattr(pool, "_spare", None) is not None  # the base commit's pool has none
    trivial, hostile = _programs()
    load_before = os.getloadavg()[0]
    rows: dict[str, dict[str, list[float]]] = {name: {"error": [], "next": [], "codes": [], "over": [],
                                                       "next_ms": [], "after_trivial_ms": []}
                                                for name in hostile}
    in_a_row: list[float] = []
    floors: list[float] = []
    floor = Floor(Limits().time_ms / 1000.0 + CPU_GRACE_S)
    try:
        pool.prestart()
        for _ in range(5):
            _timed(pool, trivial)
        time.sleep(1.0)  # the spare (if any) boots
        for _ in range(rounds):
            for name, program in hostile.items():
                time.sleep(0.2)  # every worker idle and warm: the same start for both sides
                base, _ = _timed(pool, trivial)
                after_trivial, _ = _timed(pool, trivial)
                time.sleep(0.2)
                wall, code = _timed(pool, program)
                after_kill, _ = _timed(pool, trivial)
                time.sleep(0.2)
                floors.append(floor())
                rows[name]["over"].append(wall - base - floors[-1])
                rows[name]["error"].append(wall - base)
                rows[name]["next"].append(after_kill / after_trivial)
                rows[name]["next_ms"].append(after_kill)
                rows[name]["after_trivial_ms"].append(after_trivial)
                rows[name]["codes"].append(code)  # type: ignore[arg-type]
            time.sleep(0.2)
            base, _ = _timed(pool, trivial)
            for program in hostile.values():
                wall, _ = _timed(pool, program)
                in_a_row.append(wall - base)
    finally:
        pool.close()
        floor.close()

    def summary(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "max": max(values), "min": min(values)}

    out: dict[str, Any] = {"spare": has_spare, "size": size, "rounds": rounds,
                           "load": [load_before, os.getloadavg()[0]], "goal_error_ms": GOAL_ERROR_MS}
    for name, row in rows.items():
        out[name] = {"error_ms": summary(row["error"]), "next_ratio": summary(row["next"]),
                     "error_minus_floor_ms": summary(row["over"]),
                     "next_ms": summary(row["next_ms"]), "after_trivial_ms": summary(row["after_trivial_ms"]),
                     "codes": sorted(set(map(str, row["codes"])))}
    out["floor_ms"] = summary(floors)
    out["in_a_row_error_ms"] = summary(in_a_row)
    worst = max([max(row["error"]) for row in rows.values()] + in_a_row)
    out["worst_error_ms"] = worst
    out["goal_met"] = worst <= GOAL_ERROR_MS
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--size", type=int, default=2, help="workers in the pool (the default pool's size here)")
    parser.add_argument("--no-spare", action="store_true", help="the plain pool: no spare worker")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.rounds, args.size, not args.no_spare)
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"pool of {args.size}, spare {'on' if figures['spare'] else 'off'}, {args.rounds} rounds, "
          f"load {figures['load'][0]:.1f} -> {figures['load'][1]:.1f}")
    for name in HOSTILE:
        row = figures[name]
        err, nxt = row["error_ms"], row["next_ratio"]
        over = row["error_minus_floor_ms"]
        print(f"{name:14s} error - trivial: median {err['median']:6.1f} ms, max {err['max']:6.1f} ms "
              f"(- floor: median {over['median']:6.1f}, max {over['max']:6.1f})  "
              f"next / after a trivial one: median {nxt['median']:5.2f}x, max {nxt['max']:5.2f}x "
              f"({row['next_ms']['median']:.2f} / {row['after_trivial_ms']['median']:.2f} ms)  "
              f"({', '.join(row['codes'])})")
    fl = figures["floor_ms"]
    print(f"{'floor':14s} {CPU_GRACE_S * 1000 + Limits().time_ms:g} ms of CPU in a process over a pipe: "
          f"median {fl['median']:6.1f} ms, max {fl['max']:6.1f} ms of wall time")
    row = figures["in_a_row_error_ms"]
    print(f"{'in a row':14s} error - trivial: median {row['median']:6.1f} ms, max {row['max']:6.1f} ms")
    verdict = "met" if figures["goal_met"] else "NOT met"
    print(f"worst error {figures['worst_error_ms']:.1f} ms after a trivial render's (goal <= {GOAL_ERROR_MS:g} ms "
          f"every run): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
