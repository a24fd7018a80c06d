"""Shared helpers for the sandbox tests: program builders and a timed runner."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
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


#: the worker module's source, loaded directly (in-process) by the fast-path tests
WORKER_PATH = Path(__file__).resolve().parents[1] / "sandbox" / "worker.py"
#: the limits dict a worker receives with each job, as the pool sends it
WORKER_LIMITS = {"time_ms": 75, "job_steps": 1000, "output_bytes": 4096, "memory_bytes": 16 << 20, "stack_bytes": 256 << 10}


def load_worker(name: str) -> ModuleType:
    """A private copy of ``sandbox/worker.py`` imported under ``name`` (its caches are its own)."""
    spec = importlib.util.spec_from_file_location(name, WORKER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class QuietChannel:
    """A worker's host channel that never asks to cancel."""

    def cancel_requested(self, render_id: int) -> bool:
        return False


def worker_reply(worker: ModuleType, program: str, variables: Any = None, *, keep_time: bool = False) -> dict[str, Any]:
    """One job through a loaded worker module's ``render``, as JSON, without the usage figures
    that vary from run to run (time unless ``keep_time``, memory)."""
    payload = "[" + json.dumps(program) + ",[\n" + json.dumps(variables) + "\n]]"
    raw = worker.render(QuietChannel(), 1, WORKER_LIMITS, payload)
    worker.retired = None
    reply = json.loads(raw)
    if not keep_time:
        reply["usage"].pop("time_ms")
    reply["usage"].pop("memory_bytes")
    return reply
