"""Render a template whose reads go through the lookup bridge: passes, misses, replays.

The VM never waits for the host. A pass runs the whole template against a table of answers the
host has already authorised; the first lookup the table cannot serve is recorded and voids the
pass. The host then checks every lease it holds, asks the trusted resolver (outside the VM),
checks again, adds the answer and replays the template *from the start* in a fresh VM. Replays
are deterministic because a pass sees nothing but the program and the table, so the final pass
reads exactly the answers recorded, and whatever a template did after a miss (catching it,
printing a forged result) died with that pass's context. While a pass runs, the worker asks the
host after every pending-job step (every await inside the VM) whether the leases still hold, so
a lease revoked mid-pass stops the pass at the next step.

Budgets (issue 4): at most ``Limits.new_lookups`` distinct lookups (``TEMPLATE_DEPENDENCY_LIMIT``
on the next one), ``Limits.bridge_calls`` API calls per pass (``TEMPLATE_BRIDGE_LIMIT``, enforced
in the VM), ``Limits.input_bytes`` of answers in total (``TEMPLATE_INPUT_LIMIT``), and one
``Limits.time_ms`` CPU budget shared by every pass (``TEMPLATE_TIME_LIMIT``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostic, TemplateError
from .leases import LeaseError, LeaseSet, Resolution
from .resolver import DependencyResolver, LookupRequest, parse_request

if TYPE_CHECKING:  # pragma: no cover
    from ..sandbox import CancelToken, Limits, Usage, WorkerPool

__all__ = ["BridgeResult", "DependencyRead", "render_with_dependencies"]


@dataclass(frozen=True, slots=True)
class DependencyRead:
    """One dependency a render read: what it asked, which resource answered, at which revision."""

    kind: str
    key: str
    id: str
    adapter_id: str
    revision: str
    config_revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "key": self.key, "id": self.id, "adapter_id": self.adapter_id,
                               "revision": self.revision}
        if self.config_revision is not None:
            out["config_revision"] = self.config_revision
        return out


@dataclass(frozen=True)
class BridgeResult:
    """The rendered text, what it read, and the leases it holds (re-check with :meth:`check_leases`)."""

    text: str
    usage: Usage
    reads: tuple[DependencyRead, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    leases: LeaseSet = field(default_factory=LeaseSet, compare=False, repr=False)

    def check_leases(self, when: str = "after the assembly") -> None:
        """Re-check every lease (template decision and dependencies); raise ``LeaseError`` if one is stale.

        Call it once all sources of an assembly have resolved: a later source may have changed
        what this render was allowed to read.
        """
        self.leases.check(when)


def _json_answer(resolution: Any, request: LookupRequest) -> str:
    if not isinstance(resolution, Resolution):
        raise TemplateError(f"the resolver gave no Resolution for {request.kind}",
                            code="TEMPLATE_DEPENDENCY_UNAVAILABLE")
    try:
        return json.dumps(resolution.content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TemplateError(f"the answer to {request.kind} is not JSON data: {exc}",
                            code="TEMPLATE_DEPENDENCY_UNAVAILABLE") from None


def _at_call(exc: TemplateError, compiled: Any, at: tuple[int, int] | None) -> TemplateError:
    """A resolver's refusal, placed at the template call that asked (when the engine said where)."""
    if exc.span is not None or at is None:
        return exc
    from ..spans import Span

    offset = compiled.offset(at[0], at[1])
    if offset is None:
        return exc
    return type(exc)(exc.message, code=exc.code, span=Span(offset, min(offset + 1, len(compiled.source))),
                     source=compiled.source, path=exc.path)


def _table(answers: Mapping[str, str]) -> str:
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + v for k, v in answers.items()) + "}"


