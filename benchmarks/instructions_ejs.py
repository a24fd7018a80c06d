"""Instructions per EJS render, counted by callgrind: a deterministic companion to bench_ejs.py.

Why: the wall and CPU times of bench_ejs.py move with the machine (on the shared box these run on,
the same pure-Python loop took anywhere from 0.46 s to 0.87 s within one afternoon), so a change
worth a few percent cannot be seen in them. Instruction counts do not move. Each figure is the
difference between a run of ``1 + N`` operations and a run of ``1`` divided by ``N``, so start-up,
imports and warm-up cancel out.

What is counted, per render of bench_ejs.py's template and variables:

* ``jinja2``: one cached render by Jinja2's ``SandboxedEnvironment`` (the peer);
* ``host``: what ``tavernbox.render_template`` costs in the caller's process (encoding the input,
  the pool, the pipe, decoding the reply); the worker's work is in another process;
* ``worker``: a sandbox worker's whole share, driven in this process: building the fresh context,
  the render itself and freeing the used context;
* ``fresh``: building and freeing a fresh context alone;
* ``floor``: bench_ejs.py's floor for the tiny template (a bare context with the limits, the
  compiled program, its input, a drop), and ``tiny-host``/``tiny-worker`` tavernbox's host and
  worker shares for the same template (issue 13's target: tavernbox <= 2x the floor);
  ``tiny-batch-host``: the host's share per render of a ``render_templates`` batch of 50 tiny
  renders (a batch should cost less per render than singles; the workers do the same work).

Run: ``python benchmarks/instructions_ejs.py [--renders N]`` (needs ``valgrind``; about a minute).
The ratio ``(host + worker) / jinja2`` is the work one render costs against the peer's; the
benchmark's batch target of 1.5x on two cores needs it at 3.0 or less even with perfect scaling.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KINDS = ("jinja2", "host", "worker", "fresh", "floor", "tiny-host", "tiny-worker", "tiny-batch-host")
#: Renders per batch of the ``tiny-batch-host`` kind (its count is per render).
BATCH = 50


def _inner(kind: str, count: int) -> None:
    """Do ``count`` operations of ``kind`` after a warm-up (run under callgrind)."""
    sys.path.insert(0, str(HERE))
    import bench_ejs

    variables = bench_ejs.make_variables()
    if kind == "jinja2":
        from jinja2.sandbox import SandboxedEnvironment

        template = SandboxedEnvironment(autoescape=True, keep_trailing_newline=True).from_string(bench_ejs.JINJA_TEMPLATE)
        for _ in range(3 + count):
            template.render(variables=variables)
        return
    import tavernbox
    import tavernbox.sandbox

    if kind == "floor":
        program = tavernbox.ejs.render.compile_source(bench_ejs.TINY_TEMPLATE).program
        input_json = json.dumps(bench_ejs.TINY_VARIABLES)
        for _ in range(3 + count):
            bench_ejs.floor_render(program, input_json, time_limit_s=20.0)
        return
    if kind == "tiny-host":
        limits = tavernbox.sandbox.Limits(time_ms=20000)
        for _ in range(5 + count):
            tavernbox.render_template(bench_ejs.TINY_TEMPLATE, bench_ejs.TINY_VARIABLES, limits=limits)
        return
    if kind == "tiny-batch-host":
        limits = tavernbox.sandbox.Limits(time_ms=20000)
        items = [(bench_ejs.TINY_TEMPLATE, bench_ejs.TINY_VARIABLES)] * BATCH
        for _ in range(2 + count):
            tavernbox.render_templates(items, limits=limits)
        return
    if kind == "host":
        limits = tavernbox.sandbox.Limits(time_ms=20000)
        for _ in range(5 + count):
            tavernbox.render_template(bench_ejs.EJS_TEMPLATE, variables, limits=limits)
        return
    # Callgrind runs code ~50x slower: a render's 75 ms budget would trip (instructions per
    # successful render do not depend on the budget).
    if kind == "tiny-worker":
        worker, payload, wire = bench_ejs.in_process_worker(tavernbox.sandbox.Limits(time_ms=20000),
                                                            bench_ejs.TINY_TEMPLATE, bench_ejs.TINY_VARIABLES)
        kind = "worker"
    else:
        worker, payload, wire = bench_ejs.in_process_worker(tavernbox.sandbox.Limits(time_ms=20000))

    def cycle() -> None:
        worker.prewarm()
        reply = worker.render(bench_ejs.Quiet(), 1, wire, payload)
        assert b'"ok":true' in reply
        worker.retired = None

    for _ in range(3):
        cycle()
    for _ in range(count):
        if kind == "worker":
            cycle()
        else:
            worker.spare = None
            worker.prewarm()


def _count(kind: str, count: int) -> int:
    """Instructions callgrind collects for an inner run of ``count`` operations."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--inner", kind, str(count)],
        capture_output=True, text=True, check=False,
    )
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run for {kind} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def measure(renders: int) -> dict[str, Any]:
    """Instructions per operation of every kind (two callgrind runs each, two at a time)."""
    runs = [(kind, n) for kind in KINDS for n in (1, 1 + renders)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        totals = dict(zip(runs, pool.map(lambda run: _count(*run), runs)))
    per = {kind: (totals[(kind, 1 + renders)] - totals[(kind, 1)]) / renders for kind in KINDS}
    per["tiny-batch-host"] /= BATCH  # a count of that kind is one batch
    per["total"] = per["host"] + per["worker"]
    per["ratio_total_to_jinja2"] = per["total"] / per["jinja2"]
    per["ratio_worker_render_and_host_to_jinja2"] = (per["total"] - per["fresh"]) / per["jinja2"]
    per["tiny_total"] = per["tiny-host"] + per["tiny-worker"]
    per["ratio_tiny_to_floor"] = per["tiny_total"] / per["floor"]
    per["renders"] = renders
    return per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=40, help="operations counted per kind (default 40)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--inner", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _inner(args.inner[0], int(args.inner[1]))
        return 0
    if args.renders < 1:
        parser.error("--renders must be at least 1")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing to count", file=sys.stderr)
        return 2
    figures = measure(args.renders)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for kind in KINDS:
        print(f"{kind:7s}: {figures[kind] / 1e6:6.2f} M instructions per render")
    print(f"host + worker = {figures['total'] / 1e6:.2f} M = {figures['ratio_total_to_jinja2']:.2f}x jinja2; "
          f"without the fresh context's build and free: {figures['ratio_worker_render_and_host_to_jinja2']:.2f}x")
    print(f"tiny template in a batch of {BATCH}: host {figures['tiny-batch-host'] / 1e6:.3f} M per render against "
          f"{figures['tiny-host'] / 1e6:.3f} M for a single render (the worker's share is the same render for render)")
    print(f"tiny template: host + worker = {figures['tiny_total'] / 1e6:.2f} M = {figures['ratio_tiny_to_floor']:.2f}x "
          f"the floor ({figures['floor'] / 1e6:.2f} M: a bare context, the program, its input, a drop)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
