"""Load on ``tavernbox serve``: concurrent ``/v1/assemble`` requests, then the same with hostile templates.

Issue 15's figures: 200 concurrent ``/v1/assemble`` requests for a corpus preset hold with no
error (requests per second, p50/p99 latency), and the same with 10% hostile templates mixed in
(``/v1/render`` of a template that never ends, so each one runs to its time budget); the hostile
ones must not raise the others' p99 by more than 2x.

The service runs as a real process (``tavernbox serve --port 0``, SQLite in a temporary folder)
and every request goes over loopback; nothing else is contacted. The preset, card, book and chat
are stored in the library once and named by ref, as a real client would. The floor, measured in
the same run, is the same assembly called in-process (``assemble_request``) one after another:
``service_vs_floor`` is the service's throughput over that serial in-process throughput.

Bounded: ``--requests`` (default 200, at most 1000) per phase, a 120 s timeout per request.
Run: ``python benchmarks/bench_service.py [--requests N] [--preset PATH] [--workers N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
DEFAULT_PRESET = CORPORA / "presets" / "prolix-storyweaver-v1.1.json"
HOSTILE = "<% while (true) {} %>"
TOKEN = "bench-token"


def sample_parts() -> dict[str, Any]:
    """The bundled sample request's card, book and chat (documented JSON chat form), user and options."""
    from tavernbox.assets.chats import parse_chat_text

    request = json.loads((ROOT / "corpora" / "sample-request.json").read_text(encoding="utf-8"))
    chat = parse_chat_text((ROOT / "corpora" / "sample-chat.jsonl").read_text(encoding="utf-8"), hint="chat.jsonl")
    request["chat"] = {"messages": [{k: v for k, v in m.to_dict().items() if k in ("role", "content", "name")}
                                    for m in chat.messages]}
    request["card"] = json.loads((ROOT / "corpora" / "sample-card.json").read_text(encoding="utf-8"))
    request["books"] = [json.loads((ROOT / "corpora" / "sample-book.json").read_text(encoding="utf-8"))]
    return request


def start_service(folder: str, workers: int = 1) -> tuple[subprocess.Popen[str], str]:
    """``tavernbox serve --port 0`` on a database in ``folder``; returns the process and its URL."""
    env = dict(os.environ, TAVERNBOX_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "tavernbox.cli.main", "serve", "--port", "0", "--database",
                             str(Path(folder) / "bench.db"), "--workers", str(workers)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"the service did not start: {line!r}")
    base = match.group(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the service never answered /healthz")


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def phase(base: str, assemble_body: dict[str, Any], count: int, hostile_every: int | None) -> dict[str, Any]:
    """Fire ``count`` requests at once; every ``hostile_every``-th is a hostile render."""
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, limits=limits,
                                 timeout=120) as client:
        async def one(i: int) -> tuple[str, float, int, str | None]:
            hostile = hostile_every is not None and i % hostile_every == hostile_every - 1
            started = time.perf_counter()
            if hostile:
                answer = await client.post("/v1/render", json={"template": HOSTILE})
            else:
                answer = await client.post("/v1/assemble", json=assemble_body)
            elapsed = time.perf_counter() - started
            code = None
            if answer.status_code != 200:
                try:
                    code = answer.json().get("error", {}).get("code")
                except ValueError:
                    code = f"HTTP {answer.status_code}"
            return ("hostile" if hostile else "assemble"), elapsed, answer.status_code, code

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(count)))
        wall = time.perf_counter() - started
    normal = [r[1] for r in results if r[0] == "assemble"]
    errors = [r for r in results if r[0] == "assemble" and r[2] != 200]
    hostile = [r for r in results if r[0] == "hostile"]
    return {
        "requests": count,
        "assemble_requests": len(normal),
        "hostile_requests": len(hostile),
        "assemble_errors": len(errors),
        "assemble_error_codes": sorted({str(r[3]) for r in errors}),
        "hostile_refused_by_budget": sum(1 for r in hostile if r[3] == "TEMPLATE_TIME_LIMIT"),
        "wall_s": round(wall, 3),
        "rps": round(count / wall, 1),
        "p50_ms": round(percentile(normal, 0.50) * 1000, 1),
        "p99_ms": round(percentile(normal, 0.99) * 1000, 1),
        "hostile_p50_ms": round(percentile([r[1] for r in hostile], 0.5) * 1000, 1) if hostile else None,
    }


def floor(request: dict[str, Any], repeat: int) -> float:
    """Median seconds of one in-process assembly of the same request (after a warm-up)."""
    from tavernbox.sillytavern.assemble import assemble_request

    assemble_request(request)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        assemble_request(request)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per phase (1-1000)")
    parser.add_argument("--preset", type=Path, default=DEFAULT_PRESET, help="a SillyTavern chat-completion preset")
    parser.add_argument("--workers", type=int, default=1, help="service processes (tavernbox serve --workers)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not 10 <= args.requests <= 1000:
        parser.error("--requests is 10 to 1000 (the load stays bounded)")
    if not 1 <= args.workers <= 8:
        parser.error("--workers is 1 to 8")
    preset_path = args.preset if args.preset.exists() else ROOT / "corpora" / "sample-preset.json"
    preset = json.loads(preset_path.read_text(encoding="utf-8"))
    parts = sample_parts()
    inline = {**parts, "preset": preset}
    by_ref = {**parts, "preset": {"ref": "presets/bench"}, "card": {"ref": "cards/bench"},
              "books": [{"ref": "books/bench"}], "chat": {"ref": "chats/bench"}}
    floor_s = floor(inline, 5)
    with tempfile.TemporaryDirectory(prefix="tavernbox-bench-") as folder:
        proc, base = start_service(folder, args.workers)
        try:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as client:
                for kind, value in (("presets", preset), ("cards", parts["card"]), ("books", parts["books"][0]),
                                    ("chats", parts["chat"])):
                    client.put(f"/v1/library/{kind}/bench", json=value).raise_for_status()
                for _ in range(5):  # warm: imports, sandbox workers, caches
                    client.post("/v1/assemble", json=by_ref).raise_for_status()
                    client.post("/v1/render", json={"template": "<%= 1 %>"}).raise_for_status()
            clean = asyncio.run(phase(base, by_ref, args.requests, None))
            mixed = asyncio.run(phase(base, by_ref, args.requests, 10))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    figures = {
        "preset": preset_path.name,
        "workers": args.workers,
        "floor_in_process_ms": round(floor_s * 1000, 1),
        "clean": clean,
        "hostile_10pct": mixed,
        "p99_ratio_hostile_vs_clean": round(mixed["p99_ms"] / clean["p99_ms"], 2),
        "service_vs_floor": round(clean["rps"] * floor_s, 2),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"preset {figures['preset']}, {args.workers} service process(es); in-process assembly (floor) {figures['floor_in_process_ms']} ms")
        for label, f in (("clean", clean), ("10% hostile", mixed)):
            print(f"{label:>12}: {f['requests']} concurrent, {f['assemble_errors']} errors, {f['rps']} req/s, "
                  f"p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms"
                  + (f", hostile refused by budget {f['hostile_refused_by_budget']}/{f['hostile_requests']}"
                     if f["hostile_requests"] else ""))
        print(f"p99 ratio hostile/clean {figures['p99_ratio_hostile_vs_clean']} (target <= 2); service throughput "
              f"{figures['service_vs_floor']}x the serial in-process floor")
    return 0 if clean["assemble_errors"] == 0 and mixed["assemble_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