def render_with_dependencies(
    source: str,
    resolver: DependencyResolver,
    *,
    limits: Limits | None = None,
    cancel: CancelToken | None = None,
    leases: LeaseSet | None = None,
    pool: WorkerPool | None = None,
    now: Any = None,
) -> BridgeResult:
    """Render EJS ``source`` with the template API, resolving its reads through ``resolver``.

    ``leases`` may hold leases taken before the render (the template's own usage decision); they
    are checked with the dependencies' at every check point. ``now`` is the render's clock, as in
    ``render_template``; every pass reads the same instant. Raises ``TemplateError``: the
    sandbox's codes (relocated to template line:column), the bridge's budgets, the resolver's
    refusals and ``SOURCE_POLICY_CHANGED``/``SOURCE_CONTENT_CHANGED`` for a stale lease.
    """
    from .. import sandbox
    from ..ejs.render import TemplateExecutionError, TemplateLimitError, _relocate, clock_ms, compile_source

    lim = limits if limits is not None else sandbox.Limits()
    # One clock for every pass (``now`` as in ``render_template``): a replay sees the same time.
    now_ms = sandbox.clock_ms(clock_ms(now))
    held = leases if leases is not None else LeaseSet()
    if len(source) > lim.template_chars:
        raise TemplateLimitError(
            f"the template has {len(source)} characters, more than the limit of {lim.template_chars}",
            code="TEMPLATE_TOO_LARGE",
        )
    held.check("before the render")
    if "<%" not in source and "%>" not in source:
        size = len(source.encode("utf-8", "surrogatepass"))
        if size > lim.output_bytes:
            raise TemplateExecutionError(f"the output is {size} bytes, more than the limit of {lim.output_bytes}",
                                         code="TEMPLATE_OUTPUT_LIMIT")
        usage = sandbox.Usage(time_ms=0.0, memory_bytes=0, output_bytes=size, passes=0, job_steps=0)
        return BridgeResult(source, usage, (), (), held)
    compiled = compile_source(source)
    answers: dict[str, str] = {}
    reads: list[DependencyRead] = []
    answer_bytes = 0
    used_ms = 0.0
    memory = 0
    passes = 0
    steps = 0

    stale: list[LeaseError] = []

    def lease_check(step: int) -> tuple[str, str] | None:
        """Between two pending-job steps of a pass (after an await): are the leases still current?

        Called in this process by the pool while the worker waits; the error is kept so the
        render fails with the lease's own ``LeaseError``, not the sandbox's copy of it.
        """
        try:
            held.check(f"after pending-job step {step}")
        except LeaseError as exc:
            stale.append(exc)
            return exc.code, exc.message
        return None

    def usage_now(output_bytes: int) -> Usage:
        return sandbox.Usage(time_ms=round(used_ms, 3), memory_bytes=memory, output_bytes=output_bytes,
                             passes=passes, job_steps=steps)

    while True:
        remaining = lim.time_ms - used_ms
        if remaining < 1.0:
            raise TemplateExecutionError(f"the render used up its time budget of {lim.time_ms:g} ms over "
                                         f"{passes} passes", code="TEMPLATE_TIME_LIMIT")
        held.check("before a pass")
        pass_limits = dataclasses.replace(lim, time_ms=max(remaining, 1.0))
        try:
            # No lease held, no check: a plain render sends no extra message per job step.
            result = sandbox.run_program(compiled.program, "null", limits=pass_limits, cancel=cancel, pool=pool,
                                         bridge=(_table(answers), lim.bridge_calls),
                                         lease_check=lease_check if len(held) else None, now_ms=now_ms)
        except TemplateError as exc:
            if stale:
                raise stale[-1] from None
            if exc.code == "TEMPLATE_TIME_LIMIT" and exc.message.startswith("the render used up its time budget"):
                # The pass ran on what was left of the budget: report the budget as configured.
                exc.message = f"the render used up its time budget of {lim.time_ms:g} ms" + (
                    f" over {passes + 1} passes" if passes else "")
            raise _relocate(exc, compiled) from None
        used_ms += result.usage.time_ms
        memory = max(memory, result.usage.memory_bytes)
        passes += result.usage.passes
        steps += result.usage.job_steps
        if result.pending is None:
            held.check("when the template completed")
            return BridgeResult(result.text, usage_now(result.usage.output_bytes), tuple(reads), (), held)
        # The VM's own request text is the table key: recomputing it here could differ in how
        # JSON escapes a lone surrogate, and the replay would then miss the answer forever.
        key = result.pending
        request = parse_request(key)
        if key in answers:  # the harness found no answer it was given: never expected
            raise TemplateError("the sandbox asked again for an answer it holds", code="INTERNAL_ERROR")
        if len(answers) >= lim.new_lookups:
            raise TemplateExecutionError(
                f"the template asked for more than {lim.new_lookups} distinct dependencies "
                f"(the next was {request.kind})", code="TEMPLATE_DEPENDENCY_LIMIT")
        if cancel is not None and cancel.cancelled:
            raise TemplateExecutionError("the render was cancelled", code="TEMPLATE_CANCELLED")
        held.check("before a new lookup")
        try:
            resolution = resolver.resolve(request)
        except TemplateError as exc:
            raise _at_call(exc, compiled, result.pending_at) from None
        text = _json_answer(resolution, request)
        held.add(f"{resolution.id} ({request.kind})", resolution.check_current)
        held.check("after a lookup was resolved")
        answer_bytes += len(text.encode("utf-8", "surrogatepass"))
        if answer_bytes > lim.input_bytes:
            raise TemplateLimitError(
                f"the answers to the template's lookups passed {lim.input_bytes} bytes of JSON",
                code="TEMPLATE_INPUT_LIMIT")
        answers[key] = text
        reads.append(DependencyRead(request.kind, key, resolution.id, resolution.adapter_id,
                                    resolution.revision, resolution.config_revision))
