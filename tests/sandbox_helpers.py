"""Shared helpers for the sandbox tests: program builders and a timed runner."""

from __future__ import annotations

import json
import time
from typing import Any

from tavernbox.sandbox import Limits, SandboxError, SandboxResult, run_program

PRELUDE = "const append = __tb.append, escape = __tb.escape, variables = __tb.locals.variables;\n"


def prog(body: str) -> str:
    """A program in the compiler's format whose body may use append/escape/variables."""
    return "(async function (__tb) {\n" + PRELUDE + body + "\n})"


def render(body: str, variables: Any = None, *, limits: Limits | None = None, raw: bool = False) -> SandboxResult:
    """Run ``body`` (or a whole program when ``raw``) and return the result."""
    program = body if raw else prog(body)
    return run_program(program, json.dumps(variables), limits=limits)


def outcome(body: str, variables: Any = None, *, limits: Limits | None = None, raw: bool = False) -> tuple[str, Any, float]:
    """(code or 'OK', text or error, wall seconds) of one render."""
    start = time.monotonic()
    try:
        result = render(body, variables, limits=limits, raw=raw)
    except SandboxError as exc:
        return exc.code, exc, time.monotonic() - start
    return "OK", result, time.monotonic() - start
