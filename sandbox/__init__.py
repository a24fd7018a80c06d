"""The budgeted QuickJS sandbox: run one compiled template program on untrusted data.

``run_program(program, input_json)`` evaluates ``program`` (JavaScript whose value is an async
function of one argument, ``(async function (__tb) { ... })``) in a fresh QuickJS context
inside a pooled worker process, calls it with the harness object ``__tb`` (``append``,
``escape``, ``locals.variables``) and returns the output text and what the render used. Every
budget of ``Limits`` is enforced; a failure raises ``SandboxError`` with a stable code.

Nothing but JSON text crosses the boundary: the program and the input go in as ASCII JSON, the
output comes back as JSON built by the harness, so NULs, lone surrogates and large integers
survive exactly. See harness.js, worker.py and pool.py for the why of each layer.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from .limits import PROGRAM_CHARS_FACTOR, Limits
from .pool import WorkerPool, default_pool
from .result import CancelToken, SandboxError, SandboxResult, Usage

__all__ = [
    "CancelToken",
    "Limits",
    "SandboxError",
    "SandboxResult",
    "Usage",
    "WorkerPool",
    "build_payload",
    "run_program",
    "run_programs",
]

DEFAULT_LIMITS = Limits()
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return "\\u%04x" % code
    code -= 0x10000
    return "\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _ascii_json(text: str) -> str:
    """``text`` with every non-ASCII character written as a JSON ``\\u`` escape.

    Outside string literals a non-ASCII character is invalid JSON either way, so this changes
    no valid document's meaning, and it lets lone surrogates cross as escapes (the binding
    cannot take them as raw characters).
    """
    return text if text.isascii() else _NON_ASCII.sub(_escape_char, text)


def clock_ms(now_ms: int | float | None) -> int:
    """The render clock as whole milliseconds since the epoch (the host's clock for ``None``)."""
    if now_ms is None:
        return int(time.time() * 1000)
    if isinstance(now_ms, bool) or not isinstance(now_ms, (int, float)) or not abs(now_ms) <= 8.64e15:
        raise SandboxError(f"the render clock must be milliseconds within JavaScript's date range, got {now_ms!r}",
                           code="INPUT_INVALID")
    return int(now_ms // 1)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@functools.lru_cache(maxsize=256)
def _program_json(program: str) -> str:
    """The program as an ASCII JSON string literal (compiled templates are reused, so cache it)."""
    return json.dumps(program)


def build_payload(
    program: str,
    input_json: str,
    limits: Limits,
    *,
    bridge: tuple[str, int] | None = None,
    template_api: bool = False,
    now_ms: int | None = None,
) -> str:
    """The worker's request payload ``[program, [variables], mode, now]`` (see harness.js ``prepare``).

    Public for the benchmarks, which drive a worker in-process with exactly what ``run_program`` sends.
    """
    if input_json.strip() == "":
        raise SandboxError("the input is not valid JSON: it is empty", code="INPUT_INVALID")
    # [program, [variables]]: the harness checks that the caller's text was exactly one value.
    payload = "[" + _program_json(program) + ",[\n" + _ascii_json(input_json) + "\n]"
    if bridge is not None:
        answers_json, call_limit = bridge
        payload += ",[" + _ascii_json(answers_json) + "," + str(int(call_limit)) + "]"
    elif template_api:
        payload += "," + str(int(limits.bridge_calls))
    else:
        payload += ",null"
    return payload + "," + str(clock_ms(now_ms)) + "]"


def _check(program: str, input_json: str, lim: Limits) -> None:
    """Refuse a program or input over its limit before any worker is involved."""
    if not isinstance(program, str) or not isinstance(input_json, str):
        raise TypeError("run_program takes the program and the input JSON as str")
    max_program = lim.template_chars * PROGRAM_CHARS_FACTOR
    if len(program) > max_program:
        raise SandboxError(
            f"the program is {len(program)} characters, more than the limit of {max_program}",
            code="TEMPLATE_TOO_LARGE",
        )
    # A code point is at most 4 UTF-8 bytes: only inputs near the limit need encoding to measure.
    if len(input_json) > lim.input_bytes or (
        4 * len(input_json) > lim.input_bytes and _utf8_size(input_json) > lim.input_bytes
    ):
        raise SandboxError(
            f"the input is larger than the limit of {lim.input_bytes} bytes", code="TEMPLATE_INPUT_LIMIT"
        )


def run_program(
    program: str,
    input_json: str,
    *,
    limits: Limits | None = None,
    cancel: CancelToken | None = None,
    pool: WorkerPool | None = None,
    bridge: tuple[str, int] | None = None,
    lease_check: Callable[[int], tuple[str, str] | None] | None = None,
    template_api: bool = False,
    now_ms: int | None = None,
    template_cache: bool = False,
) -> SandboxResult:
    """Render ``program`` with ``input_json`` as ``__tb.locals.variables``.

    ``template_api`` installs the ST-Prompt-Template API without the bridge (the static API of a
    plain render): ``getvar`` and ``_`` read ``input_json``'s value, ``getwi``/``getpreset``/
    ``getchar`` answer as for an unknown title (nothing else was given), the writes fail with
    ``TEMPLATE_UNSUPPORTED``, and calls count against ``Limits.bridge_calls`` as in bridge mode.

    ``now_ms`` is the render's clock (milliseconds since the epoch, UTC): ``Date.now()``, ``new
    Date()`` and ``Date()`` read it and nothing else, so a render replays exactly. ``None`` takes
    the host's clock once, when the render is sent.

    ``bridge`` switches on the template API (``getvar``, ``getwi``, ... in ``__tb.locals``, see
    harness.js): ``(answers_json, call_limit)`` where ``answers_json`` is a JSON object mapping
    canonical request keys to already-authorised answers. ``input_json`` is then ignored by the
    harness (variables come through the bridge). A pass that misses a lookup returns a result
    whose ``pending`` names the request (see ``tavernbox.bridge``, which drives the replays).

    ``lease_check`` (bridge mode only) is called in this process after every pending-job step of
    the pass, with the step number: ``None`` lets the pass continue, ``(code, message)`` stops it
    and the render fails with that code (the bridge's stale leases). Pass it only when leases
    are held: each call is a pipe round trip, and without it the worker never asks.

    ``template_cache``: the program may call ``__tbTemplate(source, line)`` for what ``(0,
    eval)("\\n".repeat(line - 1) + source)`` gives, from the worker's bytecode of that text (see
    ``worker.TemplateCache``; the program must take and delete that global before running
    anything else, and define the data property ``__tbTemplateValue`` the answer arrives in).

    Raises ``SandboxError`` (a ``TemplateError``) with one of the ``TEMPLATE_*`` codes, or
    ``INPUT_INVALID`` when ``input_json`` is not JSON.
    """
    lim = limits if limits is not None else DEFAULT_LIMITS
    _check(program, input_json, lim)
    payload = build_payload(program, input_json, lim, bridge=bridge, template_api=template_api, now_ms=now_ms)
    target = pool or default_pool()
    if bridge is not None and lease_check is not None:
        reply = target.run(payload.encode("ascii"), lim, cancel, lease_check=lease_check)
    elif template_cache:
        reply = target.run(payload.encode("ascii"), lim, cancel, templates=True)
    else:
        reply = target.run(payload.encode("ascii"), lim, cancel)
    return _result(reply)


def _result(reply: dict[str, Any]) -> SandboxResult:
    """A worker's decoded reply as the result, or its ``SandboxError`` raised."""
    usage = Usage(**reply["usage"])
    error: dict[str, Any] | None = reply.get("error")
    if error is not None:
        raise SandboxError(
            error["message"],
            code=error["code"],
            js_line=error.get("line"),
            js_column=error.get("column"),
            js_name=error.get("name"),
            js_message=error.get("js_message"),
            usage=usage,
            js_stack=error.get("stack"),
            js_template=error.get("template"),
        )
    result = reply["result"]
    if result.get("pending") is not None:
        line, column = int(result.get("line") or 0), int(result.get("column") or 0)
        return SandboxResult(text="", usage=usage, pending=str(result["pending"]),
                             pending_at=(line, column) if line > 0 else None)
    return SandboxResult(text=result["text"], usage=usage)


def run_programs(
    jobs: Sequence[tuple[str, str]],
    *,
    limits: Limits | None = None,
    cancel: CancelToken | None = None,
    pool: WorkerPool | None = None,
    template_api: bool = False,
    now_ms: int | None = None,
) -> list[SandboxResult | SandboxError]:
    """Run ``(program, input_json)`` jobs on all of the pool's workers at once; results in order.

    Why: a batch sent one render at a time leaves every worker but one idle while the caller
    waits for each round trip; ``WorkerPool.run_many`` keeps every worker's next request queued
    from one thread. Each job is exactly a ``run_program`` call (same limits, fresh context, same
    errors, its own deadline); a failed job's slot holds its ``SandboxError`` instead of raising,
    so one bad template does not lose the batch. ``template_api`` and ``now_ms`` as in ``run_program``, for every job.
    """
    target = pool or default_pool()
    lim = limits if limits is not None else DEFAULT_LIMITS
    now = clock_ms(now_ms)  # one clock for the whole batch
    results: list[SandboxResult | SandboxError | None] = [None] * len(jobs)
    payloads: list[bytes] = []
    slots: list[int] = []
    for i, (program, input_json) in enumerate(jobs):
        try:
            _check(program, input_json, lim)
            payloads.append(build_payload(program, input_json, lim, template_api=template_api, now_ms=now).encode("ascii"))
            slots.append(i)
        except SandboxError as exc:
            results[i] = exc
    if cancel is not None and cancel.cancelled:
        for i in slots:
            results[i] = SandboxError("the render was cancelled before it started", code="TEMPLATE_CANCELLED")
        return [r for r in results if r is not None]
    for i, reply in zip(slots, target.run_many(payloads, lim, cancel)):
        if isinstance(reply, SandboxError):
            results[i] = reply
            continue
        try:
            results[i] = _result(reply)
        except SandboxError as exc:
            results[i] = exc
    return [r for r in results if r is not None]
