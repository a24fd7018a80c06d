"""Test support for the Handlebars suites: the node oracle (the real handlebars 4.7.10) and a
render helper with SillyTavern's environment as the oracle mirrors it.

``HandlebarsOracle.render_many`` sends a whole batch through one node process and reads the
answers in order (tests/oracle/handlebars.js answers line by line).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORACLE_DIR = ROOT / "tests" / "oracle"


def oracle_available() -> bool:
    return shutil.which("node") is not None and (ORACLE_DIR / "node_modules" / "handlebars").is_dir()


def require_oracle() -> None:
    if not oracle_available():
        message = "the Handlebars oracle needs node and `npm ci --prefix tests/oracle`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def oracle_render_many(cases: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The oracle's answer for each ``(template, data)``: ``{"text"}`` or ``{"error": {"kind"}}``."""
    require_oracle()
    payload = "".join(json.dumps({"template": t, "data": d}) + "\n" for t, d in cases)
    done = subprocess.run(["node", str(ORACLE_DIR / "handlebars.js")], input=payload, capture_output=True,
                          text=True, encoding="utf-8", timeout=600, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(cases), done.stderr[-2000:]
    return answers


def st_settings() -> Any:
    """The environment the oracle renders in: SillyTavern's ``trim`` helper, and a helperMissing
    that answers ``<name>`` (SillyTavern's runs its macros over ``{{name}}``)."""
    from tavernbox.handlebars import RenderSettings

    return RenderSettings(helpers={"trim": lambda params, options: "{{trim}}"}, missing=lambda name: f"<{name}>")


def ours(template: str, data: Any) -> dict[str, Any]:
    """Our answer in the oracle's shape, the error's code in place of its kind."""
    from tavernbox.errors import TemplateError
    from tavernbox.handlebars import compile_template

    try:
        return {"text": compile_template(template).render(data, st_settings())}
    except TemplateError as exc:
        return {"error": {"code": exc.code, "message": exc.message, "line": exc.line, "column": exc.column}}


EXPECTED_CODES = {
    "syntax": {"HANDLEBARS_SYNTAX", "HANDLEBARS_UNSUPPORTED"},
    "compile": {"HANDLEBARS_SYNTAX", "HANDLEBARS_UNSUPPORTED"},
    "runtime": {"HANDLEBARS_RUNTIME"},
}


def disagreement(template: str, data: Any, theirs: dict[str, Any]) -> str | None:
    """``None`` when we agree with the oracle (same text, or both failed the same way)."""
    mine = ours(template, data)
    if "text" in theirs:
        if mine.get("text") == theirs["text"]:
            return None
        return f"handlebars gave {theirs['text']!r}, we gave {mine!r}"
    if "error" in mine and mine["error"]["code"] in EXPECTED_CODES[theirs["error"]["kind"]]:
        return None
    return f"handlebars failed ({theirs['error']}), we gave {mine!r}"
