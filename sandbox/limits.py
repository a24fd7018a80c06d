"""The sandbox's budgets, in one place.

Every field names the error code a render gets when it passes that budget. Values are checked
against hard maxima when a ``Limits`` is built, so a caller cannot configure the sandbox into a
state the worker cannot enforce (for example an int that wraps in the binding's int32
conversion, or a JS stack larger than the worker thread's C stack).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["HARD_MAXIMA", "Limits"]

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Budgets of one render. Defaults follow issue 3; every value is validated on creation."""

    template_chars: int = 131072
    """Longest template source in characters -> ``TEMPLATE_TOO_LARGE`` (checked by the EJS
    compiler; the sandbox refuses programs longer than ``PROGRAM_CHARS_FACTOR`` times this)."""

    input_bytes: int = 2 * MIB
    """Largest input snapshot (the ``input_json`` text, UTF-8 bytes) -> ``TEMPLATE_INPUT_LIMIT``."""

    output_bytes: int = 512 * KIB
    """Largest output in UTF-8 bytes, enforced at every append -> ``TEMPLATE_OUTPUT_LIMIT``."""

    memory_bytes: int = 16 * MIB
    """QuickJS heap of the render's VM (``set_memory_limit``) -> ``TEMPLATE_MEMORY_LIMIT``."""

    stack_bytes: int = 256 * KIB
    """QuickJS stack (``set_max_stack_size``) -> ``TEMPLATE_STACK_LIMIT``."""

    time_ms: float = 75.0
    """CPU milliseconds of compile plus run, cumulative over every entry into the VM of one render
    (kept by the host, not by the binding's per-call clock) -> ``TEMPLATE_TIME_LIMIT``."""

    template_time_ms: float = 0.0
    """CPU milliseconds each template of a many-template program may use of ``time_ms`` (0: no
    such limit), the program marking which template runs (``__tb.mark``, see worker.py's
    ``TemplateClock``) -> ``TEMPLATE_TIME_LIMIT`` naming the marked template."""

    job_steps: int = 1000
    """Pending-job steps allowed in one pass (one drain of the microtask queue) ->
    ``TEMPLATE_JOB_LIMIT``."""

    new_lookups: int = 32
    """Distinct new lookups one render may request through the bridge outbox ->
    ``TEMPLATE_DEPENDENCY_LIMIT`` (used by the bridge, issue 4)."""

    bridge_calls: int = 512
    """Bridge calls of one render, cache hits included -> ``TEMPLATE_BRIDGE_LIMIT`` (used by the
    bridge, issue 4)."""

    deadline_grace_ms: float = 1000.0
    """Wall-clock grace after ``time_ms`` before the parent kills a stuck worker (a C loop that
    never polls the interrupt, or a host-side conversion hang) -> ``TEMPLATE_TIME_LIMIT``. The
    hard deadline of a render is ``time_ms + deadline_grace_ms`` of wall time, counted from the
    moment the request is written to a ready worker, plus one second per MiB of input (parsing
    and freezing the input are not charged to ``time_ms``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            low, high = HARD_MAXIMA[f.name]
            kind = float if f.name.endswith("_ms") else int
            if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
                raise TypeError(f"Limits.{f.name} must be {'a number' if kind is float else 'an int'}, got {value!r}")
            if not low <= value <= high or value != value:
                raise ValueError(f"Limits.{f.name} must be between {low} and {high}, got {value!r}")

    @property
    def deadline_s(self) -> float:
        """The hard wall-clock deadline of one render, in seconds."""
        return (self.time_ms + self.deadline_grace_ms) / 1000.0

    def to_wire(self) -> dict[str, Any]:
        """The fields the worker needs, as JSON-ready values."""
        return {
            "output_bytes": self.output_bytes,
            "memory_bytes": self.memory_bytes,
            "stack_bytes": self.stack_bytes,
            "time_ms": float(self.time_ms),
            "job_steps": self.job_steps,
            **({"template_time_ms": float(self.template_time_ms)} if self.template_time_ms else {}),
        }


#: Inclusive (minimum, maximum) of every field. The maxima keep values inside what the worker can
#: enforce: ints below 2**31 (the binding converts ints to int32), a JS stack well inside the
#: worker's 8 MiB C stack, and a time budget short enough for the process-CPU clock.
HARD_MAXIMA: dict[str, tuple[float, float]] = {
    "template_chars": (1, 4 * MIB),
    "input_bytes": (2, 64 * MIB),
    "output_bytes": (0, 256 * MIB),
    "memory_bytes": (1 * MIB, 1024 * MIB),
    "stack_bytes": (16 * KIB, 4 * MIB),
    "time_ms": (1.0, 60_000.0),
    "template_time_ms": (0.0, 60_000.0),
    "job_steps": (1, 1_000_000),
    "new_lookups": (0, 100_000),
    "bridge_calls": (0, 1_000_000),
    "deadline_grace_ms": (100.0, 60_000.0),
}

#: The sandbox accepts compiled programs up to this many times ``template_chars`` characters
#: (generated code is larger than its template: escaped literals, append calls, line markers).
PROGRAM_CHARS_FACTOR = 8
