"""Test support for the EJS suites: the node oracle client and a text-or-error render helper.

``Oracle`` keeps ONE node process (tests/oracle/render.js) alive for a whole test module and
talks to it line by line, so hundreds of differential cases cost one node start-up.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORACLE_DIR = ROOT / "tests" / "oracle"
ORACLE_SCRIPT = ORACLE_DIR / "render.js"


def oracle_available() -> bool:
    return shutil.which("node") is not None and (ORACLE_DIR / "node_modules" / "ejs").is_dir()


class Oracle:
    """A persistent ``node tests/oracle/render.js`` process: one JSON line in, one out."""

    def __init__(self) -> None:
        if not oracle_available():  # pragma: no cover - CI installs both
            pytest.fail("the ejs oracle needs node and `npm ci --prefix tests/oracle`")
        self.proc = subprocess.Popen(
            ["node", str(ORACLE_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )

    def render(self, template: str, variables: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"template": template, "variables": variables}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the node oracle exited")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()


def render(template: str, variables: Any = None, dialect: str = "ejs") -> tuple[str | None, Any]:
    """``(text, None)`` or ``(None, error)`` from ``tavernbox.render_template`` (the real sandbox).

    Plain ejs by default: what the differential and golden tests compare with the real ``ejs``.
    """
    from tavernbox import render_template
    from tavernbox.errors import TemplateError

    try:
        return render_template(template, variables, dialect=dialect).text, None
    except TemplateError as exc:
        return None, exc
