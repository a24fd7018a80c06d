"""Corpus sweep: `tavernbox assemble` (default strategy) over every corpus preset x every corpus card.

Records stdout, stderr and the exit code of each run, plain and with --json, with the bundled chat
(`corpora/sample-chat.jsonl`), and the bundled requests through every generation type, post-processing
and target, into one directory, so that two sweeps (before and after a change) can be
diffed file by file:

    python benchmarks/sweep_assemble.py OUT_DIR [--shared ../shared] [--jobs 2] [--match TEXT]
    diff -r BEFORE_DIR AFTER_DIR

Each run is a fresh `tavernbox` process, as a user's shell would start it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _runs(shared: Path) -> list[tuple[str, list[str]]]:
    presets = sorted((shared / "corpora" / "presets").glob("*.json"))
    cards = sorted((shared / "corpora" / "cards").glob("*.json"))
    chat = ROOT / "corpora" / "sample-chat.jsonl"
    runs = []
    for preset in presets:
        for card in cards:
            base = ["assemble", "--preset", str(preset), "--card", str(card), "--chat", str(chat)]
            name = f"{preset.stem}__{card.stem}"
            runs.append((name + ".plain", base))
            runs.append((name + ".json", [*base, "--json"]))
    # the bundled requests through every generation type, post-processing and target
    for request in ("sample-request", "sample-group-request"):
        base = ["assemble", "--request", str(ROOT / "corpora" / f"{request}.json")]
        variants = [[f"--generation={g}"] for g in ("normal", "continue", "impersonate", "regenerate", "swipe")]
        variants += [["--generation=quiet", "--quiet-prompt=Summarize {{char}}."]]
        variants += [[f"--post-processing={p}"] for p in ("merge", "semi", "strict", "single")]
        variants += [[f"--target={t}"] for t in ("claude", "google")] + [["--preview"], ["--max-context=600"]]
        for variant in variants:
            name = request + "".join(variant).replace("--", "_").replace("=", "-").replace(" ", "")[:60]
            runs.append((name + ".plain", [*base, *variant]))
            runs.append((name + ".json", [*base, *variant, "--json"]))
    return runs


def _record(out: Path, name: str, args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from tavernbox.cli.launch import run; run()", *args],
        capture_output=True, cwd=ROOT, timeout=600,
    )
    text = b"exit %d\n--- stdout\n" % done.returncode + done.stdout + b"\n--- stderr\n" + done.stderr
    (out / name).write_bytes(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--match", default="", help="only the runs whose name holds this text")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = [run for run in _runs(args.shared) if args.match in run[0]]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda run: _record(args.out, *run), runs))
    print(f"{len(runs)} runs recorded in {args.out}")


if __name__ == "__main__":
    main()
