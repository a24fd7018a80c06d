"""Test support for the EJS suites: the node oracle client and a render backend.

``Oracle`` keeps ONE node process (tests/oracle/render.js) alive for a whole test module and
talks to it line by line, so hundreds of differential cases cost one node start-up.

``render`` is ``tavernbox.render_template``. While the sandbox package does not provide
``run_program`` yet, it falls back to a minimal in-process QuickJS harness that implements the
same three hooks (``append``, ``escape``, ``locals``) the real harness gives the program; it is
test-only, and goes away by itself as soon as the sandbox lands.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
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


# --- render backend ------------------------------------------------------------------------------

_INPROCESS_HARNESS = r"""
var __out = "";
var __state = {done: false, err: null};
var __tb = Object.freeze({
  append: function (v) { if (v !== undefined && v !== null) __out += v; },
  escape: function (v) {
    return v == undefined ? "" : String(v).replace(/[&<>'"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&#34;", "'": "&#39;"}[c];
    });
  },
  locals: Object.freeze({variables: __input}),
});
function __run(fn) {
  fn(__tb).then(function () { __state.done = true; }, function (e) {
    __state.done = true;
    __state.err = [String(e && e.name), String(e && e.message), String(e && e.stack)];
  });
}
function __result() { return JSON.stringify([__state.done, __state.err, __out]); }
"""
_POSITION = re.compile(r"<input>:(\d+):(\d+)")


@dataclass
class _InprocessUsage:
    time_ms: float = 0.0
    memory_bytes: int = 0
    output_bytes: int = 0
    passes: int = 1
    job_steps: int = 0


@dataclass
class _InprocessResult:
    text: str
    usage: _InprocessUsage


class _InprocessError(Exception):
    """Shaped like the sandbox's ``SandboxError``: code, message, js_line, js_column."""

    def __init__(self, message: str, code: str, js_line: int | None, js_column: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.js_line = js_line
        self.js_column = js_column


def _inprocess_run_program(program: str, input_json: str, **_: Any) -> _InprocessResult:
    import quickjs

    from tavernbox.errors import TemplateError

    ctx = quickjs.Context()
    ctx.set_time_limit(2)
    ctx.eval("var __input = " + input_json + ";")
    ctx.eval(_INPROCESS_HARNESS)
    try:
        fn = ctx.eval(program)
    except quickjs.JSException as exc:
        m = _POSITION.search(str(exc))
        raise TemplateError(str(exc).split("\n", 1)[0], code="TEMPLATE_SYNTAX",
                            line=int(m.group(1)) if m else None) from _annotate(exc, m)
    ctx.get("__run")(fn)
    while ctx.execute_pending_job():
        pass
    done, err, out = json.loads(ctx.eval("__result()"))
    if err is not None:
        m = _POSITION.search(err[2])
        exc = _InprocessError(f"{err[0]}: {err[1]}", "TEMPLATE_EXECUTION_FAILED",
                              int(m.group(1)) if m else None, int(m.group(2)) if m else None)
        raise TemplateError(exc.message, code=exc.code) from _annotate(exc, m)
    if not done:
        raise TemplateError("unsettled", code="TEMPLATE_UNSETTLED")
    return _InprocessResult(out, _InprocessUsage(output_bytes=len(out.encode("utf-8", "surrogatepass"))))


def _annotate(exc: BaseException, m: re.Match[str] | None) -> BaseException:
    exc.js_line = int(m.group(1)) if m else None  # type: ignore[attr-defined]
    exc.js_column = int(m.group(2)) if m else None  # type: ignore[attr-defined]
    return exc


def sandbox_ready() -> bool:
    import tavernbox.sandbox as sb

    return hasattr(sb, "run_program") and hasattr(sb, "Limits")


def render(template: str, variables: Any = None) -> tuple[str | None, Any]:
    """``(text, None)`` or ``(None, error)`` from tavernbox's renderer."""
    from tavernbox.errors import TemplateError

    if sandbox_ready():
        from tavernbox import render_template

        try:
            return render_template(template, variables).text, None
        except TemplateError as exc:
            return None, exc
    return _render_inprocess(template, variables)


def _render_inprocess(template: str, variables: Any) -> tuple[str | None, Any]:
    from tavernbox.ejs.render import _relocate, compile_source
    from tavernbox.errors import TemplateError

    try:
        compiled = compile_source(template)
    except TemplateError as exc:
        return None, exc
    try:
        result = _inprocess_run_program(compiled.program, json.dumps(variables, ensure_ascii=True))
    except TemplateError as exc:
        cause = exc.__cause__
        exc.js_line = getattr(cause, "js_line", None)  # type: ignore[attr-defined]
        exc.js_column = getattr(cause, "js_column", None)  # type: ignore[attr-defined]
        return None, _relocate(exc, compiled)
    return result.text, None
