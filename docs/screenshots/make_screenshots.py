"""Regenerate the playground screenshots in docs/screenshots/ (one per mode, and the diff).

    python docs/screenshots/make_screenshots.py [--chromium /usr/bin/chromium]

Starts a real ``tavernbox serve`` on a free loopback port with a throwaway database, opens the
playground in headless Chromium (Debian's package through Playwright's ``executable_path``; no
browser is downloaded), loads each mode's example, selects one part of the output so the
provenance panel and the source highlight show, and writes ``playground-<mode>.png``.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: mode -> the output part to select (a CSS selector in the output) before the shot
SELECT = {
    "macros": "[data-testid=output] .piece-variable >> nth=0",
    "ejs": "[data-testid=output] .piece-ejs_output >> nth=1",
    "worldinfo": "[data-testid=trace] tr[data-uid='2']",
    "assemble": "[data-testid=output] .piece-world_info >> nth=0",
}


def wait_runs(page: object, at_least: int) -> None:
    page.wait_for_function("n => Number(document.body.dataset.runs || 0) >= n", arg=at_least,  # type: ignore[attr-defined]
                           timeout=60_000)


def runs(page: object) -> int:
    return int(page.evaluate("Number(document.body.dataset.runs || 0)"))  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", default=str(HERE))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tavernbox-shots-"))
    token = secrets.token_urlsafe(16)
    env = {**os.environ, "TAVERNBOX_TOKEN": token}
    serve = subprocess.Popen([sys.executable, "-m", "tavernbox.cli.main", "serve", "--port", "0", "--database",
                              str(work / "shots.db")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env)
    try:
        assert serve.stdout is not None
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", serve.stdout.readline())
        if match is None:
            print("the service did not start", file=sys.stderr)
            return 1
        base = match.group(1)
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(work / "profile"), executable_path=args.chromium, headless=True, args=FLAGS,
                viewport={"width": 1400, "height": 1050})
            page = context.new_page()
            page.goto(f"{base}/?token={token}")
            wait_runs(page, 1)
            for mode, selector in SELECT.items():
                before = runs(page)
                if page.input_value("[data-testid=mode]") != mode:
                    page.select_option("[data-testid=mode]", mode)
                    wait_runs(page, before + 1)
                page.hover(selector)
                page.screenshot(path=str(out / f"playground-{mode}.png"))
                print("wrote", out / f"playground-{mode}.png")
            # the diff: pin the assembled request, then send a new message
            page.click("[data-testid=pin]")
            before = runs(page)
            page.fill("[data-testid=source]", "Tell me about the lamp.")
            page.click("[data-testid=run]")
            wait_runs(page, before + 1)
            page.locator("[data-testid=diff]").scroll_into_view_if_needed()
            page.locator(".results").screenshot(path=str(out / "playground-diff.png"))
            print("wrote", out / "playground-diff.png")
            context.close()
    finally:
        serve.terminate()
        serve.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
